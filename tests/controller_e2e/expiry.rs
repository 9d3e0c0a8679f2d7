//! Expiry: on time, renewal, what stays, owner rules, the UID precondition.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{Api, DeleteParams};
use sandbox_webhook::controller::actions::{Actions, Outcome, PodRef};
use sandbox_webhook::lifecycle::SandboxPod;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::Env;
use crate::harness::{
    P, Result, check, check_at, check_still_there, create_expiring, create_unexpiring, expires_at,
    in_seconds, owned_expiring, pp, renew, rfc3339, sandbox, wait_gone, wall,
};

/// Waits for the pod to go and checks it went within 1 s after `at`, never
/// before; the delay.
pub(crate) async fn gone_on_time(
    pods: &Api<Pod>,
    name: &str,
    at: chrono::DateTime<Utc>,
) -> Result<TimeDelta> {
    let gone = wall(wait_gone(pods, name, Duration::from_secs(20)).await?);
    let delay = gone - at;
    check(
        delay >= TimeDelta::zero(),
        format!("{name} was deleted {delay} before its expiry"),
    )?;
    check(
        delay <= TimeDelta::seconds(1),
        format!("{name} was deleted {delay} after its expiry (limit 1 s)"),
    )?;
    println!(
        "    {name}: removed {} ms after its expiry",
        delay.num_milliseconds()
    );
    Ok(delay)
}

/// contract: controller.expiry-on-time, controller.expiry-delete-pod, controller.expiry-events,
/// controller.expiry-metric, diagnose.same-plan
pub(crate) async fn expired_pod_is_deleted_on_time(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let before = env.expired_total("deleted-pod")?;
    let at = in_seconds(3);
    let pods = env.pods(ns);
    create_expiring(&pods, "expiring", at).await?;
    let stored = pods.get("expiring").await?;
    let early = env.diagnose(&stored, at - TimeDelta::seconds(1))?;
    check(
        early["expiry"]
            == json!({"expiresAt": rfc3339(at), "expired": false, "action": "delete-pod",
                      "at": rfc3339(at),
                      "reason": "at expires-at; the pod has no controller owner, so it is deleted"}),
        format!("diagnose before: {early}"),
    )?;
    let due = env.diagnose(&stored, at)?;
    check_at(&due, "/expiry/expired", true)?;
    gone_on_time(&pods, "expiring", at).await?;
    env.event(ns, "expiring", "SandboxExpired", Some("Normal"), 5)
        .await?;
    env.expired_once_more("deleted-pod", before)
}

/// contract: controller.expiry-renewal, diagnose.same-plan
pub(crate) async fn renewed_pod_survives_its_old_time(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let pods = env.pods(ns);
    let old = in_seconds(3);
    create_expiring(&pods, "renewed", old).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let new = old + TimeDelta::seconds(3);
    renew(&pods, "renewed", new).await?;
    while Utc::now() < old + TimeDelta::milliseconds(1500) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let renewed = pods
        .get_opt("renewed")
        .await?
        .ok_or("the renewed pod was deleted at its old time")?;
    let at_old = env.diagnose(&renewed, old)?;
    check_at(&at_old, "/expiry/expired", false)?;
    let at_new = env.diagnose(&renewed, new)?;
    check(
        at_new["expiry"]
            == json!({"expiresAt": rfc3339(new), "expired": true, "action": "delete-pod",
                      "at": rfc3339(new),
                      "reason": "expires-at passed; the pod has no controller owner, so it is deleted"}),
        format!("diagnose at the new time: {at_new}"),
    )?;
    gone_on_time(&pods, "renewed", new).await.map(|_| ())
}

/// contract: controller.expiry-never, controller.expiry-invalid
pub(crate) async fn manual_cleanup_and_invalid_stay(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let pods = env.pods(ns);
    let past = Utc::now() - TimeDelta::seconds(30);
    let manual = json!({format!("{P}/manual-cleanup"): "true"});
    pods.create(
        &pp(),
        &sandbox("manual", &manual, &expires_at(past), &json!({}), &json!({}))?,
    )
    .await?;
    let invalid = json!({format!("{P}/expires-at"): "tomorrow"});
    pods.create(
        &pp(),
        &sandbox("invalid", &json!({}), &invalid, &json!({}), &json!({}))?,
    )
    .await?;
    create_unexpiring(&pods, "forever", &json!({})).await?;
    env.event(ns, "invalid", "InvalidExpiry", Some("Warning"), 10)
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (name, action) in [
        ("manual", "none"),
        ("invalid", "invalid"),
        ("forever", "none"),
    ] {
        let pod = pods
            .get_opt(name)
            .await?
            .ok_or(format!("{name} was deleted"))?;
        let d = env.diagnose(&pod, Utc::now())?;
        check_at(&d, "/expiry/action", action)?;
    }
    Ok(())
}

/// Creates `owner` in `ns`, then sandbox pod `name` (with `labels`) that it
/// controls and that expires at `at`; the pod as stored.
async fn create_owned<K>(
    env: &Env,
    ns: &str,
    owner: K,
    name: &str,
    labels: Value,
    at: chrono::DateTime<Utc>,
) -> Result<Pod>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    K: Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let owners: Api<K> = Api::namespaced(env.client.clone(), ns);
    let owner = owners.create(&pp(), &owner).await?;
    let pod = owned_expiring(name, &labels, at, &owner_ref(&owner)?)?;
    let pods = env.pods(ns);
    pods.create(&pp(), &pod).await?;
    Ok(pods.get(name).await?)
}

