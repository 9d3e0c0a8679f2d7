//! `inject` as a `GitOps` repository uses it: diffs that apply,
//! input that is not a Kubernetes object refused with a sentence, inputs and
//! outputs as kubectl users expect, and workload templates without a token.

use std::path::Path;

use common::cli::{Run, assert_exit, assert_prints, run, run_with_input, temp_file};
use serde_json::Value;

use crate::cli_support::{assert_diff_of, assert_holds, assert_starts};

const MANIFESTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/manifests");
const NOW: &str = "2026-01-01T00:00:00Z";
const POD: &str = "# a sandbox\napiVersion: v1\nkind: Pod\nmetadata:\n  name: demo\n  labels: {opensandbox.io/id: demo}\n  annotations: {opensandbox.io/timeout: 1h}\nspec:\n  containers:\n  - {name: sandbox, image: busybox, command: [sleep, '3600']}\n";
const POLICY_DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 3\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata:\n      labels: {app: web, opensandbox.io/id: web}\n      annotations:\n        opensandbox.io/network-policy: '{\"egress\":[{\"action\":\"allow\",\"target\":\"pypi.org\"}]}'\n    spec:\n      containers:\n      - {name: sandbox, image: busybox, command: [sleep, '3600']}\n";

/// A directory with the repository's manifests and a Pod in it.
fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "service-deployment.yaml",
        "job.yaml",
        "list.yaml",
        "configmap.yaml",
    ] {
        std::fs::copy(Path::new(MANIFESTS).join(name), dir.path().join(name)).unwrap();
    }
    std::fs::write(dir.path().join("pod.yaml"), POD).unwrap();
    dir
}

fn inject(dir: &Path, args: &[&str]) -> Run {
    let fixed = ["--now", NOW, "--egress-token", "t0k3n"];
    run(&[&["inject"], args, &fixed].concat(), dir)
}

/// `inject -f name` in a fresh directory that holds only `name`, with
/// `text`.
fn inject_file(name: &str, text: &str) -> Run {
    let (dir, _) = temp_file(name, text);
    run(&["inject", "-f", name], dir.path())
}

/// The binary with `args` and `input` on its standard input, in a fresh
/// empty directory.
fn run_on_stdin(args: &[&str], input: &[u8]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    run_with_input(args, dir.path(), input)
}

/// Fails the test unless the object `pod` has the annotation `key` with
/// the string `value`.
#[track_caller]
fn assert_annotation(pod: &Value, key: &str, value: &str) {
    assert_eq!(pod["metadata"]["annotations"][key], value, "{key}");
}

/// What a run printed, as JSON; it must have exited 0.
#[track_caller]
fn printed<T: serde::de::DeserializeOwned>(r: &Run) -> T {
    assert_eq!(r.code, 0, "{}", r.stderr);
    serde_json::from_str(&r.stdout).unwrap()
}

/// Item 2: `patch -p1` with the diff, on the original file, gives exactly
/// what `-o manifest` writes: for a Pod and for a stream, with no `---`
/// added to a file that has none.
/// contract: manifest.diff, manifest.output
#[test]
fn a_diff_applies_to_the_file_and_gives_the_manifest() {
    let dir = workdir();
    let d = dir.path();
    for file in ["pod.yaml", "service-deployment.yaml", "job.yaml"] {
        let manifest = inject(d, &["-f", file]);
        assert_eq!(manifest.code, 0, "{file}: {}", manifest.stderr);
        assert!(
            !manifest.stdout.starts_with("---"),
            "{file}: {}",
            manifest.stdout
        );
        let diff = inject(d, &["-f", file, "-o", "diff"]);
        assert_eq!(diff.code, 1, "{file}: changes exit 1: {}", diff.stderr);
        assert_diff_of(&diff.stdout, file);
        assert!(!diff.stdout.contains("\n+---\n"), "{file}: {}", diff.stdout);
        let applied = tempfile::tempdir().unwrap();
        std::fs::copy(d.join(file), applied.path().join(file)).unwrap();
        let mut patch = std::process::Command::new("patch")
            .args(["-p1", "--quiet"])
            .current_dir(applied.path())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("patch(1) is installed");
        std::io::Write::write_all(&mut patch.stdin.take().unwrap(), diff.stdout.as_bytes())
            .unwrap();
        assert!(patch.wait().unwrap().success(), "{file}: patch failed");
        let patched = std::fs::read_to_string(applied.path().join(file)).unwrap();
        assert_eq!(patched, manifest.stdout, "{file}");
        // And the result, injected again, has nothing left to change.
        let again = inject(applied.path(), &["-f", file, "-o", "diff"]);
        assert_eq!(
            (again.code, again.stdout.as_str()),
            (0, ""),
            "{file}: {}",
            again.stderr
        );
    }
}

