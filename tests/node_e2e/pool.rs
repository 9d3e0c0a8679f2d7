//! Scenario e: agent-sandbox's extensions, as they run: a `SandboxTemplate`,
//! a `SandboxWarmPool` that fills itself from it, and `SandboxClaims`.
//!
//! A pod is admitted once, when it is created. A warm pool creates its pods
//! ahead of any claim; a claim adopts a warm Sandbox and its running pod
//! (nothing is created again, only labels change), or, when it must
//! (`env` set), starts a new Sandbox from the template. So:
//! - with `P/id` on the template, pool pods are injected when the pool
//!   fills, and a claimed pod is the injected pool pod itself, or a new pod
//!   injected at its creation;
//! - without `P/id` on the template, a pool pod is no sandbox to the
//!   webhook (its objectSelector does not even send it), and a claim that
//!   adopts it gets it as it is: no execd, for good. The label belongs on
//!   the `SandboxTemplate`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, ListParams};
use serde_json::json;

use crate::agent::{
    REPORT, api, check_injected, controller_owner, create, pod_template, ready_pod,
};
use crate::harness::{Env, P, PRIVILEGED, Result, check, is_ready, wait_for};
use common::pods::{container, env_value, execd_ping, first_container};

/// A `SandboxTemplate` `name` (its pod template labelled `labels`) and a
/// warm pool of one from it.
async fn template_and_pool(
    env: &Env,
    ns: &str,
    name: &str,
    labels: serde_json::Value,
) -> Result<()> {
    let template = pod_template(env, &labels, &json!({}), REPORT)?;
    create(
        env,
        ns,
        "SandboxTemplate",
        json!({"metadata": {"name": name}, "spec": {
            "podTemplate": template,
            // No NetworkPolicy of its own (and so no public resolvers set
            // in the pods): no CNI here enforces one.
            "networkPolicyManagement": "Unmanaged",
            "envVarsInjectionPolicy": "Allowed",
        }}),
    )
    .await?;
    create(
        env,
        ns,
        "SandboxWarmPool",
        json!({"metadata": {"name": name}, "spec": {"replicas": 1, "sandboxTemplateRef": {"name": name}}}),
    )
    .await?;
    Ok(())
}

/// The pool's Sandboxes (controlled by `SandboxWarmPool` `pool`), by name.
async fn pool_sandboxes(env: &Env, ns: &str, pool: &str) -> Result<Vec<String>> {
    let list = api(env, ns, "Sandbox").list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|s| {
            s.metadata.owner_references.iter().flatten().any(|r| {
                r.controller == Some(true) && r.kind == "SandboxWarmPool" && r.name == pool
            })
        })
        .filter_map(|s| s.metadata.name.clone())
        .collect())
}

/// The running pod of the pool's one warm Sandbox.
async fn warm_pod(env: &Env, ns: &str, pool: &str) -> Result<Pod> {
    let name = wait_for(
        &format!("a Sandbox of warm pool {pool}"),
        Duration::from_secs(60),
        async || Ok(pool_sandboxes(env, ns, pool).await?.into_iter().next()),
    )
    .await?;
    ready_pod(env, ns, &name, Duration::from_secs(90)).await
}

/// Claims from warm pool `pool` (with `env` set: a cold start); the
/// Sandbox it got, once that Sandbox's pod runs.
async fn claim(
    env: &Env,
    ns: &str,
    name: &str,
    pool: &str,
    vars: serde_json::Value,
) -> Result<Pod> {
    let mut spec = json!({"warmPoolRef": {"name": pool}});
    if !vars.is_null() {
        spec["env"] = vars;
    }
    create(
        env,
        ns,
        "SandboxClaim",
        json!({"metadata": {"name": name}, "spec": spec}),
    )
    .await?;
    let claims = api(env, ns, "SandboxClaim");
    let sandbox = wait_for(
        &format!("SandboxClaim {name} to get a Sandbox"),
        Duration::from_secs(60),
        async || {
            let c: DynamicObject = claims.get(name).await?;
            Ok(c.data["status"]["sandbox"]["name"]
                .as_str()
                .map(str::to_owned))
        },
    )
    .await?;
    ready_pod(env, ns, &sandbox, Duration::from_secs(90)).await
}

fn uid(p: &Pod) -> &str {
    p.metadata.uid.as_deref().unwrap_or_default()
}

