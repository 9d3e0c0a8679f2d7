//! contract: controller.expiry-on-time, controller.expiry-delete-owner, controller.expiry-renewal
//!
//! Never early: no sandbox is removed before its
//! `expires-at`, by the cluster's account. For every pod this suite expires,
//! the moment a watch sees it deleted and the time of the controller's
//! `SandboxExpired` Event are at or after its `expires-at`: pods expiring
//! together on whole seconds, and a pod renewed just before its time. A Job
//! whose two pods expire two seconds apart is deleted (which makes the
//! garbage collector delete both; this control plane runs none) only once
//! the later one is due.

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use serde_json::json;

use crate::Env;
use crate::expiry::{job, owner_ref};
use crate::harness::{
    Result, check, create_expiring, in_seconds, owned_expiring, pp, renew, rfc3339, wait_gone, wall,
};
use common::deletions::PodDeletions;

/// When each pod of `names` was seen deleted, once every one was.
async fn seen_deleted(
    deletions: &PodDeletions,
    names: &[&str],
    timeout: Duration,
) -> Result<HashMap<String, DateTime<Utc>>> {
    let what = format!("{} pods deleted", names.len());
    deletions
        .wait_until(&what, timeout, |seen| {
            names
                .iter()
                .map(|n| Some(((*n).to_owned(), seen.get(*n)?.gone)))
                .collect()
        })
        .await
}

pub(crate) async fn never_removed_before_its_time(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let pods = env.pods(ns);
    let deletions = PodDeletions::start(pods.clone());
    let first = in_seconds(2);
    let mut due: Vec<(String, DateTime<Utc>)> = Vec::new();

    // Pods created at whatever fraction of a second, expiring together on
    // three whole seconds.
    for i in 0..24 {
        let at = first + TimeDelta::seconds(i % 3);
        let name = format!("p-{i}");
        create_expiring(&pods, &name, at).await?;
        due.push((name, at));
    }

    // A Job that controls two sandbox pods expiring two seconds apart.
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), ns);
    let job = jobs.create(&pp(), &job("pair")?).await?;
    let late = first + TimeDelta::seconds(2);
    for (name, at) in [("pair-early", first), ("pair-late", late)] {
        let pod = owned_expiring(name, &json!({}), at, &owner_ref(&job)?)?;
        pods.create(&pp(), &pod).await?;
    }
    let job_gone = tokio::spawn(async move {
        wait_gone(&jobs, "pair", Duration::from_secs(20))
            .await
            .map(wall)
            .map_err(|e| e.to_string())
    });

    // Renewed a moment before its first time: removed at its new one.
    let old = first + TimeDelta::seconds(1);
    create_expiring(&pods, "renewed", old).await?;
    let renew_at = old - TimeDelta::milliseconds(40);
    while Utc::now() < renew_at {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let new = old + TimeDelta::seconds(2);
    renew(&pods, "renewed", new).await?;
    due.push(("renewed".to_owned(), new));

    let names: Vec<&str> = due.iter().map(|(n, _)| n.as_str()).collect();
    let seen = seen_deleted(&deletions, &names, Duration::from_secs(20)).await?;
    let mut worst = TimeDelta::MAX;
    for (name, at) in &due {
        let delay = seen[name] - *at;
        worst = worst.min(delay);
        check(
            delay >= TimeDelta::zero(),
            format!(
                "{name} was seen deleted {} ms before its expires-at {}",
                -delay.num_milliseconds(),
                rfc3339(*at)
            ),
        )?;
    }
    let job_gone = job_gone.await??;
    check(
        job_gone >= late,
        format!(
            "the Job was deleted {} ms before its later pod's expires-at {}",
            (late - job_gone).num_milliseconds(),
            rfc3339(late)
        ),
    )?;

    // The controller's Events: one per removal it made, none before its time
    // (the Job's is about one of its pods, both due at the later time).
    let mut due: HashMap<&str, DateTime<Utc>> =
        due.iter().map(|(n, at)| (n.as_str(), *at)).collect();
    due.insert("pair-early", late);
    due.insert("pair-late", late);
    let events = sandbox_expired(env, ns, 26).await?;
    for (name, time) in &events {
        let at = due
            .get(name.as_str())
            .ok_or(format!("an Event about {name}"))?;
        check(
            time >= at,
            format!(
                "the SandboxExpired Event about {name} is at {time}, before {}",
                rfc3339(*at)
            ),
        )?;
    }
    println!(
        "    {} pods, {} Events: the earliest removal was {} ms after its expiry",
        due.len(),
        events.len(),
        worst.num_milliseconds()
    );
    Ok(())
}

/// (pod, eventTime) of the `SandboxExpired` Events in `ns`, waiting for at
/// least `min` of them.
async fn sandbox_expired(env: &Env, ns: &str, min: usize) -> Result<Vec<(String, DateTime<Utc>)>> {
    let api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client.clone(), ns);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<(String, DateTime<Utc>)> = api
            .list(&kube::api::ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("SandboxExpired"))
            .filter_map(|e| {
                let name = e.regarding?.name?;
                let t = e.event_time?.0;
                Some((
                    name,
                    DateTime::from_timestamp(
                        t.as_second(),
                        t.subsec_nanosecond().try_into().ok()?,
                    )?,
                ))
            })
            .collect();
        if found.len() >= min || tokio::time::Instant::now() > deadline {
            check(
                found.len() >= min,
                format!("{} SandboxExpired Events, expected {min}", found.len()),
            )?;
            return Ok(found);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