/// contract: manifest.diff
#[test]
fn diff_colours_and_exit_codes() {
    let dir = workdir();
    let d = dir.path();
    let never = inject(d, &["-f", "pod.yaml", "-o", "diff", "--color", "never"]);
    let auto = inject(d, &["-f", "pod.yaml", "-o", "diff"]);
    assert_eq!(
        never.stdout, auto.stdout,
        "auto is plain when not a terminal"
    );
    assert!(!never.stdout.contains('\x1b'));
    let always = inject(d, &["-f", "pod.yaml", "-o", "diff", "--color=always"]);
    assert_eq!(always.code, 1);
    assert!(always.stdout.contains("\x1b[32m+"), "{}", always.stdout);
    assert_starts(&always.stdout, "\x1b[1m--- a/pod.yaml");
    // Nothing to change: exit 0, no output.
    let none = inject(d, &["-f", "configmap.yaml", "-o", "diff", "--color=always"]);
    assert_prints(&none, 0, "");
    let help = run(&["inject", "--help"], d).stdout;
    assert_holds(&help, &["exit 1 when there are changes", "--color <WHEN>"]);
}

/// Item 2: a single-document workload has a JSON patch too, which applied
/// to the input gives the injected workload.
/// contract: manifest.output
#[test]
fn a_single_workload_has_a_json_patch() {
    let dir = workdir();
    let d = dir.path();
    let ops: json_patch::Patch = printed(&inject(d, &["-f", "job.yaml", "-o", "patch"]));
    assert!(!ops.0.is_empty());
    let mut job: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(d.join("job.yaml")).unwrap()).unwrap();
    json_patch::patch(&mut job, &ops).unwrap();
    let injected: Value = printed(&inject(d, &["-f", "job.yaml", "-o", "json"]));
    assert_eq!(job, injected);
    let several = inject(d, &["-f", "service-deployment.yaml", "-o", "patch"]);
    assert_eq!(several.code, 2, "{}", several.stdout);
}

/// Item 3: what is not a Kubernetes object is an error (exit 2) with a
/// sentence, never a Rust type name; a tab is called a tab.
/// contract: cli.input-errors
#[test]
fn input_that_is_not_an_object_is_refused_with_a_sentence() {
    for (text, says) in [
        (
            "",
            "in.yaml holds no Kubernetes object: it is empty or only comments",
        ),
        ("# nothing\n", "in.yaml holds no Kubernetes object"),
        ("hello\n", "in.yaml is a string, not a Kubernetes object"),
        ("- a\n- b\n", "in.yaml is a list, not a Kubernetes object"),
        ("[1, 2]\n", "in.yaml is a list, not a Kubernetes object"),
        (
            "metadata: {name: x}\nspec: {}\n",
            "in.yaml has no apiVersion",
        ),
        (
            "apiVersion: v1\nmetadata: {name: x}\n",
            "in.yaml has no kind",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n",
            "in.yaml, line 4 column 1: a tab indents this line",
        ),
        ("{\"kind\": \"Pod\"", "in.yaml is not valid JSON"),
    ] {
        let r = inject_file("in.yaml", text);
        assert_exit(&r, 2, says);
        assert!(r.stdout.is_empty(), "{text:?}: {}", r.stdout);
    }
    let empty = run_on_stdin(&["inject", "-f", "-"], b"");
    assert_exit(&empty, 2, "standard input holds no Kubernetes object");
}

