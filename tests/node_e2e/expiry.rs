//! Scenario 3: expiry on a real node. The installed controller removes a
//! running sandbox at its `expires-at`, and the kubelet stops its
//! containers: the processes the node ran for it are gone from the node's
//! tasks and from the host, and the pod is gone from the API only after.
//! The sandbox starts with an hour to live; once it runs, its expiry is
//! moved a few seconds ahead (the annotation is the control plane's to
//! overwrite: contract: controller.expiry-renewal), so a slow start never
//! lets it expire unseen (contract: controller.expiry-on-time,
//! controller.expiry-delete-pod).

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::harness::{Env, P, Result, check, wait_for};
use crate::node::{container_id, tasks};

/// How long the sandbox lives once it was seen running.
const LIFETIME: i64 = 4;

pub(crate) async fn expired_sandbox_is_stopped(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[]).await?;
    let sandbox = env
        .sandbox("expiring", "echo running; exec sleep 3600")?
        .annotation("timeout", "1h");
    let pods = env.pods(&ns);
    pods.create(&PostParams::default(), &sandbox.pod()).await?;
    let p = env.ready(&ns, "expiring", Duration::from_secs(60)).await?;
    let main = container_id(&p, "sandbox").ok_or("the main container has no id")?;
    let pid = *tasks(env)?
        .get(&main)
        .ok_or(format!("the main container {main} is not a running task"))?;
    check(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        format!("the main container's process {pid} is not on the host"),
    )?;
    // Whole seconds, as the annotation keeps them.
    let later = Utc::now() + chrono::TimeDelta::seconds(LIFETIME);
    let expires = DateTime::from_timestamp(later.timestamp(), 0).ok_or("no such time")?;
    let expires_at = expires.to_rfc3339_opts(SecondsFormat::Secs, true);
    let patch = json!({"metadata": {"annotations": {format!("{P}/expires-at"): expires_at}}});
    pods.patch("expiring", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    println!(
        "    expiring: Running, main container pid {pid} on the host; expires-at moved to {expires_at}"
    );

    let gone = wait_for(
        "the controller to remove the expired sandbox",
        Duration::from_secs(LIFETIME as u64 + 45),
        async || Ok(pods.get_opt("expiring").await?.is_none().then(Utc::now)),
    )
    .await?;
    check(
        gone >= expires,
        format!("the sandbox was gone at {gone}, before its expiry {expires_at}"),
    )?;
    let left = tasks(env)?;
    check(
        !left.contains_key(&main),
        format!("the main container {main} still runs on the node"),
    )?;
    check(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| !c.starts_with("sleep")),
        format!("the main container's process {pid} still runs"),
    )?;
    let recorded =
        common::cluster::events_about(&env.client, &ns, "expiring", "SandboxExpired").await?;
    check(
        !recorded.is_empty(),
        "no SandboxExpired Event about the sandbox",
    )?;
    println!(
        "    removed {:.1}s after its expiry; its containers are no longer tasks of the node and pid {pid} is gone",
        (gone - expires).to_std().unwrap_or_default().as_secs_f64()
    );
    Ok(())
}
