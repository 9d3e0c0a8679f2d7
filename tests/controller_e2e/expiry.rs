//! Expiry: on time, renewal, what stays, owner rules, the UID precondition.

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use sandbox_webhook::controller::actions::{Actions, Outcome};
use sandbox_webhook::lifecycle::SandboxPod;
use serde_json::{Value, json};

use crate::Env;
use crate::harness::*;

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

pub(crate) async fn expired_pod_is_deleted_on_time(env: &Env) -> Result<()> {
    let ns = "e2e-ctl-expiry";
    namespace(&env.client, ns).await?;
    let before = env
        .leader()?
        .metric("sandbox_webhook_expired_total{action=\"deleted-pod\"}")?;
    let at = in_seconds(3);
    let pods = env.pods(ns);
    pods.create(
        &pp(),
        &sandbox("expiring", json!({}), expires_at(at), json!({}), json!({}))?,
    )
    .await?;
    let stored = pods.get("expiring").await?;
    let early = env.diagnose(&stored, at - TimeDelta::seconds(1))?;
    check(
        early["expiry"]
            == json!({"expiresAt": rfc3339(at), "expired": false, "action": "delete-pod"}),
        format!("diagnose before: {early}"),
    )?;
    let due = env.diagnose(&stored, at)?;
    check(
        due["expiry"]["expired"] == json!(true),
        format!("diagnose at expiry: {due}"),
    )?;
    gone_on_time(&pods, "expiring", at).await?;
    let events = events(
        &env.client,
        ns,
        "expiring",
        "SandboxExpired",
        1,
        Duration::from_secs(5),
    )
    .await?;
    check(
        events.len() == 1,
        format!("{} SandboxExpired events, expected 1", events.len()),
    )?;
    check(
        events[0].type_.as_deref() == Some("Normal"),
        "the SandboxExpired Event is Normal",
    )?;
    let after = env
        .leader()?
        .metric("sandbox_webhook_expired_total{action=\"deleted-pod\"}")?;
    check(
        after == before + 1.0,
        format!("expired_total{{deleted-pod}} went {before} -> {after}"),
    )
}

pub(crate) async fn renewed_pod_survives_its_old_time(env: &Env) -> Result<()> {
    let ns = "e2e-ctl-renewal";
    namespace(&env.client, ns).await?;
    let pods = env.pods(ns);
    let old = in_seconds(3);
    pods.create(
        &pp(),
        &sandbox("renewed", json!({}), expires_at(old), json!({}), json!({}))?,
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let new = old + TimeDelta::seconds(3);
    let patch = json!({"metadata": {"annotations": expires_at(new)}});
    pods.patch("renewed", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    while Utc::now() < old + TimeDelta::milliseconds(1500) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let renewed = pods
        .get_opt("renewed")
        .await?
        .ok_or("the renewed pod was deleted at its old time")?;
    let at_old = env.diagnose(&renewed, old)?;
    check(
        at_old["expiry"]["expired"] == json!(false),
        format!("diagnose at the old time: {at_old}"),
    )?;
    let at_new = env.diagnose(&renewed, new)?;
    check(
        at_new["expiry"]
            == json!({"expiresAt": rfc3339(new), "expired": true, "action": "delete-pod"}),
        format!("diagnose at the new time: {at_new}"),
    )?;
    gone_on_time(&pods, "renewed", new).await.map(|_| ())
}

pub(crate) async fn manual_cleanup_and_invalid_stay(env: &Env) -> Result<()> {
    let ns = "e2e-ctl-stay";
    namespace(&env.client, ns).await?;
    let pods = env.pods(ns);
    let past = Utc::now() - TimeDelta::seconds(30);
    let manual = json!({format!("{P}/manual-cleanup"): "true"});
    pods.create(
        &pp(),
        &sandbox("manual", manual, expires_at(past), json!({}), json!({}))?,
    )
    .await?;
    let invalid = json!({format!("{P}/expires-at"): "tomorrow"});
    pods.create(
        &pp(),
        &sandbox("invalid", json!({}), invalid, json!({}), json!({}))?,
    )
    .await?;
    pods.create(
        &pp(),
        &sandbox("forever", json!({}), json!({}), json!({}), json!({}))?,
    )
    .await?;
    let warned = events(
        &env.client,
        ns,
        "invalid",
        "InvalidExpiry",
        1,
        Duration::from_secs(10),
    )
    .await?;
    check(
        warned.len() == 1,
        format!("{} InvalidExpiry events, expected 1", warned.len()),
    )?;
    check(
        warned[0].type_.as_deref() == Some("Warning"),
        "InvalidExpiry is a Warning",
    )?;
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
        check(
            d["expiry"]["action"] == json!(action),
            format!("diagnose {name}: {d}"),
        )?;
    }
    Ok(())
}

pub(crate) fn owner_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({"ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true}]})
}

pub(crate) async fn job_owner_is_deleted(env: &Env) -> Result<()> {
    let ns = "e2e-ctl-job";
    namespace(&env.client, ns).await?;
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), ns);
    let job: Job = serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "sandbox-job"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "sandbox", "image": "busybox:1.36"}]}}},
    }))?;
    let job = jobs.create(&pp(), &job).await?;
    let uid = job.metadata.uid.clone().ok_or("job without uid")?;
    let pods = env.pods(ns);
    let at = in_seconds(2);
    let meta = owner_ref("batch/v1", "Job", "sandbox-job", &uid);
    pods.create(
        &pp(),
        &sandbox("job-pod", json!({}), expires_at(at), meta, json!({}))?,
    )
    .await?;
    let stored = pods.get("job-pod").await?;
    let d = env.diagnose(&stored, at)?;
    check(
        d["expiry"]["action"] == json!("delete-owner"),
        format!("diagnose: {d}"),
    )?;
    let gone = wall(wait_gone(&jobs, "sandbox-job", Duration::from_secs(20)).await?);
    check(
        gone - at <= TimeDelta::seconds(1),
        format!("the Job went {} after expiry", gone - at),
    )?;
    let events = events(
        &env.client,
        ns,
        "job-pod",
        "SandboxExpired",
        1,
        Duration::from_secs(5),
    )
    .await?;
    check(
        events.len() == 1,
        "one SandboxExpired Event for the Job's pod",
    )?;
    let note = events[0].note.clone().unwrap_or_default();
    check(
        note.contains("Job sandbox-job"),
        format!("the Event names the Job: {note}"),
    )
}

