//! End-to-end proof of the lifecycle controller (SPEC 10, issue 12) against
//! a real kube-apiserver and etcd (`tests/e2e/cluster.sh`): two
//! `sandbox-webhook controller` replicas share a Lease; every assertion is
//! on what the apiserver stores. There is no scheduler or kubelet, so a
//! scheduling failure is written to the status subresource as kube-scheduler
//! writes it. Each scenario uses its own namespace; they run in order and
//! print `N passed, M failed`.

#[path = "controller_e2e/harness.rs"]
mod harness;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use futures_util::FutureExt;
use harness::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use sandbox_webhook::controller::actions::{Actions, Outcome};
use sandbox_webhook::lifecycle::SandboxPod;
use serde_json::{Value, json};

const SCHEDULER_MESSAGE: &str = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
const CAPACITY_MESSAGE: &str = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";

struct Env {
    client: Client,
    work: PathBuf,
    config: PathBuf,
    controllers: Vec<Controller>,
}

impl Env {
    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    fn leader(&self) -> Result<&Controller> {
        let leaders: Vec<_> = self.controllers.iter().filter(|c| c.is_leader()).collect();
        check(
            leaders.len() == 1,
            format!("{} leaders, expected exactly 1", leaders.len()),
        )?;
        Ok(leaders[0])
    }

    async fn wait_leader(&self, timeout: Duration) -> Result<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.controllers.iter().position(Controller::is_leader) {
                return Ok(i);
            }
            check(
                Instant::now() < deadline,
                format!("no leader within {timeout:?}"),
            )?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn diagnose(&self, pod: &Pod, now: chrono::DateTime<Utc>) -> Result<Value> {
        diagnose(pod, now, &self.config, &self.work)
    }
}

fn pp() -> PostParams {
    PostParams::default()
}

