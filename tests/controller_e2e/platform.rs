//! Platform scheduling: the condition, the Event, deleteUnschedulable.

use std::time::{Duration, Instant};

use chrono::Utc;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use common::cluster::{check_count, condition};
use common::metrics::check_counted_once;

use crate::harness::{P, Result, check, check_at, create_unexpiring, events, rfc3339, wait_gone};
use crate::{CAPACITY_MESSAGE, Env, SCHEDULER_MESSAGE};

pub(crate) async fn schedule_failure(pods: &Api<Pod>, name: &str, message: &str) -> Result<()> {
    let status = json!({"status": {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
        "lastTransitionTime": rfc3339(Utc::now()),
    }]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Strategic(&status))
        .await?;
    Ok(())
}

/// contract: controller.platform-reading, controller.platform-classifier,
/// controller.platform-postscript, controller.platform-condition, controller.platform-event
pub(crate) async fn unschedulable_platform_is_reported(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let before = env
        .leader()?
        .metric("sandbox_webhook_platform_unschedulable_total", &[])?;
    let pods = env.pods(ns);
    let arm = json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}});
    for name in ["arm", "cpu"] {
        create_unexpiring(&pods, name, &arm).await?;
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
    env.event(ns, "arm", "PlatformUnschedulable", Some("Warning"), 5)
        .await?;
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
    check_count(&warned, 1, "PlatformUnschedulable events")?;
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
        .metric("sandbox_webhook_platform_unschedulable_total", &[])?;
    check_counted_once("platform_unschedulable_total", before, after)?;
    let d = env.diagnose(&pods.get("arm").await?, Utc::now())?;
    check(
        d["platform"]
            == json!({"hasPlatform": true, "hasNonPlatform": false,
                      "hasPlatformConstraints": true, "hasNonPlatformConstraints": false,
                      "platformAnnotation": null, "unschedulable": true, "message": SCHEDULER_MESSAGE,
                      "reason": "Pending, and the scheduler says no node takes its platform: the controller sets the condition and records a warning Event"}),
        format!("diagnose arm: {d}"),
    )?;
    let d = env.diagnose(&cpu, Utc::now())?;
    check_at(&d, "/platform/unschedulable", false)
}

/// `controller.platform.deleteUnschedulable: true`: the reported pod is then
/// removed by the expiry rules. Restarts both replicas with that file.
/// contract: controller.platform-delete
pub(crate) async fn delete_unschedulable_removes_the_pod(env: &mut Env, id: &str) -> Result<()> {
    env.reconfigure("controller: {platform: {deleteUnschedulable: true}}\n")
        .await?;
    let ns = &env.namespace(id).await?;
    let pods = env.pods(ns);
    let arm = json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}});
    create_unexpiring(&pods, "arm-gone", &arm).await?;
    schedule_failure(&pods, "arm-gone", SCHEDULER_MESSAGE).await?;
    wait_gone(&pods, "arm-gone", Duration::from_secs(15)).await?;
    // Reported before it was removed, and the removal said so.
    for reason in ["PlatformUnschedulable", "SandboxRemoved"] {
        env.event(ns, "arm-gone", reason, None, 5).await?;
    }
    Ok(())
}