/// The value of env var `name` of the pod's main container.
fn main_env<'a>(p: &'a Pod, name: &str) -> Option<&'a str> {
    env_value(container(p, "sandbox")?, name)
}

/// contract: workload.kinds, execd.installer
#[expect(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: each step's check follows its action"
)]
pub(crate) async fn stack_pool_and_claimed_pods_are_injected(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    let id_label = format!("{P}/id");

    // With P/id on the template.
    template_and_pool(env, &ns, "labelled", json!({&id_label: "pooled"})).await?;
    let warm = warm_pod(env, &ns, "labelled").await?;
    check_injected(&warm, "pooled", false)?;
    let warm_name = warm.metadata.name.clone().unwrap_or_default();
    println!("    warm pool labelled: its pod {warm_name} injected when the pool filled, Running");

    let adopted = claim(env, &ns, "warm-claim", "labelled", serde_json::Value::Null).await?;
    check(
        uid(&adopted) == uid(&warm),
        format!(
            "the warm claim got pod {:?}, not the warm pool's {warm_name}",
            adopted.metadata.name
        ),
    )?;
    check_injected(&adopted, "pooled", false)?;
    let claim_uid = adopted
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("agents.x-k8s.io/claim-uid"));
    check(
        claim_uid.is_some(),
        "the adopted pod has no claim-uid label",
    )?;
    println!(
        "    warm-claim adopted {warm_name}: the same pod (uid unchanged), injected once, still Running"
    );

    // The pool refills, and a claim that sets env starts a new Sandbox.
    let refill = wait_for(
        "the warm pool to refill with a Running, injected pod",
        Duration::from_secs(90),
        async || {
            for name in pool_sandboxes(env, &ns, "labelled").await? {
                if let Some(p) = env.pods(&ns).get_opt(&name).await?
                    && is_ready(&p)
                    && uid(&p) != uid(&warm)
                {
                    return Ok(Some(p));
                }
            }
            Ok(None)
        },
    )
    .await?;
    check_injected(&refill, "pooled", false)?;
    let cold = claim(
        env,
        &ns,
        "cold-claim",
        "labelled",
        json!([{"name": "GREETING", "value": "cold"}]),
    )
    .await?;
    check(
        uid(&cold) != uid(&warm) && uid(&cold) != uid(&refill),
        "the cold claim adopted a warm pod",
    )?;
    check(
        controller_owner(&cold).is_some_and(|(kind, _)| kind == "Sandbox"),
        "the cold claim's pod is not a Sandbox's",
    )?;
    check_injected(&cold, "pooled", false)?;
    check(
        main_env(&cold, "GREETING") == Some("cold"),
        "the cold claim's env is not in its pod",
    )?;
    println!(
        "    the pool refilled ({} injected); cold-claim (env set) got a new pod {}, injected at its creation",
        refill.metadata.name.as_deref().unwrap_or("?"),
        cold.metadata.name.as_deref().unwrap_or("?")
    );

    // Without P/id on the template: never a sandbox, before or after a claim.
    template_and_pool(env, &ns, "unlabelled", json!({"app": "plain"})).await?;
    let bare = warm_pod(env, &ns, "unlabelled").await?;
    check_plain(&bare)?;
    let adopted = claim(
        env,
        &ns,
        "bare-claim",
        "unlabelled",
        serde_json::Value::Null,
    )
    .await?;
    check(
        uid(&adopted) == uid(&bare),
        "bare-claim did not adopt the warm pod",
    )?;
    check_plain(&adopted)?;
    let name = adopted.metadata.name.clone().unwrap_or_default();
    let ping = env
        .kubectl_command(&execd_ping(&ns, &name, "sandbox", &["-T", "2"]))?
        .output()?;
    check(
        !ping.status.success(),
        "execd answers in a pod that was never injected",
    )?;
    println!(
        "    warm pool unlabelled (no {id_label} on the template): its pod {name} was never injected, and bare-claim adopted it as it is: no execd"
    );
    Ok(())
}

/// A pod the webhook never touched: no installer, the command as written.
fn check_plain(p: &Pod) -> Result<()> {
    let name = p.metadata.name.as_deref().unwrap_or("?");
    let inits = common::pods::init_names(p);
    check(
        inits.is_empty(),
        format!("{name}: init containers {inits:?}"),
    )?;
    let command = first_container(p)
        .and_then(|c| c.command.clone())
        .unwrap_or_default();
    check(
        command.first().map(String::as_str) == Some("sh"),
        format!("{name}: command {command:?}"),
    )
}
