//! `sandbox-webhook diagnose`: the controller's decision as JSON for a pod
//! manifest, from YAML or JSON, with `--now` and `--config`, and besides it:
//! when (`at`) and why (`reason`), the platform fields named for what they
//! read, one result per pod of a List or stream, every field documented.

use std::path::Path;

use common::cli::{Run, run, run_with_input, temp_file};
use serde_json::{Value, json};

const SCHEDULER_MESSAGE: &str = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";

fn diagnose(manifest: &str, args: &[&str]) -> Run {
    let args = [&["diagnose", "-f", "-"], args].concat();
    run_with_input(&args, Path::new("."), manifest.as_bytes())
}

fn json_of(out: &Run) -> Value {
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

const UNSCHEDULABLE_POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: s1
  namespace: team
  uid: 8a1f
  labels: {opensandbox.io/id: s1}
  annotations: {opensandbox.io/expires-at: "2026-01-02T03:04:05Z"}
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: j, uid: ju, controller: true}
spec:
  nodeSelector: {kubernetes.io/arch: arm64}
  containers: [{name: sandbox, image: busybox}]
status:
  phase: Pending
  conditions:
  - type: PodScheduled
    status: "False"
    reason: Unschedulable
    message: "MESSAGE"
"#;

/// contract: diagnose.reason
#[test]
fn unschedulable_expiring_job_pod() {
    let yaml = UNSCHEDULABLE_POD.replace("MESSAGE", SCHEDULER_MESSAGE);
    let before = json_of(&diagnose(&yaml, &["--now", "2026-01-02T03:04:04Z"]));
    assert_eq!(
        before,
        json!({
            "pod": "team/s1",
            "expiry": {"expiresAt": "2026-01-02T03:04:05Z", "expired": false, "action": "delete-owner",
                       "at": "2026-01-02T03:04:05Z",
                       "reason": "at expires-at; its controller owner Job/j is of a kind whose controller.expiry.ownerActions is delete, so the owner is deleted (propagation Background), once no other pod of it is due later"},
            "platform": {"hasPlatform": true, "hasNonPlatform": false,
                         "hasPlatformConstraints": true, "hasNonPlatformConstraints": false,
                         "platformAnnotation": null,
                         "unschedulable": true, "message": SCHEDULER_MESSAGE,
                         "reason": "Pending, and the scheduler says no node takes its platform: the controller sets the condition and records a warning Event"},
            "injection": {"state": "not-injected", "differs": [], "record": null,
                          "expected": format!(r#"{{"release":"{}","config":"44136fa355b3678a","images":{{"execd":"opensandbox/execd:v1.1.0"}}}}"#, env!("CARGO_PKG_VERSION")),
                          "reason": "not injected: no opensandbox.io/injected record with the webhook's containers, no opt-out, not built by OpenSandbox's server (created while the webhook was down under failurePolicy Ignore, before it was installed, or in a namespace labelled opensandbox.io/rev for a revision no release serves); recreate it to inject it; the controller records a warning Event SandboxNotInjected"},
        })
    );
    let at = json_of(&diagnose(&yaml, &["--now", "2026-01-02T03:04:05Z"]));
    assert_eq!(at["expiry"]["expired"], json!(true));
}

#[test]
fn capacity_message_and_config() {
    let yaml = UNSCHEDULABLE_POD.replace("MESSAGE", "0/3 nodes are available: 3 Insufficient cpu.");
    let owners = "controller: {expiry: {deleteOwnerKinds: [ReplicaSet.apps]}}\n";
    let (_dir, config) = temp_file("config.yaml", owners);
    let out = json_of(&diagnose(
        &yaml,
        &[
            "--now",
            "2026-01-02T03:04:04Z",
            "--config",
            config.to_str().unwrap(),
        ],
    ));
    assert_eq!(out["expiry"]["action"], json!("leave-owned"));
    assert_eq!(
        out["platform"],
        json!({"hasPlatform": true, "hasNonPlatform": false,
               "hasPlatformConstraints": true, "hasNonPlatformConstraints": false,
               "platformAnnotation": null, "unschedulable": false, "message": null,
               "reason": "Pending, but nothing the scheduler says is about its platform"})
    );
}

/// contract: drift.diagnose, revision.controller
///
/// The drift audit's state of a pod, against the configuration given: a
/// pod the webhook injected is current, stale under another configuration,
/// and another release's when it carries another revision.
#[test]
fn injection_state_and_why() {
    let injected = |record: &str, labels: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: i\n  namespace: team\n  labels: {{opensandbox.io/id: i{labels}}}\n  annotations: {{opensandbox.io/injected: '{record}'}}\nspec:\n  initContainers: [{{name: execd-installer, image: opensandbox/execd:v1.0.22}}]\n  containers: [{{name: sandbox, image: busybox}}]\n"
        )
    };
    let record = json_of(&diagnose(&UNSCHEDULABLE_POD.replace("MESSAGE", "x"), &[]))["injection"]
        ["expected"]
        .as_str()
        .unwrap()
        .to_owned();
    let current = json_of(&diagnose(&injected(&record, ""), &[]));
    assert_eq!(current["injection"]["state"], "current");
    assert_eq!(current["injection"]["record"], json!(record));

    let (_dir, config) = temp_file("config.yaml", "execd: {image: 'opensandbox/execd:v2'}\n");
    let args = ["--config", config.to_str().unwrap()];
    let stale = json_of(&diagnose(&injected(&record, ""), &args));
    assert_eq!(stale["injection"]["state"], "stale");
    assert_eq!(stale["injection"]["differs"], json!(["config", "images"]));
    assert!(
        stale["injection"]["expected"]
            .as_str()
            .unwrap()
            .contains("opensandbox/execd:v2")
    );
    assert!(
        stale["injection"]["reason"]
            .as_str()
            .unwrap()
            .contains("differs from what this release's webhook writes now in config, images")
    );

    let canary = json_of(&diagnose(
        &injected(&record, ", opensandbox.io/rev: canary"),
        &[],
    ));
    assert!(
        canary["injection"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("another release's: its opensandbox.io/rev label"),
        "{canary}"
    );
    assert_eq!(canary["expiry"]["reason"], canary["injection"]["reason"]);
}

