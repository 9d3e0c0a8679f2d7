//! Scenario 2: the platform nodeSelector lands a pod on a node of its
//! platform, and the real scheduler's message reaches the controller when no
//! node fits (contract: platform.merge, controller.platform-postscript,
//! controller.platform-condition, controller.platform-event).

use std::time::Duration;

use chrono::Utc;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::harness::{
    Env, P, Result, admissions, check, check_at, running_on, sandbox_pod, wait_for,
};
use common::cluster::{condition, wait_for_object};
use common::metrics::check_counted_once;

/// The scheduler's own `PodScheduled=False` message, once it wrote one.
fn scheduler_message(p: &Pod) -> Option<String> {
    condition(p, "PodScheduled")
        .filter(|c| c.status == "False")
        .and_then(|c| c.message.clone())
}

fn platform(value: &str) -> Value {
    json!({format!("{P}/platform"): value})
}

pub(crate) async fn platforms_land_on_their_nodes(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id, &[]).await?;
    let pods = env.pods(ns);
    let before = env
        .controller_metrics()?
        .value_or_zero("sandbox_webhook_platform_unschedulable_total", &[]);
    let pp = PostParams::default();

    // The webhook refuses a platform it does not support at admission ...
    let refused = pods
        .create(
            &pp,
            &sandbox_pod("riscv-annotated", &platform("linux/riscv64"), &json!({}))?,
        )
        .await;
    match refused {
        Err(kube::Error::Api(e)) => check(
            e.code == 400 && e.message.contains("Unsupported platform.arch 'riscv64'"),
            format!("linux/riscv64 refused with {}: {}", e.code, e.message),
        )?,
        other => return Err(format!("linux/riscv64 was not refused: {other:?}").into()),
    }
    // ... so a riscv64 sandbox asks for it with its own nodeSelector, which
    // no node of this cluster matches.
    let riscv =
        json!({"nodeSelector": {"kubernetes.io/os": "linux", "kubernetes.io/arch": "riscv64"}});
    let cpu = json!({"containers": [{"name": "sandbox", "image": "busybox:1.36", "command": ["sleep", "3600"],
                                      "resources": {"requests": {"cpu": "100"}}}]});
    for (name, annotations, spec) in [
        ("arm", platform("linux/arm64"), json!({})),
        ("amd", platform("linux/amd64"), json!({})),
        ("riscv", json!({}), riscv),
        ("big-cpu", platform("linux/amd64"), cpu),
    ] {
        pods.create(&pp, &sandbox_pod(name, &annotations, &spec)?)
            .await?;
    }

    check_bound(env, &pods).await?;
    let ct = format!("{P}/PlatformUnschedulable");
    check_reported(env, ns, &pods, &ct).await?;
    check_capacity(env, ns, &pods, &ct).await?;
    let after = env
        .controller_metrics()?
        .value_or_zero("sandbox_webhook_platform_unschedulable_total", &[]);
    check_counted_once("platform_unschedulable_total", before, after)?;
    let denied = admissions(&env.webhook_metrics()?, "CREATE")["denied"];
    check(
        denied >= 1,
        "the refused riscv64 create was not counted as denied",
    )
}

/// `arm` and `amd` were bound by the scheduler to nodes of their platform.
async fn check_bound(env: &Env, pods: &Api<Pod>) -> Result<()> {
    let nodes: Api<Node> = Api::all(env.client.clone());
    for (name, arch) in [("arm", "arm64"), ("amd", "amd64")] {
        let node = wait_for(
            &format!("{name} Running on a node"),
            Duration::from_secs(30),
            async || Ok(running_on(&pods.get(name).await?).map(str::to_owned)),
        )
        .await?;
        let labels = nodes.get(&node).await?.metadata.labels.unwrap_or_default();
        check(
            labels.get("kubernetes.io/arch").map(String::as_str) == Some(arch)
                && labels.get("kubernetes.io/os").map(String::as_str) == Some("linux"),
            format!("{name} was bound to {node} ({labels:?}), not a linux/{arch} node"),
        )?;
        println!("    {name}: the scheduler bound it to {node}");
    }

    Ok(())
}

/// `riscv` carries the controller's condition and Event, with the
/// scheduler's own message, and `diagnose` says the same.
async fn check_reported(env: &Env, ns: &str, pods: &Api<Pod>, ct: &str) -> Result<()> {
    let (reported, ()) = wait_for_object(
        pods,
        "riscv",
        "the PlatformUnschedulable condition",
        Duration::from_secs(30),
        |p| condition(p, ct).map(|_| ()),
    )
    .await?;
    let said = scheduler_message(&reported).ok_or("riscv has no PodScheduled=False message")?;
    println!("    riscv: the scheduler said: {said}");
    let c = condition(&reported, ct).ok_or("condition")?;
    check(
        c.status == "True"
            && c.reason.as_deref() == Some("PlatformUnschedulable")
            && c.message.as_deref() == Some(said.as_str()),
        format!("condition {c:?}, expected the scheduler's message {said:?}"),
    )?;
    let event = env.event(ns, "riscv", "PlatformUnschedulable").await?;
    check(
        event.type_.as_deref() == Some("Warning") && event.note.as_deref() == Some(said.as_str()),
        format!("the Event says {:?} ({:?})", event.note, event.type_),
    )?;
    let d = env.diagnose(&reported, Utc::now())?;
    check_at(&d, "/platform/unschedulable", true)?;
    check_at(&d, "/platform/message", said.as_str())?;

    Ok(())
}

/// More CPU than any node has is a capacity problem, not a platform one.
async fn check_capacity(env: &Env, ns: &str, pods: &Api<Pod>, ct: &str) -> Result<()> {
    let big = wait_for_object(
        pods,
        "big-cpu",
        "the scheduler's verdict",
        Duration::from_secs(30),
        scheduler_message,
    )
    .await?;
    check(
        big.1.contains("Insufficient cpu"),
        format!("big-cpu: the scheduler said {:?}", big.1),
    )?;
    // The controller saw both pods' updates; give it as long as it took for
    // riscv before reading big-cpu again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let big = pods.get("big-cpu").await?;
    check(
        condition(&big, ct).is_none(),
        "big-cpu was reported platform-unschedulable for Insufficient cpu",
    )?;
    let none = env.events(ns, "big-cpu", "PlatformUnschedulable").await?;
    check(none.is_empty(), "an Event was recorded for big-cpu")?;
    let d = env.diagnose(&big, Utc::now())?;
    check_at(&d, "/platform/unschedulable", false)?;
    Ok(())
}
