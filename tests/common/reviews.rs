//! The `AdmissionReview` the apiserver sends, around any object the tests
//! admit: a pod, a workload, a fixture.

use serde_json::{Value, json};

use crate::workloads::resource;

/// The `AdmissionReview` of `operation` on `object` in `namespace` (`old` for
/// an UPDATE). The request's kind and resource are the object's: a workload
/// kind (contract: workload.kinds), else a core/v1 Pod.
pub fn review(
    uid: &str,
    namespace: &str,
    operation: &str,
    object: &Value,
    old: Option<&Value>,
) -> Vec<u8> {
    let kind = object["kind"].as_str().unwrap_or("Pod");
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let (api_version, resource) =
        resource(api_version, kind).map_or(("v1", "pods"), |r| (api_version, r));
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": object["metadata"]["name"],
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "system:serviceaccount:opensandbox:controller"},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        },
    }))
    .expect("serializable")
}
