//! `inject` on real manifests: each shape a repository holds, its
//! pod templates injected, everything else passed through as written.

use common::cli::{Run, assert_exit, assert_prints, run, stdout_of, temp_file};
use std::path::Path;

use serde_json::Value;

use crate::cli_support::{assert_a_line_holds, assert_diff_of, assert_lacks};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/manifests");
const NOW: &str = "2026-01-01T00:00:00Z";

/// `inject -f file` in `dir` at [`NOW`] with a fixed egress token, then
/// the flags `extra`.
fn inject_in(dir: &Path, file: &str, extra: &[&str]) -> Run {
    let fixed = ["inject", "-f", file, "--now", NOW, "--egress-token", "t"];
    run(&[&fixed[..], extra].concat(), dir)
}

/// `inject` on `file` of tests/manifests, then the flags `extra`.
fn inject_with(file: &str, extra: &[&str]) -> Run {
    inject_in(Path::new(DIR), &format!("{DIR}/{file}"), extra)
}

fn inject(file: &str) -> Run {
    inject_with(file, &[])
}

/// `inject` on `file` of tests/manifests, which must exit 0.
#[track_caller]
fn injected(file: &str) -> Run {
    let r = inject(file);
    assert_eq!(r.code, 0, "{file}: {}", r.stderr);
    r
}

/// The text of `file` of tests/manifests.
fn manifest(file: &str) -> String {
    std::fs::read_to_string(format!("{DIR}/{file}")).unwrap()
}

/// `inject` on `file` of tests/manifests, which must exit 0, and the
/// file's text.
#[track_caller]
fn injected_and_input(file: &str) -> (Run, String) {
    (injected(file), manifest(file))
}

/// `inject` on `file` of tests/manifests, which must exit 0, and the
/// documents it wrote.
#[track_caller]
fn injected_and_docs(file: &str) -> (Run, Vec<Value>) {
    let r = injected(file);
    let out = docs(&r.stdout);
    (r, out)
}

fn docs(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

fn annotations(v: &Value) -> &serde_json::Map<String, Value> {
    v.get("annotations").and_then(Value::as_object).unwrap()
}

/// contract: manifest.inputs, manifest.templates, manifest.pass-through, manifest.unchanged-text
#[test]
fn service_and_deployment_file() {
    let (r, input) = injected_and_input("service-deployment.yaml");
    // The Service is written back as it was, comments included, and first,
    // with no `---` before it, as the file has none.
    let service = input.split("---\n").next().unwrap();
    assert!(r.stdout.starts_with(service), "{}", r.stdout);
    assert!(r.stdout.contains("name: web   # trailing comment"));
    let out = docs(&r.stdout);
    let kinds: Vec<_> = out.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Service", "Deployment", "Pod", "ConfigMap"]);
    // The Deployment's template is injected; timeout stays, no expires-at.
    let t = &out[1]["spec"]["template"];
    let names: Vec<_> = t["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["execd-installer"]);
    assert_eq!(
        t["spec"]["containers"][0]["command"][0],
        "/opt/opensandbox/bootstrap.sh"
    );
    let a = annotations(&t["metadata"]);
    assert_eq!(a["opensandbox.io/timeout"], "1h");
    assert!(!a.contains_key("opensandbox.io/expires-at"), "{a:?}");
    assert_eq!(out[1]["spec"]["replicas"], 1);
    // The Pod gets its expiry.
    assert_eq!(
        annotations(&out[2]["metadata"])["opensandbox.io/expires-at"],
        "2026-01-01T01:00:00Z"
    );
    // The labelled ConfigMap: unchanged, with a clear note.
    assert!(
        r.stderr.contains(
            "document 4 (ConfigMap/cm): labelled opensandbox.io/id but not a Pod nor a workload"
        ),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("no containers"), "{}", r.stderr);
}

/// contract: manifest.inputs, manifest.pass-through
#[test]
fn a_list_has_its_pods_injected_in_place() {
    let (_, out) = injected_and_docs("list.yaml");
    assert_eq!(out.len(), 1);
    assert_eq!(out[0]["kind"], "List");
    let items = out[0]["items"].as_array().unwrap();
    assert_eq!(
        items[0]["spec"]["initContainers"][0]["name"],
        "execd-installer"
    );
    assert_eq!(
        items[1],
        serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})
    );
}

