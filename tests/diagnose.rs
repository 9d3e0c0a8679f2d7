//! `sandbox-webhook diagnose`: the exact JSON of SPEC 10 for a pod manifest,
//! from YAML or JSON, with `--now` and `--config`.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-webhook");
const SCHEDULER_MESSAGE: &str = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";

fn diagnose(manifest: &str, args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(["diagnose", "-f", "-"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
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

#[test]
fn unschedulable_expiring_job_pod() {
    let yaml = UNSCHEDULABLE_POD.replace("MESSAGE", SCHEDULER_MESSAGE);
    let before = json_of(&diagnose(&yaml, &["--now", "2026-01-02T03:04:04Z"]));
    assert_eq!(
        before,
        json!({
            "expiry": {"expiresAt": "2026-01-02T03:04:05Z", "expired": false, "action": "delete-owner"},
            "platform": {"hasPlatform": true, "hasNonPlatform": false, "unschedulable": true, "message": SCHEDULER_MESSAGE},
        })
    );
    let at = json_of(&diagnose(&yaml, &["--now", "2026-01-02T03:04:05Z"]));
    assert_eq!(at["expiry"]["expired"], json!(true));
}

#[test]
fn capacity_message_and_config() {
    let yaml = UNSCHEDULABLE_POD.replace("MESSAGE", "0/3 nodes are available: 3 Insufficient cpu.");
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "controller: {expiry: {deleteOwnerKinds: [ReplicaSet.apps]}}\n",
    )
    .unwrap();
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
        json!({"hasPlatform": true, "hasNonPlatform": false, "unschedulable": false, "message": null})
    );
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
        json!({"expiresAt": null, "expired": false, "action": "none"})
    );
    let invalid = pod(
        json!({"opensandbox.io/id": "p"}),
        json!({"opensandbox.io/expires-at": "soon"}),
    );
    assert_eq!(
        json_of(&diagnose(&invalid, &[]))["expiry"],
        json!({"expiresAt": "soon", "expired": false, "action": "invalid"})
    );
}

#[test]
fn errors_exit_non_zero() {
    let out = diagnose("kind: Deployment\n", &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected Pod"));
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.yaml");
    std::fs::write(&config, "controller: {expiry: {deleteOwnerKinds: [job]}}\n").unwrap();
    let out = diagnose(UNSCHEDULABLE_POD, &["--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("controller.expiry.deleteOwnerKinds[0]"));
}
