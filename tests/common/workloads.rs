//! Workloads around a pod template (contract: workload.kinds): the pod of a [`SandboxPod`]
//! as the template of a Deployment, Job, `BatchSandbox`..., valid for the
//! apiserver, and the `AdmissionReview` the apiserver sends for one.

use serde_json::{Map, Value, json};

use crate::pods::SandboxPod;

/// `apiVersion` and plural resource of each workload kind, a row
/// per version (the first of a kind is the one [`workload`] writes).
pub const KINDS: [(&str, &str, &str); 9] = [
    ("Deployment", "apps/v1", "deployments"),
    ("StatefulSet", "apps/v1", "statefulsets"),
    ("DaemonSet", "apps/v1", "daemonsets"),
    ("ReplicaSet", "apps/v1", "replicasets"),
    ("Job", "batch/v1", "jobs"),
    ("CronJob", "batch/v1", "cronjobs"),
    (
        "BatchSandbox",
        "sandbox.opensandbox.io/v1alpha1",
        "batchsandboxes",
    ),
    ("Sandbox", "agents.x-k8s.io/v1alpha1", "sandboxes"),
    // agent-sandbox 1.0 serves only this one.
    ("Sandbox", "agents.x-k8s.io/v1beta1", "sandboxes"),
];

/// The plural resource of `kind` at `api_version`, if it is a workload kind.
pub fn resource(api_version: &str, kind: &str) -> Option<&'static str> {
    KINDS
        .iter()
        .find(|(k, v, _)| *k == kind && *v == api_version)
        .map(|(_, _, r)| *r)
}

/// Where `kind` keeps its pod template, as denials name it.
pub fn template_path(kind: &str) -> &'static str {
    match kind {
        "CronJob" => "spec.jobTemplate.spec.template",
        "Sandbox" => "spec.podTemplate",
        _ => "spec.template",
    }
}

/// A `kind` named `name` at its first version; see [`workload_at`].
pub fn workload(kind: &str, name: &str, pod: &SandboxPod) -> Value {
    let (_, api_version, _) = KINDS
        .iter()
        .find(|(k, _, _)| *k == kind)
        .unwrap_or_else(|| panic!("{kind} is not a workload kind"));
    workload_at(api_version, kind, name, pod)
}

/// A `kind` at `api_version` named `name` whose pod template is `pod`'s
/// labels, annotations and spec, plus the selector label `app: <name>` the
/// apps kinds need.
pub fn workload_at(api_version: &str, kind: &str, name: &str, pod: &SandboxPod) -> Value {
    assert!(
        resource(api_version, kind).is_some(),
        "{kind} {api_version} is not a workload kind"
    );
    let pod = pod.json();
    let mut labels = pod["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert("app".into(), json!(name));
    let mut spec = pod["spec"].clone();
    if matches!(kind, "Job" | "CronJob") {
        spec["restartPolicy"] = json!("Never");
    }
    let template = json!({
        "metadata": {"labels": Value::Object(labels), "annotations": pod["metadata"]["annotations"]},
        "spec": spec,
    });
    let selector = json!({"matchLabels": {"app": name}});
    let spec = match kind {
        "Deployment" | "ReplicaSet" | "DaemonSet" => {
            json!({"selector": selector, "template": template})
        }
        "StatefulSet" => json!({"serviceName": name, "selector": selector, "template": template}),
        "Job" => json!({"template": template}),
        "CronJob" => {
            json!({"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": template}}})
        }
        "BatchSandbox" => json!({"replicas": 1, "template": template}),
        _ => json!({"podTemplate": template}),
    };
    let mut object = Map::new();
    object.insert("apiVersion".into(), json!(api_version));
    object.insert("kind".into(), json!(kind));
    object.insert("metadata".into(), json!({"name": name}));
    object.insert("spec".into(), spec);
    Value::Object(object)
}

/// The `AdmissionReview` of `operation` on `object` in namespace `team-a`
/// (`old` for an UPDATE), as the apiserver sends it.
pub fn workload_review(uid: &str, operation: &str, object: &Value, old: Option<&Value>) -> Vec<u8> {
    crate::reviews::review(uid, "team-a", operation, object, old)
}