/// Item 3: a Pod the webhook cannot read is denied with a sentence that
/// names no type of the program (`PodView`, `MetaView`, ...), here and in
/// `review`'s answer.
/// contract: cli.input-errors, manifest.denial
#[test]
fn no_internal_type_name_in_any_message() {
    let names = [
        "PodView",
        "MetaView",
        "SpecView",
        "ContainerView",
        "ReviewIn",
        "RequestIn",
        "struct",
    ];
    let pods = [
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": 5}"#,
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"opensandbox.io/id": "x"}}, "spec": {"containers": [{"name": "c", "env": [5]}]}}"#,
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"opensandbox.io/id": "x"}}, "spec": 7}"#,
    ];
    for pod in pods {
        let r = run_on_stdin(&["inject", "-f", "-"], pod.as_bytes());
        assert_eq!(r.code, 1, "{pod}: {}", r.stderr);
        assert_starts(&r.stderr, "the pod could not be read: ");
        for name in names {
            assert!(!r.stderr.contains(name), "{pod}: {}", r.stderr);
        }
        let review = format!(
            r#"{{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {{"uid": "u", "kind": {{"group": "", "version": "v1", "kind": "Pod"}}, "resource": {{"group": "", "version": "v1", "resource": "pods"}}, "operation": "CREATE", "object": {pod}}}}}"#
        );
        let r = run_on_stdin(&["review", "-f", "-"], review.as_bytes());
        assert_eq!(r.code, 0, "{}", r.stderr);
        for name in names {
            assert!(!r.stdout.contains(name), "{pod}: {}", r.stdout);
        }
    }
    let r = run_on_stdin(&["review", "-f", "-"], b"\"x\"");
    assert_eq!(r.code, 2);
    for name in names {
        assert!(!r.stderr.contains(name), "{}", r.stderr);
    }
}

