//! [`SandboxPod`] as a Kubernetes resource: the watch, deletes and status
//! patches decode the apiserver's Pods straight into it.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::config::Config;
use crate::lifecycle::SandboxPod;

impl kube::Resource for SandboxPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }
    fn group((): &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version((): &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural((): &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Drops what no decision reads before a pod enters the cache:
/// `managedFields`, every label and annotation but the controller's own
/// (`last-applied-configuration` alone can be larger than the rest), and
/// every condition but `PodScheduled` and the controller's. Containers and
/// the rest of the status are never decoded at all.
pub fn strip(pod: &mut SandboxPod, config: &Config, condition_type: &str) {
    let keys = config.keys();
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    meta.finalizers = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|k, _| *k == keys.id || *k == keys.manual_cleanup);
    }
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| *k == keys.expires_at);
    }
    if let Some(Value::Array(conditions)) = pod.status.as_mut().and_then(|s| s.conditions.as_mut())
    {
        conditions.retain(|c| {
            let t = c.get("type").and_then(Value::as_str);
            t == Some("PodScheduled") || t == Some(condition_type)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_only_what_decisions_read() {
        let config = Config::default();
        let ct = crate::lifecycle::condition_type(&config);
        let full = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": "p", "namespace": "n", "uid": "u",
                "labels": {"opensandbox.io/id": "s", "opensandbox.io/manual-cleanup": "true", "app": "x"},
                "annotations": {"opensandbox.io/expires-at": "2026-01-01T00:00:00Z",
                                "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}],
            },
            "spec": {"containers": [{"name": "c", "image": "i"}], "nodeSelector": {"kubernetes.io/arch": "arm64"}},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False"},
                {"type": "Ready", "status": "False"},
                {"type": ct, "status": "True"},
            ], "containerStatuses": [{"name": "c"}]},
        });
        let mut pod: SandboxPod = serde_json::from_value(full).unwrap();
        strip(&mut pod, &config, &ct);
        let kept: SandboxPod = serde_json::from_value(json!({
                "metadata": {
                    "name": "p", "namespace": "n", "uid": "u",
                    "labels": {"opensandbox.io/id": "s", "opensandbox.io/manual-cleanup": "true"},
                    "annotations": {"opensandbox.io/expires-at": "2026-01-01T00:00:00Z"},
                    "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "ju", "controller": true}],
                },
                "spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}},
                "status": {"phase": "Pending", "conditions": [
                    {"type": "PodScheduled", "status": "False"},
                    {"type": ct, "status": "True"},
                ]},
        }))
        .unwrap();
        assert_eq!(pod, kept);
    }
}
