//! contract: controller.expiry-delete-owner, controller.expiry-left-owned,
//! controller.expiry-renewal, controller.expiry-on-time
//!
//! Scenario 3: expiry with owners, the garbage collector doing
//! its part: a Job's expired sandbox takes the Job and its pods with it, a
//! `ReplicaSet`'s is left with a warning, a renewed pod outlives its first
//! time. Never early: every removal is timed by the apiserver's own clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::harness::{
    Env, P, Result, check, in_seconds, rfc3339, running_on, sandbox_pod, sandbox_template, wait_for,
};
use common::cluster::wait_for_pods;

/// How a pod went: when the apiserver took the delete request (its
/// deletionTimestamp less the grace period, whole seconds as the apiserver
/// keeps them) and when the watch saw it gone.
#[derive(Clone, Copy, Debug)]
struct Removal {
    requested: DateTime<Utc>,
    gone: DateTime<Utc>,
}

type Removals = Arc<Mutex<HashMap<String, Removal>>>;

/// Records every pod deletion in `ns` until dropped.
struct DeleteWatch {
    seen: Removals,
    task: tokio::task::JoinHandle<()>,
}

impl DeleteWatch {
    fn start(pods: Api<Pod>) -> Self {
        let seen: Removals = Arc::default();
        let sink = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher::watcher(pods, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let Ok(watcher::Event::Delete(pod)) = event else {
                    continue;
                };
                let meta = &pod.metadata;
                let grace = meta.deletion_grace_period_seconds.unwrap_or_default();
                let Some(at) = meta.deletion_timestamp.as_ref() else {
                    continue;
                };
                let Some(at) = DateTime::from_timestamp(at.0.as_second(), 0) else {
                    continue;
                };
                let removal = Removal {
                    requested: at - TimeDelta::seconds(grace),
                    gone: Utc::now(),
                };
                let name = meta.name.clone().unwrap_or_default();
                sink.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(name, removal);
            }
        });
        DeleteWatch { seen, task }
    }

    /// The removals of pods whose names start with `prefix`, once there are `n`.
    async fn wait(&self, prefix: &str, n: usize, timeout: Duration) -> Result<Vec<Removal>> {
        wait_for(
            &format!("{n} pods {prefix}* deleted"),
            timeout,
            async || {
                let seen = self
                    .seen
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let found: Vec<Removal> = seen
                    .iter()
                    .filter(|(name, _)| name.starts_with(prefix))
                    .map(|(_, r)| *r)
                    .collect();
                Ok((found.len() >= n).then_some(found))
            },
        )
        .await
    }
}

impl Drop for DeleteWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Never before `at`, and gone within `limit` of it.
fn on_time(what: &str, r: &Removal, at: DateTime<Utc>, limit: TimeDelta) -> Result<()> {
    check(
        r.requested >= at,
        format!(
            "{what}: the apiserver took its delete at {} (second), before its expiry {}",
            r.requested,
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
    let watch = DeleteWatch::start(pods.clone());
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
    let job_pods = watch
        .wait("job-sandbox-", 2, Duration::from_secs(15))
        .await?;
    for r in &job_pods {
        on_time("a Job's pod", r, job_at, TimeDelta::seconds(2))?;
    }
    check(
        jobs.get_opt("job-sandbox").await?.is_none(),
        "the expired Job still exists",
    )?;

    // The renewed pod outlives its first time, and goes at its new one.
    check(
        watch.wait("renewed", 1, Duration::ZERO).await.is_err(),
        "the renewed pod was deleted at its old time",
    )?;
    let renewed = watch.wait("renewed", 1, Duration::from_secs(15)).await?;
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