/// Item 7: `-f` repeated, a directory (its subdirectories with `-R`), and
/// `-f -`, as kubectl reads them.
/// contract: manifest.inputs
#[test]
fn files_directories_and_standard_input() {
    let dir = workdir();
    let d = dir.path();
    std::fs::create_dir_all(d.join("nested/deeper")).unwrap();
    std::fs::write(d.join("nested/a.yaml"), POD.replace("demo", "a")).unwrap();
    std::fs::write(d.join("nested/notes.md"), "not read").unwrap();
    std::fs::write(d.join("nested/deeper/b.yml"), POD.replace("demo", "b")).unwrap();
    let names = |r: &Run| -> Vec<String> {
        let json: Value =
            serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{e}: {}", r.stdout));
        let items = json["items"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| vec![json.clone()]);
        items
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let both = inject(d, &["-f", "pod.yaml", "-f", "job.yaml", "-o", "json"]);
    assert_eq!(both.code, 0, "{}", both.stderr);
    assert_eq!(names(&both), ["demo", "once"]);
    let flat = inject(d, &["-f", "nested", "-o", "json"]);
    assert_eq!(names(&flat), ["a"], "{}", flat.stderr);
    let deep = inject(d, &["-f", "nested", "-R", "-o", "json"]);
    assert_eq!(names(&deep), ["a", "b"], "{}", deep.stderr);
    let piped = run_with_input(
        &[
            "inject", "-f", "job.yaml", "-f", "-", "--now", NOW, "-o", "json",
        ],
        d,
        POD.as_bytes(),
    );
    assert_eq!(names(&piped), ["once", "demo"], "{}", piped.stderr);
    // Several files as a manifest stream: each file starts a document.
    let stream = inject(d, &["-f", "pod.yaml", "-f", "configmap.yaml"]);
    let configmap = std::fs::read_to_string(d.join("configmap.yaml")).unwrap();
    assert!(
        stream.stdout.ends_with(&format!("\n---\n{configmap}")),
        "{}",
        stream.stdout
    );
    // A diff per file, each with its own name.
    let diff = inject(d, &["-f", "pod.yaml", "-f", "job.yaml", "-o", "diff"]);
    assert_eq!(diff.code, 1);
    assert!(diff.stdout.contains("+++ b/pod.yaml\n") && diff.stdout.contains("+++ b/job.yaml\n"));
    let empty_dir = d.join("nested/deeper/empty");
    std::fs::create_dir(&empty_dir).unwrap();
    let r = inject(d, &["-f", "nested/deeper/empty"]);
    assert_exit(&r, 2, "holds no .yaml, .yml or .json files");
}

/// Item 7: `-o yaml` and `-o json` convert; `--quiet` drops the notes but
/// not the warnings.
/// contract: manifest.output, manifest.quiet
#[test]
fn conversions_and_quiet() {
    let dir = workdir();
    let d = dir.path();
    let json = inject(d, &["-f", "pod.yaml", "-o", "json"]);
    let pod: Value = printed(&json);
    assert_annotation(&pod, "opensandbox.io/expires-at", "2026-01-01T01:00:00Z");
    std::fs::write(d.join("pod.json"), &json.stdout).unwrap();
    let yaml = inject(d, &["-f", "pod.json", "-o", "yaml"]);
    assert_eq!(yaml.code, 0, "{}", yaml.stderr);
    assert_holds(
        &yaml.stdout,
        &[
            "  name: demo\n",
            "opensandbox.io/expires-at: \"2026-01-01T01:00:00Z\"\n",
        ],
    );
    let back: Value = serde_yaml_ng::from_str(&yaml.stdout).unwrap();
    assert_eq!(back, pod);
    // A List and a stream become one List of all their objects.
    let list = inject(
        d,
        &[
            "-f",
            "list.yaml",
            "-f",
            "service-deployment.yaml",
            "-o",
            "json",
        ],
    );
    let list: Value = serde_json::from_str(&list.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().unwrap().len(), 6);

    let noisy = inject(d, &["-f", "service-deployment.yaml"]);
    assert_holds(&noisy.stderr, &["passed through unchanged"]);
    let plain = POD.replace("  labels: {opensandbox.io/id: demo}\n", "");
    std::fs::write(
        d.join("plain.yaml"),
        format!(
            "{plain}---\n{}",
            POD.replace("Timeout", "x").replace("timeout", "Timeout")
        ),
    )
    .unwrap();
    let loud = inject(d, &["-f", "plain.yaml"]);
    assert_holds(&loud.stderr, &["skipped (not-a-sandbox)"]);
    let quiet = inject(d, &["-f", "plain.yaml", "--quiet"]);
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert_eq!(
        quiet.stderr,
        "document 2 (Pod/demo): warning: annotation opensandbox.io/Timeout is ignored: did you mean opensandbox.io/timeout?\n"
    );
    assert_eq!(quiet.stdout, loud.stdout);
}

/// Item 7: an object over the apiserver's 3 MiB request limit is
/// written, with a warning (kubectl apply would fail).
/// contract: manifest.size-warning
#[test]
fn an_object_over_the_request_limit_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let big = "x".repeat(3 * 1024 * 1024);
    let text = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: big}}\ndata: {{blob: {big}}}\n---\n{POD}"
    );
    std::fs::write(dir.path().join("big.yaml"), text).unwrap();
    let r = inject(dir.path(), &["-f", "big.yaml", "-q"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stderr,
        "warning: document 1 (ConfigMap/big): 3.0 MiB as JSON, over the apiserver's 3 MiB request limit: kubectl apply will fail\n"
    );
    let small = inject(dir.path(), &["-f", "big.yaml", "-q", "-o", "json"]);
    assert!(small.stdout.contains("\"big\""));
}

