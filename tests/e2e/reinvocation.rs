//! `reinvocationPolicy: IfNeeded`: a later webhook's change makes the
//! apiserver call ours again, and the second call adds nothing.

use crate::Result;
use crate::common::pods::SandboxPod;
use crate::env::{Env, Scope, WebhookEntry, check, init_names};

const OUTCOME_UNCHANGED: (&str, &[(&str, &str)]) = (
    "sandbox_webhook_admission_requests_total",
    &[("outcome", "unchanged")],
);

pub async fn reinvocation_keeps_one_of_each(env: &Env, id: &str) -> Result<()> {
    // A second mutating webhook after ours: the same binary under another
    // prefix. It adds its own manual-cleanup label, which makes the apiserver
    // call ours again.
    let second = env.own_webhook(&format!("{id}-second"), Some("prefix: second.e2e.io\n"))?;
    let scope = Scope::new(env, id);
    scope.namespace("", &[]).await?;
    scope
        .register(&[
            env.main_entry(),
            WebhookEntry {
                name: "second.e2e.io",
                url: second.url("/mutate"),
                ca: &env.ca,
                id_label: "second.e2e.io/id".into(),
            },
        ])
        .await?;
    scope.wait_active(&scope.ns, true).await?;

    let (name, labels) = OUTCOME_UNCHANGED;
    let unchanged_before = env.webhook.metrics()?.sum(name, labels);
    let pod = SandboxPod::new("twice")
        .annotation("network-policy", "{}")
        .label("second.e2e.io/id", "x");
    let stored = scope.admit(&pod).await?;
    let labels_stored = stored.metadata.labels.clone().unwrap_or_default();
    check(
        labels_stored
            .get("second.e2e.io/manual-cleanup")
            .map(String::as_str)
            == Some("true"),
        "the second webhook ran",
    )?;
    check(
        init_names(&stored) == ["execd-installer", "egress"],
        "one installer, one sidecar",
    )?;
    let spec = stored.spec.as_ref().ok_or("spec")?;
    let bins = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.name == "opensandbox-bin")
        .count();
    check(bins == 1, "one bin volume")?;
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
        env.webhook.metrics()?.sum(name, labels) > unchanged_before,
        "our webhook was reinvoked and answered with no patch",
    )?;
    drop(second);
    Ok(())
}
