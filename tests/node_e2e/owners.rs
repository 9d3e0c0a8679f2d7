//! contract: controller.expiry-owner-actions, controller.rbac, controller.expiry-events
//!
//! Scenarios c and d: expiry that respects the owner's own lifecycle, with
//! agent-sandbox's real controller and the chart's controller (its own
//! `ServiceAccount`: `patch` on sandboxes is all it holds of them). A Sandbox
//! applied by hand, whose pod template asks for a network policy and
//! `P/timeout: 60s`, gets its pod injected by the webhook and running on
//! the real node. At its `expires-at`:
//! - c (`shutdown`, the default): the controller sets the Sandbox's
//!   `spec.shutdownTime`; agent-sandbox removes the pod (within 2 s of
//!   `expires-at`) and, by its default `shutdownPolicy: Retain`, keeps the
//!   Sandbox with `Ready=False`, reason `SandboxExpired`;
//! - d (`suspend`, set by `helm upgrade` and set back after): the Sandbox
//!   gets `spec.operatingMode: Suspended`; the pod goes, the Sandbox stays
//!   with its `Suspended` condition. Its Sandbox asks for 90 s and is
//!   applied first: run beside c ([`OwnerTurns`]), the setting changes once
//!   c is over, before d's pod expires, so the two waits overlap.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;
use serde_json::json;

use crate::agent::{
    POLICY, REPORT, annotation, api, check_injected, condition, conditions, create, pod_template,
    ready_pod, release_metric, wait_condition,
};
use crate::harness::{Env, P, PRIVILEGED, Result, check, logged, wait_for};
use common::crds::check_no_shutdown_time;
use common::metrics::check_counted_once;
use common::pods::created_second;
use common::suite::timed;

/// The pod must be gone this soon after its `expires-at`.
const GONE_WITHIN: TimeDelta = TimeDelta::seconds(2);

/// The lifetime of scenario d's Sandbox: c's 60 s, then a `helm upgrade`
/// (a new controller leads within 15 s here) with room to spare.
const PAUSED_LIFETIME: i64 = 90;

/// Scenarios c and d each need the controller's `ownerActions` to
/// themselves at their pod's expiry, and only then. Run as lanes at once
/// (main.rs), d applies its Sandbox at the start and waits for c to be over
/// before it changes the setting.
pub(crate) struct OwnerTurns {
    together: AtomicBool,
    shut_down_over: tokio::sync::watch::Sender<bool>,
}

