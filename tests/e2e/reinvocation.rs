//! `reinvocationPolicy: IfNeeded`: a later webhook's change makes the
//! apiserver call ours again. The second call adds nothing to the webhook's
//! own output as the apiserver hands it back (decoded and defaulted), and a
//! policy the later webhook changed reaches the sidecar (contract:
//! select.idempotent, egress.present).

use serde_json::{Value, json};

use crate::Result;
use crate::env::{Env, Scope, WebhookEntry, check, check_init_containers};
use common::P;
use common::pods::{SandboxPod, container, env_value, volumes_named};

const ANSWERS: &str = "sandbox_webhook_admission_requests_total";
/// The label that sends a pod to the second webhook too.
const SECOND: &str = "second.e2e.io/id";

/// Registers ours, then a second webhook that answers every pod labelled
/// [`SECOND`] with `patch` (the apiserver calls webhooks of one
/// configuration in order; the readiness probe's pod is not sent to it),
/// and returns the scope and the second webhook (stopped on drop).
async fn with_second<'e>(
    env: &'e Env,
    id: &str,
    patch: &Value,
) -> Result<(Scope<'e>, crate::processes::Webhook)> {
    let second = env.patching_webhook(&format!("{id}-second"), patch)?;
    let scope = Scope::new(env, id);
    scope.namespace("", &[]).await?;
    scope
        .register(&[
            env.main_entry(),
            WebhookEntry {
                name: "second.e2e.io",
                url: second.url("/mutate"),
                ca: &env.ca,
                id_label: SECOND.to_owned(),
            },
        ])
        .await?;
    scope.wait_active(&scope.ns, true).await?;
    Ok((scope, second))
}

fn answered(env: &Env, outcome: &str) -> Result<u64> {
    Ok(env.webhook.metrics()?.sum(ANSWERS, &[("outcome", outcome)]))
}

pub async fn reinvocation_keeps_one_of_each(env: &Env, id: &str) -> Result<()> {
    // The second webhook adds a label, which makes the apiserver call ours
    // again with the pod as decoded and defaulted.
    let patch =
        json!([{"op": "add", "path": "/metadata/labels/second.e2e.io~1touched", "value": "true"}]);
    let (scope, second) = with_second(env, id, &patch).await?;
    let unchanged_before = answered(env, "unchanged")?;
    let pod = SandboxPod::new("twice")
        .annotation("network-policy", "{}")
        .label(SECOND, "x");
    let stored = scope.admit(&pod).await?;
    let labels_stored = stored.metadata.labels.clone().unwrap_or_default();
    check(
        labels_stored
            .get("second.e2e.io/touched")
            .map(String::as_str)
            == Some("true"),
        "the second webhook ran",
    )?;
    check_init_containers(
        &stored,
        &["execd-installer", "egress"],
        "one installer, one sidecar",
    )?;
    let spec = stored.spec.as_ref().ok_or("spec")?;
    check(
        volumes_named(spec, "opensandbox-bin") == 1,
        "one bin volume",
    )?;
    let main = &spec.containers[0];
    let cmd = main.command.clone().unwrap_or_default();
    check(
        cmd.iter()
            .filter(|c| *c == "/opt/opensandbox/bootstrap.sh")
            .count()
            == 1,
        "one bootstrap.sh",
    )?;
    check(
        main.env
            .iter()
            .flatten()
            .filter(|e| e.name == "EXECD")
            .count()
            == 1,
        "one EXECD",
    )?;
    check(
        answered(env, "unchanged")? > unchanged_before,
        "our webhook was reinvoked and answered with no patch",
    )?;
    drop(second);
    Ok(())
}

pub async fn reinvocation_applies_a_changed_policy(env: &Env, id: &str) -> Result<()> {
    // The second webhook rewrites the policy after ours injected the
    // sidecar with the first one's rules.
    let new = r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"files.pythonhosted.org"}]}"#;
    let patch = json!([{"op": "add", "path": format!("/metadata/annotations/{P}~1network-policy"), "value": new}]);
    let (scope, second) = with_second(env, id, &patch).await?;
    let mutated_before = answered(env, "mutated")?;
    let first = r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;
    let pod = SandboxPod::new("repolicy")
        .annotation("network-policy", first)
        .label(SECOND, "x");
    let stored = scope.admit(&pod).await?;
    let policy = stored
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(&format!("{P}/network-policy")))
        .ok_or("no policy annotation")?;
    check(policy == new, "the second webhook changed the policy")?;
    check_init_containers(
        &stored,
        &["execd-installer", "egress"],
        "one installer, one sidecar, in place",
    )?;
    let sidecar = container(&stored, "egress").ok_or("no sidecar")?;
    let rules = env_value(sidecar, "OPENSANDBOX_EGRESS_RULES").ok_or("no rules")?;
    check(
        serde_json::from_str::<Value>(rules)? == serde_json::from_str::<Value>(new)?,
        format!("the stored sidecar enforces the new policy, not the first: {rules}"),
    )?;
    check(
        answered(env, "mutated")? >= mutated_before + 2,
        "our webhook patched on both passes",
    )?;
    drop(second);
    Ok(())
}