/// A pod of an agent-sandbox `Sandbox` (as its controller creates one):
/// the Sandbox is told to shut down by default, to suspend or is deleted
/// as `ownerActions` says, and the deprecated `deleteOwnerKinds` deletes
/// it. contract: controller.expiry-owner-actions, config.controller
#[test]
fn a_sandbox_owner_is_told_as_configured() {
    let pod = r#"
apiVersion: v1
kind: Pod
metadata:
  name: agent
  namespace: team
  labels: {opensandbox.io/id: agent, agents.x-k8s.io/sandbox-name-hash: 1a2b3c4d}
  annotations: {opensandbox.io/expires-at: "2026-01-02T03:04:05Z"}
  ownerReferences:
  - {apiVersion: agents.x-k8s.io/v1beta1, kind: Sandbox, name: agent, uid: su, controller: true}
spec:
  containers: [{name: sandbox, image: busybox}]
"#;
    let now = ["--now", "2026-01-02T03:04:05Z"];
    let expiry = json_of(&diagnose(pod, &now))["expiry"].clone();
    assert_eq!(
        expiry,
        json!({"expiresAt": "2026-01-02T03:04:05Z", "expired": true, "action": "shutdown-owner",
               "at": "2026-01-02T03:04:05Z",
               "reason": "expires-at passed; its controller owner Sandbox/agent is an agent-sandbox Sandbox whose controller.expiry.ownerActions is shutdown, so its spec.shutdownTime is set to expiresAt (unless it is earlier already): agent-sandbox removes the pod and applies the Sandbox's shutdownPolicy"})
    );
    for (config, action) in [
        (
            "controller: {expiry: {ownerActions: {Sandbox.agents.x-k8s.io: suspend}}}\n",
            "suspend-owner",
        ),
        (
            "controller: {expiry: {ownerActions: {Sandbox.agents.x-k8s.io: delete}}}\n",
            "delete-owner",
        ),
        ("controller: {expiry: {ownerActions: {}}}\n", "leave-owned"),
        (
            "controller: {expiry: {deleteOwnerKinds: [Sandbox.agents.x-k8s.io]}}\n",
            "delete-owner",
        ),
        (
            "controller: {expiry: {deleteOwnerKinds: [Job.batch]}}\n",
            "leave-owned",
        ),
    ] {
        let (_dir, file) = temp_file("config.yaml", config);
        let out = json_of(&diagnose(
            pod,
            &[&now[..], &["--config", file.to_str().unwrap()]].concat(),
        ));
        assert_eq!(out["expiry"]["action"], json!(action), "{config}");
    }
}