pub(crate) async fn replicaset_owner_is_left_with_a_warning(env: &Env) -> Result<()> {
    let ns = "e2e-ctl-rs";
    namespace(&env.client, ns).await?;
    let before = env
        .leader()?
        .metric("sandbox_webhook_expired_total{action=\"left-owned\"}")?;
    let sets: Api<ReplicaSet> = Api::namespaced(env.client.clone(), ns);
    let rs: ReplicaSet = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "sandboxes"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "sbx"}},
            "template": {"metadata": {"labels": {"app": "sbx"}},
                "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36"}]}}},
    }))?;
    let rs = sets.create(&pp(), &rs).await?;
    let uid = rs.metadata.uid.clone().ok_or("rs without uid")?;
    let pods = env.pods(ns);
    let at = in_seconds(2);
    let meta = owner_ref("apps/v1", "ReplicaSet", "sandboxes", &uid);
    pods.create(
        &pp(),
        &sandbox(
            "rs-pod",
            json!({"app": "sbx"}),
            expires_at(at),
            meta,
            json!({}),
        )?,
    )
    .await?;
    let stored = pods.get("rs-pod").await?;
    let warned = events(
        &env.client,
        ns,
        "rs-pod",
        "SandboxExpired",
        1,
        Duration::from_secs(10),
    )
    .await?;
    check(
        warned.len() == 1,
        format!("{} SandboxExpired events, expected 1", warned.len()),
    )?;
    check(
        warned[0].type_.as_deref() == Some("Warning"),
        "the Event is a Warning",
    )?;
    let note = warned[0].note.clone().unwrap_or_default();
    check(
        note.contains("ReplicaSet sandboxes") && note.contains("ReplicaSet.apps"),
        format!("the Event names the owner and what to do: {note}"),
    )?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    check(
        pods.get_opt("rs-pod").await?.is_some(),
        "the owned pod is left",
    )?;
    check(
        sets.get_opt("sandboxes").await?.is_some(),
        "the ReplicaSet is left",
    )?;
    let d = env.diagnose(&stored, at)?;
    check(
        d["expiry"]["action"] == json!("leave-owned"),
        format!("diagnose: {d}"),
    )?;
    let after = env
        .leader()?
        .metric("sandbox_webhook_expired_total{action=\"left-owned\"}")?;
    check(
        after == before + 1.0,
        format!("expired_total{{left-owned}} went {before} -> {after}"),
    )
}

pub(crate) async fn recreated_pod_is_not_hit_by_a_stale_decision(env: &Env) -> Result<()> {
    let ns = "e2e-ctl-uid";
    namespace(&env.client, ns).await?;
    let pods = env.pods(ns);
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    // The write itself: a delete decided for the old UID cannot hit the new pod.
    pods.create(
        &pp(),
        &sandbox("same", json!({}), json!({}), json!({}), json!({}))?,
    )
    .await?;
    let stale: SandboxPod = Api::<SandboxPod>::namespaced(env.client.clone(), ns)
        .get("same")
        .await?;
    pods.delete("same", &now).await?;
    wait_gone(&pods, "same", Duration::from_secs(10)).await?;
    pods.create(
        &pp(),
        &sandbox("same", json!({}), json!({}), json!({}), json!({}))?,
    )
    .await?;
    let outcome = Actions::new(env.client.clone(), "e2e".into())
        .delete_pod(&stale)
        .await?;
    check(
        outcome == Outcome::Stale,
        format!("delete with the old UID: {outcome:?}, expected Stale"),
    )?;
    check(
        pods.get_opt("same").await?.is_some(),
        "the new pod of the same name survives",
    )?;
    // The controller: a timer set for the old pod finds the new one.
    let at = in_seconds(3);
    pods.create(
        &pp(),
        &sandbox("recreated", json!({}), expires_at(at), json!({}), json!({}))?,
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    pods.delete("recreated", &now).await?;
    wait_gone(&pods, "recreated", Duration::from_secs(10)).await?;
    pods.create(
        &pp(),
        &sandbox("recreated", json!({}), json!({}), json!({}), json!({}))?,
    )
    .await?;
    while Utc::now() < at + TimeDelta::seconds(2) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    check(
        pods.get_opt("recreated").await?.is_some(),
        "the recreated pod survives the old pod's expiry",
    )
}