impl Default for OwnerTurns {
    fn default() -> Self {
        OwnerTurns {
            together: AtomicBool::new(false),
            shut_down_over: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl OwnerTurns {
    /// c and d run at once from now on.
    pub(crate) fn run_together(&self) {
        self.together.store(true, Ordering::Release);
    }

    /// Until c is over, however it ends, when they run at once.
    async fn shut_down_over(&self) -> Result<()> {
        if !self.together.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut over = self.shut_down_over.subscribe();
        tokio::time::timeout(Duration::from_secs(300), over.wait_for(|o| *o))
            .await
            .map_err(|_| "scenario c did not end within 300 s")??;
        Ok(())
    }
}

/// Tells d that c is over when dropped, however c ended.
struct ShutDownOver<'a>(&'a OwnerTurns);

impl Drop for ShutDownOver<'_> {
    fn drop(&mut self) {
        self.0.shut_down_over.send_replace(true);
    }
}

/// Applies Sandbox `name` (a network policy, `P/timeout: {lifetime}s`) and
/// waits until its pod runs, injected; the pod and its `expires-at`.
async fn expiring_sandbox(
    env: &Env,
    ns: &str,
    name: &str,
    lifetime: i64,
) -> Result<(Pod, DateTime<Utc>)> {
    let template = pod_template(
        env,
        &json!({format!("{P}/id"): name}),
        &json!({format!("{P}/timeout"): format!("{lifetime}s"), format!("{P}/network-policy"): POLICY}),
        REPORT,
    )?;
    create(
        env,
        ns,
        "Sandbox",
        json!({"metadata": {"name": name}, "spec": {"podTemplate": template}}),
    )
    .await?;
    let p = ready_pod(env, ns, name, Duration::from_secs(90)).await?;
    check_injected(&p, name, true)?;
    let log = env
        .logs_with(ns, name, "sandbox", "sandbox: reported")
        .await?;
    logged(
        &log,
        "sandbox: env EXECD=/opt/opensandbox/execd",
        "EXECD in the main container's env",
    )?;
    let written = annotation(&p, "expires-at").ok_or("the pod has no expires-at")?;
    let expires = DateTime::parse_from_rfc3339(written)?.to_utc();
    let created = created_second(&p).ok_or("the pod has no creationTimestamp")?;
    let lived = expires.timestamp() - created;
    check(
        (lifetime - 1..=lifetime + 1).contains(&lived),
        format!("expires-at {written} is {lived}s after the pod's creation, not {lifetime}s"),
    )?;
    println!(
        "    Sandbox {name}: its pod injected (installer, egress sidecar, bootstrap.sh) and Running; expires-at {written} (P/timeout {lifetime}s)"
    );
    Ok((p, expires))
}

/// Waits (polling every 100 ms) until pod `name` is gone; when it was
/// first seen gone, checked to be at or after `expires` and within `bound`.
async fn gone_after(
    env: &Env,
    ns: &str,
    name: &str,
    expires: DateTime<Utc>,
    bound: TimeDelta,
) -> Result<TimeDelta> {
    let pods = env.pods(ns);
    let left = (expires - Utc::now()).to_std().unwrap_or_default();
    let gone = wait_for(
        &format!("pod {ns}/{name} gone after its expiry"),
        left + Duration::from_secs(30),
        async || Ok(pods.get_opt(name).await?.is_none().then(Utc::now)),
    )
    .await?;
    let delay = gone - expires;
    check(
        delay >= TimeDelta::zero(),
        format!(
            "the pod was gone {}ms before its expires-at",
            -delay.num_milliseconds()
        ),
    )?;
    check(
        delay <= bound,
        format!(
            "the pod was gone {:.1}s after its expires-at, more than {}s",
            seconds(delay),
            bound.num_seconds()
        ),
    )?;
    Ok(delay)
}

/// The `SandboxExpired` Event about pod `name`: its note, checked to say
/// `what` and to be recorded at or after `expires`.
async fn expired_event(
    env: &Env,
    ns: &str,
    name: &str,
    what: &str,
    expires: DateTime<Utc>,
) -> Result<String> {
    let event = &common::cluster::the_event(
        &env.client,
        ns,
        name,
        "SandboxExpired",
        Duration::from_secs(10),
    )
    .await?;
    let note = event.note.clone().unwrap_or_default();
    check(
        note.contains(what),
        format!("the Event says {note:?}, not {what:?}"),
    )?;
    let at = event
        .event_time
        .as_ref()
        .map(|t| t.0.as_millisecond())
        .ok_or("the Event has no eventTime")?;
    check(
        at >= expires.timestamp_millis(),
        format!("the Event was recorded before the expiry: {note}"),
    )?;
    Ok(note)
}

/// Once the pod of Sandbox `name` expires (at `expires`): the pod is gone
/// within `GONE_WITHIN` (the delay after `expires`), the Sandbox is still
/// there (`why` it must be), and within 10 s it shows `condition` (type,
/// status, reason); it as it is then.
async fn kept_after_expiry(
    env: &Env,
    ns: &str,
    (name, expires): (&str, DateTime<Utc>),
    why: &str,
    condition: (&str, &str, &str),
) -> Result<(TimeDelta, DynamicObject)> {
    let delay = gone_after(env, ns, name, expires, GONE_WITHIN).await?;
    let sandboxes = api(env, ns, "Sandbox");
    check(
        sandboxes.get_opt(name).await?.is_some(),
        format!(
            "the Sandbox {name} was deleted with its pod, but {why}: the controller must tell it, not delete it"
        ),
    )?;
    let sandbox = wait_condition(&sandboxes, name, condition, Duration::from_secs(10)).await?;
    Ok((delay, sandbox))
}

fn shutdown_owner() -> [(&'static str, &'static str); 1] {
    [("action", "shutdown-owner")]
}

/// Scenario c. contract: controller.expiry-owner-actions
pub(crate) async fn stack_expired_sandbox_is_shut_down(env: &Env, id: &str) -> Result<()> {
    let _over = ShutDownOver(&env.owners);
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    let expired_total = "sandbox_webhook_expired_total";
    let before = release_metric(env, "controller", expired_total, &shutdown_owner()).await?;
    let (_, expires) = expiring_sandbox(env, &ns, "retained", 60).await?;
    let sandboxes = api(env, &ns, "Sandbox");
    check_no_shutdown_time(&sandboxes, "retained").await?;
    let (delay, sandbox) = kept_after_expiry(
        env,
        &ns,
        ("retained", expires),
        "its shutdownPolicy Retain keeps it",
        ("Ready", "False", "SandboxExpired"),
    )
    .await?;
    let told = &sandbox.data["spec"]["shutdownTime"];
    let want = expires.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    check(
        *told == json!(want),
        format!("the Sandbox's shutdownTime is {told}, not the pod's expires-at {want}"),
    )?;
    check(
        sandbox.data["spec"]["shutdownPolicy"] == "Retain",
        format!(
            "shutdownPolicy is {}",
            sandbox.data["spec"]["shutdownPolicy"]
        ),
    )?;
    expired_event(
        env,
        &ns,
        "retained",
        "set spec.shutdownTime of its owner Sandbox retained",
        expires,
    )
    .await?;
    let after = release_metric(env, "controller", expired_total, &shutdown_owner()).await?;
    let what = format!("{expired_total}{{action=\"shutdown-owner\"}}");
    check_counted_once(&what, before, after)?;
    println!(
        "    at expires-at the controller set the Sandbox's shutdownTime; agent-sandbox removed the pod {:.2}s after expires-at and kept the Sandbox: Ready=False, SandboxExpired (Retain)",
        seconds(delay)
    );
    Ok(())
}

/// Scenario d. contract: controller.expiry-owner-actions
pub(crate) async fn stack_expired_sandbox_is_suspended(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    let (_, expires) = expiring_sandbox(env, &ns, "paused", PAUSED_LIFETIME).await?;
    env.owners.shut_down_over().await?;
    set_sandbox_action(env, "suspend").await?;
    let result = suspended(env, &ns, expires).await;
    let restored = set_sandbox_action(env, "shutdown").await;
    result.and(restored)
}

async fn suspended(env: &Env, ns: &str, expires: DateTime<Utc>) -> Result<()> {
    let left = expires - Utc::now();
    check(
        left > TimeDelta::seconds(2),
        format!(
            "the controller of the new setting led only {:.1}s before the paused pod's expiry: raise PAUSED_LIFETIME",
            seconds(left)
        ),
    )?;
    let labels = [("action", "suspended-owner")];
    let before =
        release_metric(env, "controller", "sandbox_webhook_expired_total", &labels).await?;
    let (delay, sandbox) = kept_after_expiry(
        env,
        ns,
        ("paused", expires),
        "a suspended Sandbox is kept with its volumes",
        ("Suspended", "True", "PodTerminated"),
    )
    .await?;
    check(
        sandbox.data["spec"]["operatingMode"] == "Suspended",
        format!("operatingMode is {}", sandbox.data["spec"]["operatingMode"]),
    )?;
    check(
        sandbox.data["spec"].get("shutdownTime").is_none(),
        "a suspended Sandbox got a shutdownTime",
    )?;
    let ready = condition(&sandbox, "Ready");
    check(
        ready == Some(("False".into(), "SandboxSuspended".into())),
        format!("Ready is {ready:?}; conditions {}", conditions(&sandbox)),
    )?;
    expired_event(
        env,
        ns,
        "paused",
        "set spec.operatingMode of its owner Sandbox paused to Suspended",
        expires,
    )
    .await?;
    let after = release_metric(env, "controller", "sandbox_webhook_expired_total", &labels).await?;
    check_counted_once("suspended-owner", before, after)?;
    println!(
        "    at expires-at the controller set operatingMode: Suspended; agent-sandbox removed the pod {:.2}s after expires-at and kept the Sandbox: Suspended=True (PodTerminated), Ready=False (SandboxSuspended)",
        seconds(delay)
    );
    Ok(())
}

/// `helm upgrade` of the release with `Sandbox.agents.x-k8s.io: action`,
/// as an operator changes it; returns once a controller pod of the new
/// configuration holds the Lease.
async fn set_sandbox_action(env: &Env, action: &str) -> Result<()> {
    let ((), took) = timed(async {
        env.helm_upgrade(&[&format!(
            "controller.config.expiry.ownerActions.Sandbox\\.agents\\.x-k8s\\.io={action}"
        )])?;
        wait_for(
            "a controller pod of the new configuration to hold the Lease",
            Duration::from_secs(60),
            async || {
                let pods = env.release_pod_names("controller").await?;
                let holder = env.controller_lease_holder().await?;
                Ok(holder.filter(|h| pods.contains(h)).map(|_| ()))
            },
        )
        .await
    })
    .await?;
    println!(
        "    helm upgrade: ownerActions Sandbox.agents.x-k8s.io={action}, a new controller leading in {took:.1}s"
    );
    Ok(())
}

/// A delay in seconds, for messages.
#[expect(
    clippy::cast_precision_loss,
    reason = "a scenario's delays are far below 2^52 ms"
)]
fn seconds(delay: TimeDelta) -> f64 {
    delay.num_milliseconds() as f64 / 1000.0
}