#[test]
fn json_input_manual_cleanup_and_invalid() {
    let pod = |labels: Value, annotations: Value| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "labels": labels, "annotations": annotations},
               "spec": {"containers": [{"name": "c", "image": "i"}]}})
        .to_string()
    };
    let manual = pod(
        json!({"opensandbox.io/id": "p", "opensandbox.io/manual-cleanup": "true"}),
        json!({}),
    );
    assert_eq!(
        json_of(&diagnose(&manual, &[]))["expiry"],
        json!({"expiresAt": null, "expired": false, "action": "none", "at": null,
               "reason": "manual cleanup: label opensandbox.io/manual-cleanup is \"true\", so the pod is never removed"})
    );
    let invalid = pod(
        json!({"opensandbox.io/id": "p"}),
        json!({"opensandbox.io/expires-at": "soon"}),
    );
    assert_eq!(
        json_of(&diagnose(&invalid, &[]))["expiry"],
        json!({"expiresAt": "soon", "expired": false, "action": "invalid", "at": null,
               "reason": "opensandbox.io/expires-at is 'soon', not an RFC 3339 time: the controller records a warning Event InvalidExpiry and deletes nothing"})
    );
}

#[test]
fn errors_exit_non_zero() {
    let out = diagnose(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
        &[],
    );
    assert_eq!(out.code, 2);
    let stderr = &out.stderr;
    assert!(stderr.contains("is a Deployment/d, not a Pod"), "{stderr}");
    for (input, says) in [
        ("", "standard input holds no Kubernetes object"),
        ("[1]\n", "standard input is a list, not a Kubernetes object"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {ownerReferences: [5]}\n",
            "metadata.ownerReferences[0]: expected an object, got the number 5",
        ),
    ] {
        let out = diagnose(input, &[]);
        let stderr = &out.stderr;
        assert_eq!(out.code, 2, "{stderr}");
        assert!(stderr.contains(says), "{input:?}: {stderr}");
        assert!(
            !stderr.contains("struct") && !stderr.contains("OwnerReference"),
            "{stderr}"
        );
    }
    let bad = "controller: {expiry: {deleteOwnerKinds: [job]}}\n";
    let (_dir, config) = temp_file("bad.yaml", bad);
    let out = diagnose(UNSCHEDULABLE_POD, &["--config", config.to_str().unwrap()]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("controller.expiry.deleteOwnerKinds[0]"));
}