/// Waits for the pod to go and checks it went within 1 s after `at`, never
/// before; the delay.
async fn gone_on_time(pods: &Api<Pod>, name: &str, at: chrono::DateTime<Utc>) -> Result<TimeDelta> {
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

async fn expired_pod_is_deleted_on_time(env: &Env) -> Result<()> {
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

async fn renewed_pod_survives_its_old_time(env: &Env) -> Result<()> {
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

async fn manual_cleanup_and_invalid_stay(env: &Env) -> Result<()> {
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

fn owner_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({"ownerReferences": [{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true}]})
}

async fn job_owner_is_deleted(env: &Env) -> Result<()> {
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

async fn replicaset_owner_is_left_with_a_warning(env: &Env) -> Result<()> {
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

async fn recreated_pod_is_not_hit_by_a_stale_decision(env: &Env) -> Result<()> {
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

fn condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

async fn schedule_failure(pods: &Api<Pod>, name: &str, message: &str) -> Result<()> {
    let status = json!({"status": {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
        "lastTransitionTime": rfc3339(Utc::now()),
    }]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&status))
        .await?;
    Ok(())
}

async fn unschedulable_platform_is_reported(env: &Env) -> Result<()> {
    let ns = "e2e-ctl-platform";
    namespace(&env.client, ns).await?;
    let before = env
        .leader()?
        .metric("sandbox_webhook_platform_unschedulable_total")?;
    let pods = env.pods(ns);
    let arm = json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}});
    for name in ["arm", "cpu"] {
        pods.create(
            &pp(),
            &sandbox(name, json!({}), json!({}), json!({}), arm.clone())?,
        )
        .await?;
    }
    schedule_failure(&pods, "arm", SCHEDULER_MESSAGE).await?;
    schedule_failure(&pods, "cpu", CAPACITY_MESSAGE).await?;
    let ct = format!("{P}/PlatformUnschedulable");
    let deadline = Instant::now() + Duration::from_secs(10);
    let reported = loop {
        let pod = pods.get("arm").await?;
        if condition(&pod, &ct).is_some() {
            break pod;
        }
        check(
            Instant::now() < deadline,
            "no PlatformUnschedulable condition within 10s",
        )?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let c = condition(&reported, &ct).ok_or("condition")?;
    check(
        c.status == "True" && c.reason.as_deref() == Some("PlatformUnschedulable"),
        format!("condition: {c:?}"),
    )?;
    check(
        c.message.as_deref() == Some(SCHEDULER_MESSAGE),
        "the condition carries the scheduler's whole message",
    )?;
    let warned = events(
        &env.client,
        ns,
        "arm",
        "PlatformUnschedulable",
        1,
        Duration::from_secs(5),
    )
    .await?;
    check(
        warned.first().and_then(|e| e.type_.as_deref()) == Some("Warning"),
        "a Warning Event",
    )?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let warned = events(
        &env.client,
        ns,
        "arm",
        "PlatformUnschedulable",
        2,
        Duration::ZERO,
    )
    .await?;
    check(
        warned.len() == 1,
        format!(
            "{} PlatformUnschedulable events, expected exactly 1",
            warned.len()
        ),
    )?;
    let cpu = pods.get("cpu").await?;
    check(
        condition(&cpu, &ct).is_none(),
        "Insufficient cpu is not a platform problem",
    )?;
    let none = events(
        &env.client,
        ns,
        "cpu",
        "PlatformUnschedulable",
        1,
        Duration::ZERO,
    )
    .await?;
    check(none.is_empty(), "no Event for the capacity pod")?;
    let after = env
        .leader()?
        .metric("sandbox_webhook_platform_unschedulable_total")?;
    check(
        after == before + 1.0,
        format!("platform_unschedulable_total went {before} -> {after}"),
    )?;
    let d = env.diagnose(&pods.get("arm").await?, Utc::now())?;
    check(
        d["platform"]
            == json!({"hasPlatform": true, "hasNonPlatform": false, "unschedulable": true, "message": SCHEDULER_MESSAGE}),
        format!("diagnose arm: {d}"),
    )?;
    let d = env.diagnose(&cpu, Utc::now())?;
    check(
        d["platform"]["unschedulable"] == json!(false),
        format!("diagnose cpu: {d}"),
    )
}

async fn standby_takes_over_when_the_leader_dies(env: &mut Env) -> Result<()> {
    let ns = "e2e-ctl-failover";
    namespace(&env.client, ns).await?;
    let leader = env.wait_leader(Duration::from_secs(10)).await?;
    let standby = 1 - leader;
    env.controllers[leader].kill();
    let killed = Instant::now();
    let pods = env.pods(ns);
    let at = in_seconds(1);
    let failover = pods
        .create(
            &pp(),
            &sandbox("failover", json!({}), expires_at(at), json!({}), json!({}))?,
        )
        .await?;
    let d = env.diagnose(&failover, at)?;
    check(
        d["expiry"]["action"] == json!("delete-pod"),
        format!("diagnose: {d}"),
    )?;
    let limit = Duration::from_secs(LEASE_SECONDS + 3);
    while !env.controllers[standby].is_leader() {
        check(
            killed.elapsed() < limit,
            format!("the standby did not take over within {limit:?}"),
        )?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let takeover = killed.elapsed();
    let gone = wait_gone(&pods, "failover", Duration::from_secs(20)).await?;
    let acted = gone.duration_since(killed);
    println!(
        "    leader killed: standby leader after {} ms, expired pod removed {} ms after the kill (lease {LEASE_SECONDS} s)",
        takeover.as_millis(),
        acted.as_millis()
    );
    check(
        acted <= limit,
        format!("the standby acted {acted:?} after the kill (limit {limit:?})"),
    )?;
    env.controllers[leader].restart()?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    check(
        !env.controllers[leader].is_leader(),
        "the restarted replica stands by",
    )?;
    check(env.controllers[standby].running(), "the new leader runs")
}

async fn sigterm_releases_the_lease(env: &mut Env) -> Result<()> {
    let leader = env.wait_leader(Duration::from_secs(10)).await?;
    let identity = env.controllers[leader].identity.clone();
    let status = env.controllers[leader].terminate()?;
    check(
        status.success(),
        format!("controller exit status on SIGTERM: {status}"),
    )?;
    let lease = Api::<Lease>::namespaced(env.client.clone(), HOME)
        .get(LEASE)
        .await?;
    let holder = lease.spec.and_then(|s| s.holder_identity);
    check(
        holder.as_deref() != Some(identity.as_str()),
        format!("the Lease is still held by {identity} after SIGTERM"),
    )?;
    let next = env
        .wait_leader(Duration::from_secs(LEASE_SECONDS + 3))
        .await?;
    check(next != leader, "the other replica leads")?;
    env.controllers[leader].restart()
}

/// The chart's renewal policy, rendered by helm as the apiserver serves the
/// API, applied, and exercised with a bad and a good renewal.
async fn invalid_renewal_is_denied_by_the_policy(env: &Env) -> Result<()> {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let helm = std::process::Command::new(repo().join("tests/e2e/cluster.sh"))
        .arg("helm")
        .output()?;
    check(helm.status.success(), "cluster.sh helm")?;
    let helm = String::from_utf8(helm.stdout)?.trim().to_owned();
    let out = std::process::Command::new(helm)
        .args(["template", "sbx"])
        .arg(repo().join("charts/sandbox-webhook"))
        .args([
            "--namespace",
            HOME,
            "--api-versions",
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
        ])
        .args(["--show-only", "templates/controller-renewal-policy.yaml"])
        .output()?;
    check(
        out.status.success(),
        format!("helm template: {}", String::from_utf8_lossy(&out.stderr)),
    )?;
    let text = String::from_utf8(out.stdout)?;
    let mut applied = 0;
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let value = <Value as serde::Deserialize>::deserialize(doc)?;
        match value["kind"].as_str() {
            Some("ValidatingAdmissionPolicy") => {
                let p: ValidatingAdmissionPolicy = serde_json::from_value(value)?;
                Api::<ValidatingAdmissionPolicy>::all(env.client.clone())
                    .create(&pp(), &p)
                    .await?;
            }
            Some("ValidatingAdmissionPolicyBinding") => {
                let b: ValidatingAdmissionPolicyBinding = serde_json::from_value(value)?;
                Api::<ValidatingAdmissionPolicyBinding>::all(env.client.clone())
                    .create(&pp(), &b)
                    .await?;
            }
            _ => continue,
        }
        applied += 1;
    }
    check(
        applied == 2,
        format!("the chart rendered {applied} policy objects, expected 2"),
    )?;
    let ns = "e2e-ctl-vap";
    namespace(&env.client, ns).await?;
    let pods = env.pods(ns);
    let far = Utc::now() + TimeDelta::hours(1);
    pods.create(
        &pp(),
        &sandbox("renew", json!({}), expires_at(far), json!({}), json!({}))?,
    )
    .await?;
    let set = |v: &str| json!({"metadata": {"annotations": {format!("{P}/expires-at"): v}}});
    // The policy is picked up asynchronously: retry until it denies.
    let deadline = Instant::now() + Duration::from_secs(30);
    let message = loop {
        match pods
            .patch(
                "renew",
                &PatchParams::default(),
                &Patch::Merge(&set("tomorrow")),
            )
            .await
        {
            Err(kube::Error::Api(e)) => break e.message,
            Ok(_) => {
                check(
                    Instant::now() < deadline,
                    "the invalid renewal was still allowed after 30s",
                )?;
                pods.patch(
                    "renew",
                    &PatchParams::default(),
                    &Patch::Merge(&set(&rfc3339(far))),
                )
                .await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    check(
        message.contains("RFC 3339"),
        format!("denial message: {message}"),
    )?;
    let later = rfc3339(far + TimeDelta::hours(1));
    pods.patch(
        "renew",
        &PatchParams::default(),
        &Patch::Merge(&set(&later)),
    )
    .await?;
    Ok(())
}

/// `controller.platform.deleteUnschedulable: true`: the reported pod is then
/// removed by the expiry rules. Restarts both replicas with that file.
async fn delete_unschedulable_removes_the_pod(env: &mut Env) -> Result<()> {
    std::fs::write(
        &env.config,
        "controller: {platform: {deleteUnschedulable: true}}\n",
    )?;
    for c in &mut env.controllers {
        c.kill();
    }
    for c in &mut env.controllers {
        c.restart()?;
    }
    env.wait_leader(Duration::from_secs(LEASE_SECONDS * 3))
        .await?;
    let ns = "e2e-ctl-platform-delete";
    namespace(&env.client, ns).await?;
    let pods = env.pods(ns);
    let arm = json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}});
    pods.create(
        &pp(),
        &sandbox("arm-gone", json!({}), json!({}), json!({}), arm)?,
    )
    .await?;
    schedule_failure(&pods, "arm-gone", SCHEDULER_MESSAGE).await?;
    wait_gone(&pods, "arm-gone", Duration::from_secs(15)).await?;
    let warned = events(
        &env.client,
        ns,
        "arm-gone",
        "PlatformUnschedulable",
        1,
        Duration::from_secs(5),
    )
    .await?;
    check(warned.len() == 1, "reported before it was removed")?;
    let removed = events(
        &env.client,
        ns,
        "arm-gone",
        "SandboxRemoved",
        1,
        Duration::from_secs(5),
    )
    .await?;
    check(
        removed.len() == 1,
        format!("{} SandboxRemoved events, expected 1", removed.len()),
    )
}

async fn setup(cluster: &Cluster, work: &std::path::Path) -> Result<Env> {
    let client = cluster.client().await?;
    namespace(&client, HOME).await?;
    let config = work.join("config.yaml");
    std::fs::write(&config, "{}\n")?;
    let controllers = vec![
        Controller::start("ctl-a", &cluster.kubeconfig(), &config, work)?,
        Controller::start("ctl-b", &cluster.kubeconfig(), &config, work)?,
    ];
    let env = Env {
        client,
        work: work.to_owned(),
        config,
        controllers,
    };
    env.wait_leader(Duration::from_secs(LEASE_SECONDS * 3))
        .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    env.leader()?;
    Ok(env)
}

macro_rules! scenario {
    ($results:ident, $env:expr, $f:ident) => {{
        let name = stringify!($f);
        let t = Instant::now();
        let outcome = AssertUnwindSafe($f($env)).catch_unwind().await;
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(panic) => Some(
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into()),
            ),
        };
        match &failure {
            None => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
            Some(e) => println!("test {name} ... FAILED: {e}"),
        }
        $results.push((name, failure));
    }};
}

fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        println!("0 passed, 1 failed");
        return std::process::ExitCode::FAILURE;
    };
    let work = std::env::temp_dir().join(format!(
        "sandbox-webhook-controller-e2e-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&work);
    if let Err(e) = std::fs::create_dir_all(&work) {
        println!(
            "controller e2e: cannot create {}: {e}\n0 passed, 1 failed",
            work.display()
        );
        return std::process::ExitCode::FAILURE;
    }
    println!("controller e2e: starting kube-apiserver and etcd (tests/e2e/cluster.sh)");
    let cluster = match Cluster::start(work.join("cluster")) {
        Ok(c) => c,
        Err(e) => {
            println!("controller e2e: cannot start the control plane: {e}\n0 passed, 1 failed");
            return std::process::ExitCode::FAILURE;
        }
    };
    let results = runtime.block_on(async {
        let mut results: Vec<(&str, Option<String>)> = Vec::new();
        let mut env = match setup(&cluster, &work).await {
            Ok(env) => env,
            Err(e) => {
                println!("test setup ... FAILED: {e}");
                results.push(("setup", Some(e.to_string())));
                return results;
            }
        };
        scenario!(results, &env, expired_pod_is_deleted_on_time);
        scenario!(results, &env, renewed_pod_survives_its_old_time);
        scenario!(results, &env, manual_cleanup_and_invalid_stay);
        scenario!(results, &env, job_owner_is_deleted);
        scenario!(results, &env, replicaset_owner_is_left_with_a_warning);
        scenario!(results, &env, recreated_pod_is_not_hit_by_a_stale_decision);
        scenario!(results, &env, unschedulable_platform_is_reported);
        scenario!(results, &env, invalid_renewal_is_denied_by_the_policy);
        scenario!(results, &mut env, standby_takes_over_when_the_leader_dies);
        scenario!(results, &mut env, sigterm_releases_the_lease);
        scenario!(results, &mut env, delete_unschedulable_removes_the_pod);
        results
    });
    drop(cluster);
    let failed = results.iter().filter(|(_, f)| f.is_some()).count();
    let passed = results.len() - failed;
    if failed > 0 {
        println!("controller e2e: logs kept in {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
