//! The crate's layers, bottom to top, and the check that every import in
//! `src/**/*.rs` runs downward and that no files import each other, directly
//! or around a loop.
//!
//! An import is a `use` of a path starting with `crate::`, `super::`,
//! `self::` or a child module's name, or such a path written inline
//! (`crate::config::Config::default()`). Its target is the file that defines
//! the longest prefix of the path, so `crate::mutate::Denial` is `mutate/mod.rs`
//! (which re-exports it) and `crate::mutate::denial::Denial` is `denial.rs`.

mod check;
mod read;
mod self_test;

use std::path::Path;

use check::check;

/// The layers, bottom to top, of each directory whose order is held; one
/// string per layer, its modules separated by spaces. `mod` is the
/// directory's own `mod.rs` (`lib.rs` at the root). A module imports only
/// from layers below its own, never from its own layer; a `tests` module sits
/// above everything in its directory. Every module of a listed directory must
/// be listed. In unlisted directories only loops are refused.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "duration certs json files yaml_depth",
            "config",
            "mutate",
            "workload lifecycle",
            "review manifest",
            "admin",
            "case_runner server",
            "controller",
            "cli",
            "mod",
        ],
    ),
    (
        "mutate",
        &[
            "quote patch",
            "read",
            "intent",
            "context",
            "denial select",
            "inject mistakes",
            "main_container",
            "update",
            "mod",
        ],
    ),
    (
        "mutate::read",
        &["k8s raw", "lists", "pod", "affinity", "mod"],
    ),
    (
        "mutate::intent",
        &[
            "typo",
            "platform policy expires_at token egress_env lifecycle",
            "mod",
        ],
    ),
    (
        "mutate::inject",
        &[
            "same run_as upstream record drops probe",
            "owned",
            "held",
            "expiry execd egress sandbox",
            "kept",
            "layout server",
            "automount guard",
            "mod",
        ],
    ),
    ("json", &["error visit", "text", "mod"]),
    ("admin", &["readiness metrics", "probes", "mod"]),
    (
        "server",
        &[
            "log metrics shutdown",
            "reload",
            "tls",
            "settings",
            "conn heavy",
            "budget handshake",
            "http listener",
            "admin",
            "mod",
        ],
    ),
];

fn sources(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("src is readable").path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            // main.rs is the binary, a crate of its own above the library.
            if rel != "main.rs" {
                out.push((
                    rel,
                    std::fs::read_to_string(&path).expect("source is UTF-8"),
                ));
            }
        }
    }
}

#[test]
fn imports_run_down_the_layers_and_never_loop() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    let found = check(&files, LAYERS);
    assert!(
        found.is_empty(),
        "layers broken (see LAYERS in tests/quick/layers.rs):\n{}",
        found.join("\n")
    );
}