/// contract: diagnose.not-watched, diagnose.expiry, diagnose.platform, diagnose.reason
///
/// "none, namespace excluded" for kube-system; `at` in
/// UTC; the platform fields say they read the spec, and the annotation is
/// shown apart.
#[test]
fn when_and_why() {
    let pod = |ns: &str, annotations: &str, selector: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: {ns}\n  labels: {{opensandbox.io/id: p}}\n  annotations: {{{annotations}}}\nspec:\n  nodeSelector: {{{selector}}}\n  containers: [{{name: c, image: i}}]\nstatus: {{phase: Running}}\n"
        )
    };
    let system = json_of(&diagnose(
        &pod(
            "kube-system",
            "opensandbox.io/expires-at: '2026-12-02T14:30:00+02:00'",
            "",
        ),
        &["--now", "2027-01-01T00:00:00Z"],
    ));
    assert_eq!(system["expiry"]["action"], json!("none"));
    assert_eq!(system["expiry"]["expired"], json!(true));
    assert_eq!(system["expiry"]["at"], json!(null));
    assert!(
        system["expiry"]["reason"]
            .as_str()
            .unwrap()
            .starts_with("namespace excluded: kube-system"),
        "{system}"
    );
    let team = json_of(&diagnose(
        &pod(
            "team",
            "opensandbox.io/expires-at: '2026-12-02T14:30:00+02:00', opensandbox.io/platform: linux/arm64",
            "'kubernetes.io/arch': arm64, disk: ssd",
        ),
        &["--now", "2026-12-02T12:00:00Z"],
    ));
    assert_eq!(team["pod"], json!("team/p"));
    assert_eq!(
        team["expiry"],
        json!({"expiresAt": "2026-12-02T14:30:00+02:00", "expired": false, "action": "delete-pod",
               "at": "2026-12-02T12:30:00Z",
               "reason": "at expires-at; the pod has no controller owner, so it is deleted"})
    );
    assert_eq!(team["platform"]["hasPlatformConstraints"], json!(true));
    assert_eq!(team["platform"]["hasNonPlatformConstraints"], json!(true));
    assert_eq!(team["platform"]["platformAnnotation"], json!("linux/arm64"));
    assert_eq!(
        team["platform"]["reason"],
        json!("not Pending: it was scheduled")
    );
    // The annotation alone is no constraint: the seed reads the spec.
    let annotation_only = json_of(&diagnose(
        &pod("team", "opensandbox.io/platform: linux/arm64", ""),
        &[],
    ));
    assert_eq!(annotation_only["platform"]["hasPlatform"], json!(false));
    assert_eq!(
        annotation_only["platform"]["hasPlatformConstraints"],
        json!(false)
    );
    assert_eq!(
        annotation_only["platform"]["platformAnnotation"],
        json!("linux/arm64")
    );
}

/// contract: diagnose.input
///
/// `kubectl get pods -o yaml` (a List) and several
/// documents give one result per pod, in order; other kinds are passed
/// over with a note.
#[test]
fn a_list_and_a_stream_give_one_result_per_pod() {
    let item = |name: &str| {
        format!(
            "- apiVersion: v1\n  kind: Pod\n  metadata:\n    name: {name}\n    namespace: team\n    labels: {{opensandbox.io/id: {name}}}\n    annotations: {{opensandbox.io/expires-at: '2026-01-02T03:04:05Z'}}\n  spec: {{containers: [{{name: c, image: i}}]}}\n"
        )
    };
    let list = format!(
        "apiVersion: v1\nkind: List\nmetadata: {{resourceVersion: \"\"}}\nitems:\n{}{}",
        item("a"),
        item("b")
    );
    let out = json_of(&diagnose(&list, &["--now", "2026-01-02T03:04:05Z"]));
    let names: Vec<&Value> = out.as_array().unwrap().iter().map(|d| &d["pod"]).collect();
    assert_eq!(names, [&json!("team/a"), &json!("team/b")]);
    assert!(
        out.as_array()
            .unwrap()
            .iter()
            .all(|d| d["expiry"]["expired"] == json!(true))
    );

    let stream = format!(
        "{}---\napiVersion: v1\nkind: Service\nmetadata: {{name: s}}\n---\n{}",
        UNSCHEDULABLE_POD.replace("MESSAGE", "x"),
        UNSCHEDULABLE_POD
            .replace("name: s1", "name: s2")
            .replace("MESSAGE", "x")
    );
    let out = diagnose(&stream, &[]);
    let all = json_of(&out);
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    assert_eq!(all[1]["pod"], json!("team/s2"));
    assert!(
        out.stderr
            .contains("document 2 (Service/s): not a Pod, passed over"),
        "{}",
        out.stderr
    );
}