/// contract: manifest.templates
#[test]
fn job_and_cronjob_templates_are_injected_at_their_paths() {
    for (file, pointer) in [
        ("job.yaml", "/spec/template"),
        ("cronjob.yaml", "/spec/jobTemplate/spec/template"),
    ] {
        let r = injected(file);
        let out = docs(&r.stdout);
        let t = out[0].pointer(pointer).unwrap();
        assert_eq!(
            t["spec"]["initContainers"][0]["name"], "execd-installer",
            "{file}"
        );
        assert_eq!(t["spec"]["restartPolicy"], "Never", "{file}");
        let a = t["metadata"].get("annotations").and_then(Value::as_object);
        assert!(
            a.is_none_or(|a| !a.contains_key("opensandbox.io/expires-at")),
            "{file}: {a:?}"
        );
    }
    let cron = docs(&inject("cronjob.yaml").stdout);
    assert_eq!(cron[0]["spec"]["schedule"], "0 3 * * *");
}

/// agent-sandbox 1.0 serves only `v1beta1`: its Sandboxes are injected at
/// `spec.podTemplate` beside `v1alpha1` ones; a version `inject` does not
/// know is written back as it was, with a note naming the known ones.
#[test]
fn sandboxes_of_both_versions_are_injected_and_a_future_one_is_noted() {
    let (r, out) = injected_and_docs("sandboxes.yaml");
    let versions: Vec<_> = out
        .iter()
        .map(|d| d["apiVersion"].as_str().unwrap())
        .collect();
    assert_eq!(
        versions,
        [
            "agents.x-k8s.io/v1beta1",
            "agents.x-k8s.io/v1alpha1",
            "agents.x-k8s.io/v2"
        ]
    );
    for (i, sandbox) in out[..2].iter().enumerate() {
        let t = &sandbox["spec"]["podTemplate"];
        assert_eq!(
            t["spec"]["initContainers"][0]["name"],
            "execd-installer",
            "document {}",
            i + 1
        );
        assert_eq!(
            t["spec"]["containers"][0]["command"][0],
            "/opt/opensandbox/bootstrap.sh"
        );
        assert!(sandbox["spec"].get("template").is_none());
    }
    let beta = &out[0]["spec"];
    assert_eq!(beta["shutdownPolicy"], "Delete");
    let a = annotations(&beta["podTemplate"]["metadata"]);
    assert_eq!(a["opensandbox.io/timeout"], "30m");
    assert!(!a.contains_key("opensandbox.io/expires-at"), "{a:?}");
    // The unknown version: its own text back, untouched, and the note.
    let input = manifest("sandboxes.yaml");
    let future = input.rsplit("---\n").next().unwrap();
    assert!(r.stdout.ends_with(future), "{}", r.stdout);
    assert!(
        r.stderr.contains(
            "document 3 (Sandbox/future): Sandbox agents.x-k8s.io/v2 is not a version inject knows \
             (agents.x-k8s.io/v1alpha1, agents.x-k8s.io/v1beta1): passed through unchanged"
        ),
        "{}",
        r.stderr
    );
    assert_lacks(&r.stderr, "labelled opensandbox.io/id");
}

/// A lone v1beta1 Sandbox: its patch touches only `spec.podTemplate` and
/// gives the injected Sandbox, which has nothing left to change.
#[test]
fn a_lone_v1beta1_sandbox_is_patched_at_its_pod_template_once() {
    let dir = tempfile::tempdir().unwrap();
    let input = manifest("sandboxes.yaml");
    let beta = input.split("---\n").next().unwrap();
    std::fs::write(dir.path().join("beta.yaml"), beta).unwrap();
    let inject = |file: &str, output: &str| inject_in(dir.path(), file, &["-o", output]);
    let patch = inject("beta.yaml", "patch");
    assert_eq!(patch.code, 0, "{}", patch.stderr);
    let ops: json_patch::Patch = serde_json::from_str(&patch.stdout).unwrap();
    assert!(!ops.0.is_empty());
    for op in &ops.0 {
        let at = op.path().to_string();
        assert!(at.starts_with("/spec/podTemplate/"), "{at}");
    }
    let mut object: Value = serde_yaml_ng::from_str(beta).unwrap();
    json_patch::patch(&mut object, &ops).unwrap();
    let injected = inject("beta.yaml", "json");
    assert_eq!(
        object,
        serde_json::from_str::<Value>(&injected.stdout).unwrap()
    );
    std::fs::write(dir.path().join("injected.json"), &injected.stdout).unwrap();
    let again = inject("injected.json", "patch");
    assert_prints(&again, 0, "[]\n");
}