/// Metadata that makes `owner` (as the apiserver returned it) the pod's
/// controller.
pub(crate) fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Result<Value> {
    let meta = owner.meta();
    let (name, uid) = (meta.name.as_deref(), meta.uid.as_deref());
    let (name, uid) = name.zip(uid).ok_or("an owner without name or uid")?;
    let (api_version, kind) = (K::api_version(&()), K::kind(&()));
    Ok(
        json!({"ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true}]}),
    )
}

/// A Job named `name` (its pods are created by the tests: this control
/// plane runs no Job controller).
pub(crate) fn job(name: &str) -> Result<Job> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "sandbox", "image": "busybox:1.36"}]}}},
    }))?)
}

/// contract: controller.expiry-delete-owner
pub(crate) async fn job_owner_is_deleted(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), ns);
    let job = job("sandbox-job")?;
    let at = in_seconds(2);
    let stored = create_owned(env, ns, job, "job-pod", json!({}), at).await?;
    owner_is_deleted_at(env, &stored, at, &jobs, ("Job", "sandbox-job")).await
}

/// An expired sandbox pod's owner deleted as it should be: `diagnose` says
/// `delete-owner` for `pod`, the owner (`kind`, `name`, in `owners`) is gone
/// within a second of `at`, and the pod's `SandboxExpired` Event names it.
pub(crate) async fn owner_is_deleted_at<K>(
    env: &Env,
    pod: &Pod,
    at: DateTime<Utc>,
    owners: &Api<K>,
    (kind, name): (&str, &str),
) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let d = env.diagnose(pod, at)?;
    check_at(&d, "/expiry/action", "delete-owner")?;
    let gone = wall(wait_gone(owners, name, Duration::from_secs(20)).await?);
    check(
        gone - at <= TimeDelta::seconds(1),
        format!("the {kind} went {} after expiry", gone - at),
    )?;
    let (ns, pod) = (
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref(),
    );
    let (ns, pod) = ns.zip(pod).ok_or("a pod without namespace or name")?;
    env.expired_event_says(
        ns,
        pod,
        None,
        &[&format!("{kind} {name}")],
        &format!("the Event names the {kind}"),
    )
    .await
}

/// contract: controller.expiry-left-owned
pub(crate) async fn replicaset_owner_is_left_with_a_warning(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let before = env.expired_total("left-owned")?;
    let sets: Api<ReplicaSet> = Api::namespaced(env.client.clone(), ns);
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "sandboxes"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "sbx"}},
            "template": {"metadata": {"labels": {"app": "sbx"}},
                "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36"}]}}},
    }))?;
    let at = in_seconds(2);
    let labels = json!({"app": "sbx"});
    let stored = create_owned(env, ns, rs, "rs-pod", labels, at).await?;
    let pods = env.pods(ns);
    env.expired_event_says(
        ns,
        "rs-pod",
        Some("Warning"),
        &["ReplicaSet sandboxes", "ReplicaSet.apps"],
        "the Event names the owner and what to do",
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    check_still_there(&pods, "rs-pod", "the owned pod is left").await?;
    check_still_there(&sets, "sandboxes", "the ReplicaSet is left").await?;
    let d = env.diagnose(&stored, at)?;
    check_at(&d, "/expiry/action", "leave-owned")?;
    env.expired_once_more("left-owned", before)
}

/// Deletes pod `name` at once and creates a sandbox pod of the same name,
/// without an expiry: another pod, with another UID.
async fn recreate(pods: &Api<Pod>, name: &str) -> Result<()> {
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete(name, &now).await?;
    wait_gone(pods, name, Duration::from_secs(10)).await?;
    create_unexpiring(pods, name, &json!({})).await?;
    Ok(())
}

/// contract: controller.expiry-delete-pod
pub(crate) async fn recreated_pod_is_not_hit_by_a_stale_decision(
    env: &Env,
    id: &str,
) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let pods = env.pods(ns);
    // The write itself: a delete decided for the old UID cannot hit the new pod.
    create_unexpiring(&pods, "same", &json!({})).await?;
    let stale: SandboxPod = Api::<SandboxPod>::namespaced(env.client.clone(), ns)
        .get("same")
        .await?;
    recreate(&pods, "same").await?;
    let stale = PodRef::of(&stale).ok_or("the pod read back has no name or UID")?;
    let outcome = Actions::new(env.client.clone(), "e2e".into())
        .delete_pod(&stale)
        .await?;
    check(
        outcome == Outcome::Stale,
        format!("delete with the old UID: {outcome:?}, expected Stale"),
    )?;
    check_still_there(&pods, "same", "the new pod of the same name survives").await?;
    // The controller: a timer set for the old pod finds the new one.
    let at = in_seconds(3);
    create_expiring(&pods, "recreated", at).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    recreate(&pods, "recreated").await?;
    while Utc::now() < at + TimeDelta::seconds(2) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let what = "the recreated pod survives the old pod's expiry";
    check_still_there(&pods, "recreated", what).await
}
