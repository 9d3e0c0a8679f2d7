//! contract: manifest.inputs, limits.yaml-depth, cli.test-report
//!
//! The CLI on hostile files, against the binary (`SANDBOX_WEBHOOK_UNDER_TEST`
//! runs another build's), each run killed at a time limit:
//! - a stream of many small documents: `inject` held every document's
//!   values, patches and output at once (3.15 GiB for 100,000, some 31 KiB
//!   a document); now one document's values at a time, and its output;
//! - `inject -R` through a link back up the tree: the same pod printed 41
//!   times, until the path was too long; now each file is read once;
//! - a FIFO (or a link to `/dev/zero`) among the manifests: `inject` and
//!   `test` blocked on it for ever; now passed over with a message;
//! - YAML nested 100,000 deep: a parse of minutes, quadratic; now refused
//!   at once, in `inject` and `config validate` alike.

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::attack::{Bound, alone_blocking};
use common::cli::{Bounded, run_bounded};
use common::processes::under_test;
use tempfile::TempDir;
use tokio::sync::MutexGuard;

/// Far longer than any of these takes once fixed; far shorter than a hang.
const LIMIT: Duration = Duration::from_secs(20);

fn run(args: &[&str], dir: &Path) -> Bounded {
    let run = run_bounded(&under_test(), args, dir, LIMIT);
    assert!(
        run.code.is_some(),
        "{args:?} was killed after {:?}: it hung (stderr: {})",
        run.took,
        run.stderr
    );
    run
}

/// A sandbox pod with a command, as one document of a stream.
fn pod(i: usize) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: p{i}\n  labels: {{opensandbox.io/id: x}}\nspec:\n  containers: [{{name: main, image: busybox, command: [sh]}}]\n"
    )
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// This test alone, and a fresh directory for the CLI to run in.
fn alone_in_a_tempdir() -> (MutexGuard<'static, ()>, TempDir) {
    let alone = alone_blocking();
    (alone, tempfile::tempdir().unwrap())
}

/// A new directory `name` in `dir` holding a pod as `pod_file` and a FIFO
/// as `fifo_file`: a read of the FIFO blocks until a writer comes, and
/// none ever does.
fn pod_beside_a_fifo(dir: &Path, name: &str, pod_file: &str, fifo_file: &str) -> PathBuf {
    let folder = dir.join(name);
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(folder.join(pod_file), pod(0)).unwrap();
    mkfifo(&folder.join(fifo_file));
    folder
}

/// contract: manifest.inputs
#[test]
fn inject_holds_one_document_at_a_time() {
    const DOCS: usize = 5_000;
    let (_alone, dir) = alone_in_a_tempdir();
    std::fs::write(dir.path().join("one.yaml"), pod(0)).unwrap();
    let many: String = (0..DOCS).map(pod).collect();
    std::fs::write(dir.path().join("many.yaml"), &many).unwrap();
    let one = run(&["inject", "-q", "-f", "one.yaml"], dir.path());
    let all = run(&["inject", "-q", "-f", "many.yaml"], dir.path());
    assert_eq!((one.code, all.code), (Some(0), Some(0)), "{}", all.stderr);
    // What grows with the documents: the input (which is read whole) and
    // what each document leaves behind; not the output (about 1.5 KiB a
    // pod), which goes to a temporary file as each document is done.
    let grown = all.peak_kib.saturating_sub(one.peak_kib) * 1024;
    let per_document = grown / DOCS as u64;
    eprintln!(
        "{DOCS} documents ({} KiB in, {} KiB out): peak RSS {} KiB, {} KiB for one; {per_document} bytes a document, input and output included",
        many.len() / 1024,
        all.stdout_bytes / 1024,
        all.peak_kib,
        one.peak_kib
    );
    assert!(
        all.stdout_bytes > DOCS as u64 * 1024,
        "every pod written out"
    );
    // Before: some 31 KiB a document (each one's values, patch and text),
    // then about 2 KiB (its output kept whole until the end).
    assert!(
        per_document <= 1024,
        "{per_document} bytes a document, input and output included"
    );
}