/// contract: manifest.pass-through
#[test]
fn a_labelled_configmap_passes_through_with_a_note() {
    let (r, input) = injected_and_input("configmap.yaml");
    assert_eq!(r.stdout, input);
    assert!(
        r.stderr
            .contains("ConfigMap/settings): labelled opensandbox.io/id but not a Pod"),
        "{}",
        r.stderr
    );
}

/// `-o diff` on a stream: every removed line is one of the input, every
/// added line one of `-o manifest`'s output, and the untouched Service is
/// not among them.
#[test]
fn a_streams_diff_shows_only_the_changed_documents() {
    let r = inject_with("service-deployment.yaml", &["-o", "diff"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let path = format!("{DIR}/service-deployment.yaml");
    assert_diff_of(&r.stdout, &path);
    let input = std::fs::read_to_string(&path).unwrap();
    let manifest = inject("service-deployment.yaml").stdout;
    let changed: Vec<&str> = r
        .stdout
        .lines()
        .skip(2)
        .filter(|l| !l.starts_with([' ', '@']))
        .collect();
    assert_a_line_holds(&changed, "execd-installer", &r.stdout);
    for line in &changed {
        let (sign, text) = line.split_at(1);
        let side = if sign == "+" { &manifest } else { &input };
        assert!(matches!(sign, "+" | "-"), "{line:?}");
        assert!(
            side.lines().any(|l| l == text),
            "{line:?} is not in its side"
        );
        assert!(
            !text.contains("kind: Service"),
            "the Service changed: {line:?}"
        );
    }
    // Nothing to inject: an empty diff, exit 0, the note still on stderr.
    let r = inject_with("configmap.yaml", &["-o", "diff"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("labelled opensandbox.io/id but not a Pod"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_streams_patch_is_refused_with_the_way_out() {
    let r = inject_with("service-deployment.yaml", &["-o", "patch"]);
    assert_exit(&r, 2, "-o patch takes one object");
    assert!(r.stderr.contains("use -o diff"), "{}", r.stderr);
    assert_eq!(r.stdout, "");
}

/// contract: manifest.denial
#[test]
fn a_denied_template_fails_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let job = manifest("job.yaml").replace(", command: [sleep, '60']", "");
    std::fs::write(dir.path().join("job.yaml"), job).unwrap();
    let r = run(&["inject", "-f", "job.yaml"], dir.path());
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert_exit(&r, 1, "Job/once) spec.template: ");
}

/// PyYAML reads YAML 1.1, where an unquoted 2026-01-01T01:00:00Z is a
/// timestamp: the output must keep it a string there too.
#[test]
fn expires_at_stays_a_string_through_pyyaml() {
    let has_pyyaml = std::process::Command::new("python3")
        .args(["-c", "import yaml"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_pyyaml,
        "python3 with PyYAML is needed (tests/chart/run.sh installs it)"
    );
    pyyaml_check_injected(
        "service-deployment.yaml",
        "import sys, yaml\n\
             docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]\n\
             v = docs[2]['metadata']['annotations']['opensandbox.io/expires-at']\n\
             t = docs[1]['spec']['template']['metadata']['annotations']['opensandbox.io/timeout']\n\
             assert isinstance(v, str) and v == '2026-01-01T01:00:00Z', repr(v)\n\
             assert isinstance(t, str), repr(t)",
    );
}

/// The same for a single Pod, the most common input of `inject`.
#[test]
fn a_single_pods_expires_at_stays_a_string_through_pyyaml() {
    pyyaml_check_injected(
        "../fixtures/timeout-seconds.pod.yaml",
        "import sys, yaml\n\
             pod = yaml.safe_load(open(sys.argv[1]))\n\
             a = pod['metadata']['annotations']\n\
             v = a['opensandbox.io/expires-at']\n\
             assert isinstance(v, str) and v == '2026-01-01T01:00:00Z', repr(v)\n\
             assert isinstance(a['opensandbox.io/timeout'], str), repr(a)\n\
             assert any(c['name'] == 'execd-installer' for c in pod['spec']['initContainers'])",
    );
}

/// Runs `script` in python3 with PyYAML on what `inject` writes for `file`
/// of tests/manifests (which must exit 0), written to a file
/// (`sys.argv[1]`); the test fails with its stderr unless it exits 0.
#[track_caller]
fn pyyaml_check_injected(file: &str, script: &str) {
    let (_dir, out) = temp_file("out.yaml", &injected(file).stdout);
    stdout_of(
        std::process::Command::new("python3")
            .args(["-c", script])
            .arg(out),
    );
}