/// contract: diagnose.json, cli.docs
///
/// Every field is in the docs and in `man diagnose`.
#[test]
fn every_field_is_documented() {
    let behaviour = include_str!("../../docs/behaviour.md");
    let man = run(&["man", "diagnose"], Path::new(".")).stdout;
    let help = run(&["diagnose", "--help"], Path::new(".")).stdout;
    let yaml = UNSCHEDULABLE_POD.replace("MESSAGE", SCHEDULER_MESSAGE);
    let out = json_of(&diagnose(&yaml, &[]));
    let mut fields = vec!["pod".to_owned()];
    for section in ["expiry", "platform", "injection"] {
        for key in out[section].as_object().unwrap().keys() {
            fields.push(format!("{section}.{key}"));
        }
    }
    assert!(fields.len() > 12, "{fields:?}");
    for field in &fields {
        let last = field.rsplit('.').next().unwrap();
        assert!(
            behaviour
                .lines()
                .any(|l| l.starts_with("| `") && l.contains(last)),
            "docs/behaviour.md: {field} is not in the table of `diagnose`'s fields"
        );
        assert!(man.contains(last), "{field} is not in man diagnose");
        assert!(help.contains(last), "{field} is not in diagnose --help");
    }
}

/// The reasons say what holds a pod back and what the controller leaves:
/// the sibling whose later expiry an owner waits for, a pod being
/// deleted, and a platform-unschedulable pod whose owner the controller
/// does not act on (reported, not removed).
/// contract: diagnose.siblings, diagnose.reason, controller.platform-delete
#[test]
fn reasons_name_the_sibling_and_what_is_left() {
    let pod = |name: &str, at: &str, extra: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: team\n  labels: {{opensandbox.io/id: {name}}}\n  annotations: {{opensandbox.io/expires-at: '{at}'}}\n  ownerReferences: [{{apiVersion: batch/v1, kind: Job, name: j, uid: ju, controller: true}}]\n{extra}spec: {{containers: [{{name: c, image: i}}]}}\nstatus: {{phase: Running}}\n"
        )
    };
    let due = pod("a", "2026-01-02T03:00:00Z", "");
    let later = pod("b", "2026-01-02T04:00:00Z", "");
    let gone = pod(
        "c",
        "2026-01-02T05:00:00Z",
        "  deletionTimestamp: '2026-01-02T02:00:00Z'\n",
    );
    let out = json_of(&diagnose(
        &[due.as_str(), &later, &gone].join("---\n"),
        &["--now", "2026-01-02T03:30:00Z"],
    ));
    let a = &out[0]["expiry"];
    assert_eq!(
        (&a["action"], &a["at"]),
        (&json!("delete-owner"), &json!("2026-01-02T04:00:00Z")),
        "{out:#}"
    );
    let reason = a["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("expires-at passed; waits for team/b, the last pod of its owner to be due (2026-01-02T04:00:00Z); its controller owner Job/j"),
        "{reason}"
    );
    let c = &out[2];
    assert_eq!(
        (&c["expiry"]["action"], &c["expiry"]["at"]),
        (&json!("none"), &json!(null))
    );
    for field in ["expiry", "platform"] {
        assert!(
            c[field]["reason"]
                .as_str()
                .unwrap()
                .starts_with("being deleted (metadata.deletionTimestamp is set)"),
            "{c:#}"
        );
    }

    let (_dir, config) = temp_file(
        "config.yaml",
        "controller: {platform: {deleteUnschedulable: true}}\n",
    );
    let left = UNSCHEDULABLE_POD
        .replace("MESSAGE", SCHEDULER_MESSAGE)
        .replace("batch/v1, kind: Job", "example.com/v1, kind: Pool");
    let out = json_of(&diagnose(&left, &["--config", config.to_str().unwrap()]));
    let reason = out["platform"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("reports it, but leaves it") && reason.contains("Pool/j"),
        "{reason}"
    );
}
