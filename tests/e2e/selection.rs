//! Pods the webhook must leave alone: not sandboxes, in an excluded
//! namespace, or in the webhook's own namespace even when a configuration
//! lets the request through.

use std::time::Duration;

use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use crate::Result;
use crate::env::{Env, SCOPE_LABEL, Scope, check_not_injected};
use crate::processes::OWN_NAMESPACE;
use common::cluster::wait_for;
use common::pods::SandboxPod;

const EXCLUDED_SKIPS: (&str, &[(&str, &str)]) = (
    "sandbox_webhook_admission_skips_total",
    &[("reason", "excluded-namespace")],
);

/// contract: select.pod-create, select.sandbox-label, select.excluded-namespace,
/// select.opt-out, metrics.skips
pub async fn untouched_pods(env: &Env, id: &str) -> Result<()> {
    let scope = env.scope(id).await?;
    let stored = scope
        .admit(&SandboxPod::new("plain").not_a_sandbox())
        .await?;
    check_not_injected(&stored, "non-sandbox pod stored unchanged")?;

    // Excluded by the namespaceSelector (kube-system) ...
    let system_pod = format!("{}-sandbox", scope.id);
    let system = env.pods("kube-system");
    system
        .create(&PostParams::default(), &SandboxPod::new(&system_pod).pod())
        .await?;
    let stored = system.get(&system_pod).await?;
    system.delete(&system_pod, &DeleteParams::default()).await?;
    check_not_injected(&stored, "sandbox pod in kube-system stored unchanged")?;

    own_namespace_is_excluded_by_the_code(env, &scope).await
}

/// A scope-labelled namespace named like the webhook's home would be
/// excluded by the selector too, so this asks the webhook directly, through
/// a configuration without that clause.
async fn own_namespace_is_excluded_by_the_code(env: &Env, scope: &Scope<'_>) -> Result<()> {
    scope.named_namespace(OWN_NAMESPACE, &[]).await?;
    let mut cfg = scope.configuration_named(
        &format!("{}-home", scope.configuration),
        &[env.main_entry()],
    );
    for w in cfg.webhooks.iter_mut().flatten() {
        w.namespace_selector = Some(serde_json::from_value(
            json!({"matchLabels": {SCOPE_LABEL: scope.id}}),
        )?);
        w.name = "home.sandbox-webhook.opensandbox.io".into();
    }
    scope.create_configuration(&cfg).await?;
    let (name, labels) = EXCLUDED_SKIPS;
    let before = env.webhook.metrics()?.sum(name, labels);
    let dry = common::cluster::dry_run();
    wait_for(
        "the webhook to see the home-namespace pod",
        Duration::from_secs(30),
        async || {
            let p = env
                .pods(OWN_NAMESPACE)
                .create(&dry, &SandboxPod::new("home").pod())
                .await?;
            check_not_injected(&p, "sandbox pod in the webhook's namespace is not mutated")?;
            Ok((env.webhook.metrics()?.sum(name, labels) > before).then_some(()))
        },
    )
    .await
}
