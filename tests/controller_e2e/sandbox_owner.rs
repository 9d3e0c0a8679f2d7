//! agent-sandbox 1.0 serves its Sandbox only at `v1beta1`, and its Sandbox
//! has a lifecycle of its own: the controller tells it (`shutdown`, the
//! default, or `suspend`) rather than deleting it, unless
//! `controller.expiry.ownerActions` says `delete`. The Sandbox is reached
//! through the version its owner reference names (the config names no
//! version). No agent-sandbox controller runs here, so what is checked is
//! what the controller writes to the Sandbox; `tests/node_e2e` has
//! agent-sandbox's own controller carry it out.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

use crate::Env;
use crate::expiry::owner_is_deleted_at;
use crate::harness::{
    Result, check, check_at, check_still_there, in_seconds, owned_expiring, pp, rfc3339,
};
use common::cluster::wait_for_object;
use common::crds;

const API_VERSION: &str = "agents.x-k8s.io/v1beta1";
/// How long the controller may take to write to a Sandbox once its pod is
/// due (it is checked to be within a second after the wait).
const SOON: Duration = Duration::from_secs(20);

/// The scenario's namespace, its Sandboxes, and a pod owned by Sandbox
/// `name` (created with `spec`) that expires at `at`: the pod as stored.
async fn owned_pod(
    env: &Env,
    ns: &str,
    name: &str,
    spec: Value,
    at: DateTime<Utc>,
) -> Result<(Api<DynamicObject>, Pod)> {
    crds::ensure(&env.client, &crds::sandbox_v1beta1()).await?;
    let gvk = GroupVersionKind::gvk("agents.x-k8s.io", "v1beta1", "Sandbox");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "sandboxes");
    let sandboxes: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), ns, &resource);
    let mut spec = spec;
    spec["podTemplate"] =
        json!({"spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36"}]}});
    let owner: DynamicObject = serde_json::from_value(json!({
        "apiVersion": API_VERSION, "kind": "Sandbox", "metadata": {"name": name},
        "spec": spec,
    }))?;
    let owner = sandboxes.create(&pp(), &owner).await?;
    let uid = owner.metadata.uid.ok_or("the Sandbox has no uid")?;
    let references = json!({"ownerReferences": [{"apiVersion": API_VERSION, "kind": "Sandbox",
        "name": name, "uid": uid, "controller": true}]});
    let pod = owned_expiring(&format!("{name}-pod"), &json!({}), at, &references)?;
    let pods = env.pods(ns);
    pods.create(&pp(), &pod).await?;
    Ok((sandboxes, pods.get(&format!("{name}-pod")).await?))
}

/// The default: the Sandbox gets `spec.shutdownTime` = the pod's
/// `expires-at` at its expiry, and stays (agent-sandbox applies its
/// shutdownPolicy); a Sandbox already shutting down earlier keeps its time.
/// contract: controller.expiry-owner-actions, controller.expiry-events, controller.expiry-metric
pub(crate) async fn v1beta1_sandbox_owner_is_told_to_shut_down(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let before = env.expired_total("shutdown-owner")?;
    let at = in_seconds(2);
    let (sandboxes, pod) =
        owned_pod(env, ns, "agent", json!({"shutdownPolicy": "Retain"}), at).await?;
    check_at(&env.diagnose(&pod, at)?, "/expiry/action", "shutdown-owner")?;
    crds::check_no_shutdown_time(&sandboxes, "agent").await?;
    // When it was first seen set.
    let (told, seen) = wait_for_object(&sandboxes, "agent", "spec.shutdownTime", SOON, |s| {
        s.data["spec"].get("shutdownTime").map(|_| Utc::now())
    })
    .await?;
    let when = told.data["spec"]["shutdownTime"].clone();
    check(
        when == json!(rfc3339(at)),
        format!(
            "shutdownTime is {when}, not the pod's expires-at {}",
            rfc3339(at)
        ),
    )?;
    check(
        seen >= at && seen - at <= TimeDelta::seconds(1),
        format!("shutdownTime was set {} after the expiry", seen - at),
    )?;
    env.expired_event_says(
        ns,
        "agent-pod",
        Some("Normal"),
        &["set spec.shutdownTime of its owner Sandbox agent to"],
        "the Event names the action",
    )
    .await?;
    check_still_there(&sandboxes, "agent", "the Sandbox was deleted").await?;
    env.expired_once_more("shutdown-owner", before)?;

    // An earlier time already there is kept.
    let earlier = rfc3339(Utc::now() - TimeDelta::hours(1));
    let at = in_seconds(2);
    let (sandboxes, _) = owned_pod(env, ns, "early", json!({"shutdownTime": earlier}), at).await?;
    env.expired_event_says(
        ns,
        "early-pod",
        None,
        &[&format!("already shuts down at {earlier}")],
        "the Event says the earlier time is kept",
    )
    .await?;
    let kept = sandboxes.get("early").await?.data["spec"]["shutdownTime"].clone();
    check(
        kept == json!(earlier),
        format!("shutdownTime is now {kept}"),
    )
}

/// Restarts both replicas configured to `action` (`suspend`, `delete`) an
/// expired pod's Sandbox owner; scenario `id`'s namespace.
async fn with_owner_action(env: &mut Env, id: &str, action: &str) -> Result<String> {
    let config = format!(
        "controller: {{expiry: {{ownerActions: {{Sandbox.agents.x-k8s.io: {action}}}}}}}\n"
    );
    env.reconfigure(&config).await?;
    env.namespace(id).await
}

/// `suspend`: the Sandbox gets `spec.operatingMode: Suspended` at the
/// pod's expiry, and stays. contract: controller.expiry-owner-actions
pub(crate) async fn v1beta1_sandbox_owner_is_suspended(env: &mut Env, id: &str) -> Result<()> {
    let ns = &with_owner_action(env, id, "suspend").await?;
    let at = in_seconds(2);
    let (sandboxes, pod) =
        owned_pod(env, ns, "paused", json!({"operatingMode": "Running"}), at).await?;
    check_at(&env.diagnose(&pod, at)?, "/expiry/action", "suspend-owner")?;
    let (told, seen) = wait_for_object(&sandboxes, "paused", "the Sandbox suspended", SOON, |s| {
        (s.data["spec"]["operatingMode"] == "Suspended").then(Utc::now)
    })
    .await?;
    check(
        seen >= at && seen - at <= TimeDelta::seconds(1),
        format!("suspended {} after the expiry", seen - at),
    )?;
    check(
        told.data["spec"].get("shutdownTime").is_none(),
        "a suspended Sandbox was given a shutdownTime",
    )?;
    env.expired_event_says(
        ns,
        "paused-pod",
        None,
        &["set spec.operatingMode of its owner Sandbox paused to Suspended"],
        "the Event names the action",
    )
    .await?;
    // At least this one: a bare plane keeps the pods of the scenarios
    // before (their namespaces never finish terminating), and the
    // restarted replicas suspend their expired Sandboxes too.
    let suspended = env.expired_total("suspended-owner")?;
    check(suspended >= 1, format!("suspended-owner is {suspended}"))
}

/// `delete`: the Sandbox is deleted through the version its owner reference
/// names. contract: controller.expiry-delete-owner
pub(crate) async fn v1beta1_sandbox_owner_is_deleted(env: &mut Env, id: &str) -> Result<()> {
    let ns = &with_owner_action(env, id, "delete").await?;
    let at = in_seconds(2);
    let (sandboxes, pod) = owned_pod(env, ns, "agent", json!({}), at).await?;
    owner_is_deleted_at(env, &pod, at, &sandboxes, ("Sandbox", "agent")).await
}
