//! contract: drift.states, drift.metrics, drift.events, drift.diagnose
//!
//! The drift audit on a whole cluster. A namespace is served by a webhook
//! of its own (the chart's configuration, `failurePolicy: Ignore`) whose
//! configuration is older than the installed release's (another execd
//! image): a sandbox it injects is reported stale. Then that webhook is
//! stopped, and a sandbox created meanwhile is admitted without injection
//! (the apiserver fails open, and says so in its audit log): the installed
//! release's controller reports it not injected, with its gauge, one
//! warning Event and `diagnose`. An opted-out sandbox is counted as such.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::harness::{
    Env, P, Result, admit, check, check_not_injected, init_names, sandbox_pod, wait_for,
};
use crate::releases::Release;
use common::audit;

const DRIFT: &str = "sandbox_webhook_drift_pods";

pub(crate) async fn escaped_and_stale_sandboxes_are_reported(env: &Env, id: &str) -> Result<()> {
    // The namespace carries a revision, so the installed (default) release
    // leaves it to the scenario's webhook; that webhook's configuration has
    // no revision, so it labels nothing and the default controller watches
    // what it injects.
    let ns = env.namespace(id, &[(&format!("{P}/rev"), "drift")]).await?;
    let mut older = tokio::task::block_in_place(|| {
        Release::install(
            env,
            "drift",
            "{execd: {image: 'opensandbox/execd:v1.0.0'}}",
            false,
            &["revision=drift", "webhook.failurePolicy=Ignore"],
        )
    })?;
    let result = reported(env, &ns, &mut older).await;
    result.and(older.remove(env))
}

async fn reported(env: &Env, ns: &str, older: &mut Release) -> Result<()> {
    let count = |m: &common::metrics::Metrics, s: &str| m.sum(DRIFT, &[("state", s)]);
    let before = env.controller_metrics()?;
    let pods = env.pods(ns);
    let pp = kube::api::PostParams::default();
    crate::releases::wait_injected_by(env, ns, &[], None).await?;

    let stale = admit(&pods, &sandbox_pod("stale", &json!({}), &json!({}))?).await?;
    check(
        init_names(&stale).contains(&"execd-installer"),
        "the older webhook injected it",
    )?;

    // The webhook stops; with failurePolicy Ignore the create goes through.
    older.webhook.kill();
    let escaped = admit(&pods, &sandbox_pod("escaped", &json!({}), &json!({}))?).await?;
    check_not_injected(
        &escaped,
        "a sandbox created while its webhook is down is admitted bare",
    )?;
    let event = audit::pod_create(Path::new(env.var("AUDIT_LOG")?), ns, "escaped").await?;
    check(
        event
            .annotations
            .keys()
            .any(|k| k.starts_with("failed-open.mutation.webhook.admission.k8s.io/")),
        format!(
            "the audit log says the webhook failed open: {:?}",
            event.annotations
        ),
    )?;
    let opted = json!({format!("{P}/inject"): "false"});
    pods.create(&pp, &sandbox_pod("opted", &opted, &json!({}))?)
        .await?;

    // The installed release's controller reports each.
    wait_for(
        "the controller to count the stale, escaped and opted-out sandboxes",
        Duration::from_secs(20),
        async || {
            let now = env.controller_metrics()?;
            Ok((count(&now, "stale") == count(&before, "stale") + 1
                && count(&now, "not-injected") == count(&before, "not-injected") + 1
                && count(&now, "opted-out") == count(&before, "opted-out") + 1)
                .then_some(()))
        },
    )
    .await?;
    let warned = env.event(ns, "escaped", "SandboxNotInjected").await?;
    check(
        warned.type_.as_deref() == Some("Warning")
            && warned
                .note
                .as_deref()
                .is_some_and(|n| n.contains("failurePolicy Ignore")),
        format!("the not-injected Event: {warned:?}"),
    )?;
    let stale_event = env.event(ns, "stale", "SandboxInjectionStale").await?;
    check(
        stale_event
            .note
            .as_deref()
            .is_some_and(|n| n.contains("differs in config, images")),
        format!("the stale Event: {stale_event:?}"),
    )?;
    check(
        env.events(ns, "opted", "SandboxNotInjected")
            .await?
            .is_empty(),
        "no Event for an opted-out sandbox",
    )?;
    for (pod, want) in [(&escaped, "not-injected"), (&stale, "stale")] {
        let diagnosis = env.diagnose(pod, chrono::Utc::now())?;
        check(
            diagnosis["injection"]["state"] == want,
            format!("diagnose says {want}: {}", diagnosis["injection"]),
        )?;
    }
    println!(
        "    stale (older execd image), not-injected (webhook down, failed open) and opted-out counted; one warning Event each; diagnose agrees"
    );
    Ok(())
}
