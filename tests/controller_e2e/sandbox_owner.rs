//! agent-sandbox 1.0 serves its Sandbox only at `v1beta1`: a sandbox pod
//! that such a Sandbox controls is removed by deleting the Sandbox through
//! the version its owner reference names (`Sandbox.agents.x-k8s.io` is in
//! the default `deleteOwnerKinds`, which name no version).

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

use crate::Env;
use crate::common::crds;
use crate::expiry::owner_is_deleted_at;
use crate::harness::{Result, expires_at, in_seconds, pp, sandbox};

const API_VERSION: &str = "agents.x-k8s.io/v1beta1";

/// contract: controller.expiry-delete-owner
pub(crate) async fn v1beta1_sandbox_owner_is_deleted(env: &Env, id: &str) -> Result<()> {
    crds::ensure(&env.client, &crds::sandbox_v1beta1()).await?;
    let ns = &env.namespace(id).await?;
    let gvk = GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "sandboxes");
    let sandboxes: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), ns, &resource);
    let owner: DynamicObject = serde_json::from_value(json!({
        "apiVersion": API_VERSION, "kind": "Sandbox", "metadata": {"name": "agent"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36"}]}}},
    }))?;
    let owner = sandboxes.create(&pp(), &owner).await?;
    let uid = owner.metadata.uid.ok_or("the Sandbox has no uid")?;
    let at = in_seconds(2);
    let references = json!({"ownerReferences": [{"apiVersion": API_VERSION, "kind": "Sandbox",
        "name": "agent", "uid": uid, "controller": true}]});
    let pod = sandbox(
        "agent-pod",
        &json!({}),
        &expires_at(at),
        &references,
        &json!({}),
    )?;
    let pods = env.pods(ns);
    pods.create(&pp(), &pod).await?;
    let stored = pods.get("agent-pod").await?;
    owner_is_deleted_at(env, &stored, at, &sandboxes, ("Sandbox", "agent")).await
}