/// contract: manifest.inputs
#[test]
fn inject_reads_each_file_once_through_a_link_loop() {
    let (_alone, dir) = alone_in_a_tempdir();
    let tree = dir.path().join("manifests");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("sub/pod.yaml"), pod(0)).unwrap();
    // A link back up the tree, and another name for the subdirectory.
    std::os::unix::fs::symlink("..", tree.join("sub/up")).unwrap();
    std::os::unix::fs::symlink("sub", tree.join("again")).unwrap();
    std::os::unix::fs::symlink("sub/pod.yaml", tree.join("same.yaml")).unwrap();
    let r = run(
        &["inject", "-R", "-f", "manifests", "-o", "json"],
        dir.path(),
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let json = std::fs::read_to_string(&r.stdout).unwrap();
    let printed: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        printed["kind"],
        "Pod",
        "the one pod, printed once (not a List of copies): {}",
        &json[..json.len().min(200)]
    );
    assert!(r.stderr.contains("already read"), "{}", r.stderr);
}

/// contract: manifest.inputs, cli.test-report
#[test]
fn what_is_not_a_regular_file_is_passed_over() {
    let (_alone, dir) = alone_in_a_tempdir();
    let tree = pod_beside_a_fifo(dir.path(), "manifests", "a.yaml", "b.yaml");
    std::os::unix::fs::symlink("/dev/zero", tree.join("c.yaml")).unwrap();
    let r = run(&["inject", "-f", "manifests", "-o", "json"], dir.path());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    for (name, what) in [("b.yaml", "FIFO"), ("c.yaml", "character device")] {
        assert!(
            r.stderr
                .lines()
                .any(|l| l.contains(name) && l.contains(what) && l.contains("passed over")),
            "{name}: {}",
            r.stderr
        );
    }
    // `test` on a case that is a FIFO: passed over, the others run.
    pod_beside_a_fifo(dir.path(), "cases", "good.pod.yaml", "hang.pod.yaml");
    let r = run(&["test", "cases", "--update"], dir.path());
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let report = std::fs::read_to_string(&r.stdout).unwrap();
    assert!(report.contains("skipped  hang"), "{report}");
    assert!(report.contains("1 updated, 1 skipped"), "{report}");
}

/// contract: limits.yaml-depth
#[test]
fn yaml_nested_100000_deep_is_refused_at_once() {
    let (_alone, dir) = alone_in_a_tempdir();
    let deep = |head: &str| format!("{head}{}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    std::fs::write(dir.path().join("config.yaml"), deep("excludedNamespaces: ")).unwrap();
    let manifest = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: x}}\n{}",
        deep("data: ")
    );
    std::fs::write(dir.path().join("deep.yaml"), manifest).unwrap();
    // The control window: the same commands on a small file of each.
    std::fs::write(dir.path().join("small.yaml"), "excludedNamespaces: [[a]]\n").unwrap();
    let small = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\n";
    std::fs::write(dir.path().join("shallow.yaml"), small).unwrap();
    let controls = [
        run(&["config", "validate", "small.yaml"], dir.path()).took,
        run(&["inject", "-f", "shallow.yaml"], dir.path()).took,
    ];
    for ((args, code), control) in [
        (&["config", "validate", "config.yaml"][..], 1),
        (&["inject", "-f", "deep.yaml"][..], 2),
    ]
    .into_iter()
    .zip(controls)
    {
        let r = run(args, dir.path());
        eprintln!("{args:?}: exit {:?} after {:?}", r.code, r.took);
        assert_eq!(r.code, Some(code), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("nested more than 128 deep (line "),
            "{args:?}: {}",
            r.stderr
        );
        // 29 s in a release build before, quadratic; a debug build's
        // start-up and a linear scan now.
        Bound::new(Duration::from_secs(3)).check(&format!("{args:?}"), r.took, control);
    }
}
