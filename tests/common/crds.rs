//! The custom resources of the workload kinds (contract: workload.kinds), registered with a test
//! apiserver: OpenSandbox's `BatchSandbox` and agent-sandbox's `Sandbox`.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::cluster::wait_for;
use crate::processes::{Result, check};

/// A namespaced CRD serving `kind` (plural `plural`) at `version` only, with
/// `schema` as its `openAPIV3Schema`.
fn crd(group: &str, version: &str, kind: &str, plural: &str, schema: &Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind,
                      "listKind": format!("{kind}List")},
            "versions": [{
                "name": version, "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    })
}

/// A minimal `BatchSandbox` CRD: no schema beyond "keep everything".
pub fn batch_sandbox() -> Value {
    let anything = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    crd(
        "sandbox.opensandbox.io",
        "v1alpha1",
        "BatchSandbox",
        "batchsandboxes",
        &anything,
    )
}

/// agent-sandbox 1.0's `Sandbox` CRD as far as these tests care: only
/// `v1beta1` is served (so nothing reaches it through a `v1alpha1` rule or
/// path), and its pod template is `spec.podTemplate`, whose metadata keeps
/// only labels and annotations (anything else is pruned, as upstream's).
pub fn sandbox_v1beta1() -> Value {
    let strings = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let pod_template = json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "metadata": {"type": "object", "properties": {"labels": strings, "annotations": strings}},
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        },
    });
    let schema = json!({
        "type": "object",
        "required": ["spec"],
        "properties": {"spec": {
            "type": "object",
            "required": ["podTemplate"],
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"podTemplate": pod_template},
        }},
    });
    crd(
        "agents.x-k8s.io",
        "v1beta1",
        "Sandbox",
        "sandboxes",
        &schema,
    )
}

/// Creates `crd` unless it is there, then waits until it is established.
/// CRDs are left in place: one is cluster-wide, and deleting it under
/// another scenario's objects would break that scenario.
pub async fn ensure(client: &Client, crd: &Value) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(crd.clone())?;
    let name = crd.metadata.name.clone().unwrap_or_default();
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    wait_for(
        &format!("the {name} CRD to be established"),
        Duration::from_secs(30),
        async || {
            let established = crds
                .get(&name)
                .await?
                .status
                .and_then(|s| s.conditions)
                .is_some_and(|c| {
                    c.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            Ok(established.then_some(()))
        },
    )
    .await
}

/// An error unless agent-sandbox's Sandbox `name` (of `sandboxes`) has no
/// `spec.shutdownTime` yet: what a Sandbox whose pod has not expired looks
/// like before the controller tells it to shut down.
pub async fn check_no_shutdown_time(sandboxes: &Api<DynamicObject>, name: &str) -> Result<()> {
    let sandbox = sandboxes.get(name).await?;
    check(
        sandbox.data["spec"].get("shutdownTime").is_none(),
        format!("Sandbox {name} has a shutdownTime before its pod expired"),
    )
}
