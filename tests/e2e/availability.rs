//! `failurePolicy: Fail` with the webhook down: sandbox pods are refused,
//! every other pod is not, and a restarted webhook mutates again.

use kube::api::PostParams;

use crate::Result;
use crate::env::{Env, Scope, check, has_init};
use common::pods::SandboxPod;

pub async fn webhook_down_blocks_only_sandboxes(env: &Env, id: &str) -> Result<()> {
    // Its own webhook process, so stopping it affects no other scenario.
    let mut webhook = env.own_webhook(id, None)?;
    let scope = Scope::new(env, id);
    scope.namespace("", &[]).await?;
    scope.register(&[env.entry(&webhook)]).await?;
    scope.wait_active(&scope.ns, true).await?;

    webhook.stop();
    let refused = scope
        .pods()
        .create(&PostParams::default(), &SandboxPod::new("while-down").pod())
        .await;
    let plain = scope
        .admit(&SandboxPod::new("plain-while-down").not_a_sandbox())
        .await;
    webhook.restart()?;
    match refused {
        Ok(_) => return Err("a sandbox pod was admitted while the webhook was down".into()),
        Err(kube::Error::Api(e)) => check(
            e.message.contains("failed calling webhook"),
            format!(
                "refused because the webhook is unreachable (got: {})",
                e.message
            ),
        )?,
        Err(e) => return Err(e.into()),
    }
    plain.map_err(|e| format!("a non-sandbox pod was refused while the webhook was down: {e}"))?;
    let stored = scope.admit(&SandboxPod::new("after-restart")).await?;
    check(
        has_init(&stored, "execd-installer"),
        "mutated again after restart",
    )
}
