//! contract: controller.expiry-delete-owner, controller.expiry-left-owned,
//! controller.expiry-renewal, controller.expiry-on-time
//!
//! Scenario 3: expiry with owners, the garbage collector doing
//! its part: a Job's expired sandbox takes the Job and its pods with it, a
//! `ReplicaSet`'s is left with a warning, a renewed pod outlives its first
//! time. Never early: every removal is timed by the apiserver's own clock.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::harness::{
    Env, P, Result, check, in_seconds, rfc3339, running_on, sandbox_pod, sandbox_template,
};
use common::cluster::wait_for_pods;
use common::deletions::{Deletion, PodDeletions};

/// The deletions of pods whose names start with `prefix`, once there are
/// `n`.
async fn deleted(
    watch: &PodDeletions,
    prefix: &str,
    n: usize,
    timeout: Duration,
) -> Result<Vec<Deletion>> {
    let what = format!("{n} pods {prefix}* deleted");
    watch
        .wait_until(&what, timeout, |seen| {
            let found: Vec<Deletion> = seen
                .iter()
                .filter(|(name, _)| name.starts_with(prefix))
                .map(|(_, d)| *d)
                .collect();
            (found.len() >= n).then_some(found)
        })
        .await
}

/// Never before `at`, and gone within `limit` of it.
fn on_time(what: &str, r: &Deletion, at: DateTime<Utc>, limit: TimeDelta) -> Result<()> {
    let requested = r
        .requested
        .ok_or(format!("{what}: deleted without a deletionTimestamp"))?;
    check(
        requested >= at,
        format!(
            "{what}: the apiserver took its delete at {requested} (second), before its expiry {}",
            rfc3339(at)
        ),
    )?;
    let delay = r.gone - at;
    check(
        delay <= limit,
        format!(
            "{what}: gone {} ms after its expiry (limit {} ms)",
            delay.num_milliseconds(),
            limit.num_milliseconds()
        ),
    )?;
    println!(
        "    {what}: removed {} ms after its expiry",
        delay.num_milliseconds()
    );
    Ok(())
}

pub(crate) async fn expiry_follows_owners(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id, &[]).await?;
    let pods = env.pods(ns);
    let watch = PodDeletions::start(pods.clone());
    let pp = PostParams::default();
    let expires = |at| json!({format!("{P}/expires-at"): rfc3339(at)});

    let job_at = in_seconds(6);
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), ns);
    let template = sandbox_template(
        "job-sandbox",
        &expires(job_at),
        &json!({"restartPolicy": "Never"}),
    );
    jobs.create(
        &pp,
        &serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "job-sandbox"},
            "spec": {"parallelism": 2, "completions": 2, "template": template},
        }))?,
    )
    .await?;

    let kept_at = in_seconds(6);
    let deployments: Api<Deployment> = Api::namespaced(env.client.clone(), ns);
    let template = sandbox_template("kept", &expires(kept_at), &json!({}));
    deployments.create(&pp, &serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kept"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "kept"}}, "template": template},
    }))?)
    .await?;

    let old = in_seconds(5);
    pods.create(&pp, &sandbox_pod("renewed", &expires(old), &json!({}))?)
        .await?;

    // Every sandbox runs before it expires.
    wait_for_pods(
        &pods,
        "the sandboxes Running",
        Duration::from_secs(5),
        |list| list.len() == 4 && list.iter().all(|p| running_on(p).is_some()),
    )
    .await?;
    let new = old + TimeDelta::seconds(4);
    let patch = json!({"metadata": {"annotations": expires(new)}});
    pods.patch("renewed", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;

    // The Job goes, and the garbage collector takes both of its pods.
    let job_pods = deleted(&watch, "job-sandbox-", 2, Duration::from_secs(15)).await?;
    for r in &job_pods {
        on_time("a Job's pod", r, job_at, TimeDelta::seconds(2))?;
    }
    check(
        jobs.get_opt("job-sandbox").await?.is_none(),
        "the expired Job still exists",
    )?;

    // The renewed pod outlives its first time, and goes at its new one.
    check(
        deleted(&watch, "renewed", 1, Duration::ZERO).await.is_err(),
        "the renewed pod was deleted at its old time",
    )?;
    let renewed = deleted(&watch, "renewed", 1, Duration::from_secs(15)).await?;
    on_time("the renewed pod", &renewed[0], new, TimeDelta::seconds(1))?;

    // The Deployment's pod is left running, with a warning that says why.
    while Utc::now() < kept_at + TimeDelta::seconds(1) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let kept: Vec<Pod> = pods
        .list(&ListParams::default().labels("app=kept"))
        .await?
        .items;
    let [kept] = kept.as_slice() else {
        return Err(format!("{} pods of the Deployment, expected its 1", kept.len()).into());
    };
    check(
        kept.metadata.deletion_timestamp.is_none(),
        "the ReplicaSet's pod was deleted",
    )?;
    let name = kept.metadata.name.as_deref().unwrap_or_default();
    let warning = env.event(ns, name, "SandboxExpired").await?;
    let note = warning.note.unwrap_or_default();
    check(
        warning.type_.as_deref() == Some("Warning") && note.contains("ReplicaSet kept-"),
        format!("the Event about the ReplicaSet's pod says {note:?}"),
    )?;
    check(
        deployments.get_opt("kept").await?.is_some(),
        "the Deployment was deleted",
    )
}
