//! Scenario 4: a node goes away. The controller-manager's pod garbage
//! collector removes the pods bound to it, and the controller drops their
//! expiry timers with them, so nothing leaks.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use crate::harness::{Env, P, Result, in_seconds, rfc3339, running_on, sandbox_pod, wait_for};
use common::cluster::{wait_for_object, wait_for_pods};
use common::suite::timed;

/// The node this scenario removes (and puts back).
const NODE: &str = "kwok-amd64-2";
const PODS: usize = 5;

fn timers(env: &Env) -> Result<u64> {
    Ok(env
        .controller_metrics()?
        .value("sandbox_webhook_controller_timers", &[]))
}

/// Waits up to 10 s (`what`) until the controller holds `want` timers.
async fn timers_become(env: &Env, what: &str, want: u64) -> Result<u64> {
    wait_for(what, Duration::from_secs(10), async || {
        let now = timers(env)?;
        Ok((now == want).then_some(now))
    })
    .await
}

pub(crate) async fn deleted_node_takes_its_timers(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id, &[]).await?;
    let pods = env.pods(ns);
    let nodes: Api<Node> = Api::all(env.client.clone());
    let node = nodes.get(NODE).await?;
    let baseline = timers(env)?;
    let annotations = json!({
        format!("{P}/platform"): "linux/amd64",
        format!("{P}/expires-at"): rfc3339(in_seconds(3600)),
    });
    let spec = json!({"nodeSelector": {"kubernetes.io/hostname": NODE}});
    for i in 0..PODS {
        pods.create(
            &PostParams::default(),
            &sandbox_pod(&format!("on-node-{i}"), &annotations, &spec)?,
        )
        .await?;
    }
    wait_for_pods(
        &pods,
        &format!("{PODS} sandboxes Running on {NODE}"),
        Duration::from_secs(30),
        |list| list.iter().filter(|p| running_on(p) == Some(NODE)).count() == PODS,
    )
    .await?;
    let armed = timers_become(
        env,
        "the controller to arm their timers",
        baseline + PODS as u64,
    )
    .await?;
    println!("    timers armed: {baseline} -> {armed}");

    nodes.delete(NODE, &DeleteParams::default()).await?;
    // PodGC deletes pods bound to a node that no longer exists once the
    // node has been gone for its quarantine (40 s), checking every 20 s.
    let (_, took) = timed(wait_for_pods(
        &pods,
        "PodGC to remove the node's pods",
        Duration::from_secs(120),
        <[Pod]>::is_empty,
    ))
    .await?;
    println!("    {NODE} deleted; its {PODS} pods removed by PodGC after {took:.0} s");
    let after = timers_become(env, "the timers to be dropped", baseline).await?;
    println!("    timers: {armed} -> {after}");
    restore(&nodes, node).await
}

/// Puts the node back as it was registered, and waits until kwok has it
/// Ready again.
async fn restore(nodes: &Api<Node>, mut node: Node) -> Result<()> {
    let meta = &mut node.metadata;
    meta.resource_version = None;
    meta.uid = None;
    meta.creation_timestamp = None;
    meta.managed_fields = None;
    if let Some(spec) = node.spec.as_mut() {
        // Only the node lifecycle controller's taints; this node had none.
        spec.taints = None;
    }
    if let Some(status) = node.status.as_mut() {
        status.conditions = None;
    }
    nodes.create(&PostParams::default(), &node).await?;
    let ready = |n: &Node| {
        let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
        let ready = conditions
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then_some(())
    };
    wait_for_object(nodes, NODE, "Ready again", Duration::from_secs(30), ready).await?;
    Ok(())
}