/// Item 1: a workload's template gets no egress token (its pods get one
/// each at admission), two runs give the same bytes, and the webhook
/// completes a pod made from that template once, with one token in all
/// three places.
/// contract: manifest.token-left-out, manifest.reproducible
#[test]
fn a_template_gets_no_token_and_its_pods_get_their_own() {
    let (dir, _) = temp_file("web.yaml", POLICY_DEPLOYMENT);
    let d = dir.path();
    // No --egress-token: a random one, were it written.
    let first = run(&["inject", "-f", "web.yaml"], d);
    let second = run(&["inject", "-f", "web.yaml"], d);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(first.stdout, second.stdout, "two runs differ");
    assert_holds(
        &first.stderr,
        &[
            "spec.template: the egress token is left out of the template: the webhook gives each pod its own at admission",
        ],
    );
    for word in [
        "egress-auth-token",
        "OPENSANDBOX_EGRESS_TOKEN",
        "OPENSANDBOX-EGRESS-AUTH",
    ] {
        assert!(!first.stdout.contains(word), "{word} in\n{}", first.stdout);
    }
    assert!(first.stdout.contains("name: egress\n"), "{}", first.stdout);
    assert!(
        !run(&["inject", "-f", "web.yaml", "-q"], d)
            .stderr
            .contains("token")
    );
    // Injecting the output again changes nothing.
    std::fs::write(d.join("out.yaml"), &first.stdout).unwrap();
    let again = run(&["inject", "-f", "out.yaml", "-o", "diff"], d);
    assert_prints(&again, 0, "");

    // A pod of the template, admitted: its own token, in the annotation,
    // the sidecar's env and its probe header; admitted again: nothing.
    let workload: Value = serde_yaml_ng::from_str(&first.stdout).unwrap();
    let template = &workload["spec"]["template"];
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": template["metadata"], "spec": template["spec"]});
    std::fs::write(d.join("pod.json"), pod.to_string()).unwrap();
    let admitted = run(
        &["inject", "-f", "pod.json", "--egress-token", "pod-own"],
        d,
    );
    let pod: Value = printed(&admitted);
    assert_annotation(&pod, "opensandbox.io/egress-auth-token", "pod-own");
    let sidecar = pod["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "egress")
        .unwrap();
    let env = sidecar["env"].as_array().unwrap();
    assert_eq!(
        env.last().unwrap(),
        &serde_json::json!({"name": "OPENSANDBOX_EGRESS_TOKEN", "value": "pod-own"})
    );
    assert_eq!(
        sidecar["readinessProbe"]["httpGet"]["httpHeaders"],
        serde_json::json!([{"name": "OPENSANDBOX-EGRESS-AUTH", "value": "pod-own"}])
    );
    std::fs::write(d.join("admitted.json"), &admitted.stdout).unwrap();
    let twice = run(&["inject", "-f", "admitted.json", "-o", "patch"], d);
    assert_eq!(twice.stdout, "[]\n", "{}", twice.stderr);
}

/// Item 9a: a timeout too long to count in seconds is beyond the
/// representable time range like any other too long timeout; unquoted, it
/// is a number too large to read.
/// contract: expiry.range
#[test]
fn a_timeout_beyond_any_number_is_out_of_range() {
    for (timeout, shown) in [
        ("'999999999999999999999'", "999999999999999999999s"),
        ("'99999999999999999999h'", "99999999999999999999h"),
        ("'18446744073709551615'", "18446744073709551615s"),
    ] {
        let pod = POD.replace(
            "opensandbox.io/timeout: 1h",
            &format!("opensandbox.io/timeout: {timeout}"),
        );
        let r = inject_file("pod.yaml", &pod);
        assert_exit(
            &r,
            1,
            &format!(
                "annotation opensandbox.io/timeout is {shown}, which puts the expiry beyond the representable time range; use a shorter timeout."
            ),
        );
    }
    let pod = POD.replace(
        "opensandbox.io/timeout: 1h",
        "opensandbox.io/timeout: 999999999999999999999",
    );
    let r = inject_file("pod.yaml", &pod);
    assert_exit(
        &r,
        2,
        "pod.yaml cannot be read: metadata.annotations.opensandbox.io/timeout: the number at line 7 column 41 is too large to read; quote it",
    );
}
