//! `diagnose`'s JSON: what the controller does with one pod, when and why,
//! from the same [`super::plan()`] the controller acts on.
//!
//! The contract (diagnose.json) fixes `expiry.{expiresAt, expired, action}` and
//! `platform.{hasPlatform, hasNonPlatform, unschedulable, message}`; scripts
//! may read them, so they stay. Besides them: `pod`; `expiry.at` (when the
//! action is due) and `expiry.reason`; `platform.hasPlatformConstraints` and
//! `hasNonPlatformConstraints`, the same values as `hasPlatform` and
//! `hasNonPlatform` under names that say what they are (the seed's
//! `has_platform_constraints_in_pod_spec` reads the pod's nodeSelector and
//! required node affinity, not the platform annotation), the annotation
//! itself as `platformAnnotation`, and `platform.reason`.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::drift::{self, DriftState};
use super::expiry::{ExpiryAction, Removal};
use super::facts::PodFacts;
use super::plan::{PlatformAction, is_audited, plan};
use super::pod::SandboxPod;
use crate::config::Config;

/// One pod's diagnosis.
#[derive(Debug, Serialize)]
pub struct Diagnosis {
    /// `namespace/name`.
    pub pod: String,
    pub expiry: ExpiryReport,
    pub platform: PlatformReport,
    pub injection: InjectionReport,
}

/// Where the pod stands against what this release injects (contract:
/// drift.diagnose), as the controller's drift audit classifies it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InjectionReport {
    /// `current`, `stale`, `not-injected`, `server-completed` or
    /// `opted-out` (the `state` label of `sandbox_webhook_drift_pods`).
    pub state: &'static str,
    /// For a stale pod, the record's fields that differ.
    pub differs: Vec<&'static str>,
    /// The pod's `<prefix>/injected` record, as written.
    pub record: Option<String>,
    /// The record this release's webhook would write for it now.
    pub expected: String,
    /// Why, in words.
    pub reason: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiryReport {
    /// The annotation as written.
    pub expires_at: Option<String>,
    /// `expiresAt` is at or before the judging time.
    pub expired: bool,
    pub action: ExpiryAction,
    /// When the action is due (UTC): `expiresAt`; at or before now when
    /// `expired` (the controller then acts as soon as it sees the pod).
    /// `null` when nothing is ever done.
    pub at: Option<String>,
    /// Why, in words.
    pub reason: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
#[expect(
    clippy::struct_excessive_bools,
    reason = "a JSON report: each flag is one documented output field"
)]
pub struct PlatformReport {
    /// The older name for `hasPlatformConstraints` (contract:
    /// diagnose.platform).
    pub has_platform: bool,
    /// The older name for `hasNonPlatformConstraints` (contract:
    /// diagnose.platform).
    pub has_non_platform: bool,
    /// `kubernetes.io/os` or `kubernetes.io/arch` in the nodeSelector or
    /// the required node affinity (what the webhook wrote for the platform
    /// annotation, or what the pod had).
    pub has_platform_constraints: bool,
    /// Any other key there.
    pub has_non_platform_constraints: bool,
    /// The pod's `<prefix>/platform` annotation, as written.
    pub platform_annotation: Option<String>,
    /// Pending, and the scheduler says no node takes its platform.
    pub unschedulable: bool,
    /// The scheduler's message, when `unschedulable`.
    pub message: Option<String>,
    /// Why, in words.
    pub reason: String,
}

/// What the controller does with `pod` at `now`.
#[must_use]
pub fn diagnose(
    pod: &SandboxPod,
    config: &Config,
    own_namespace: Option<&str>,
    now: DateTime<Utc>,
) -> Diagnosis {
    let facts = PodFacts::of(pod, config);
    let plan = plan(&facts, config, own_namespace, now);
    let keys = config.keys();
    let ignored = not_watched(&facts, config, own_namespace);
    let expiry = &plan.expiry;
    let timing = if expiry.expired {
        "expires-at passed"
    } else {
        "at expires-at"
    };
    let manual = facts.manual_cleanup;
    let expiry_reason = match (&ignored, expiry.action, &expiry.removal) {
        (Some(why), _, _) => why.clone(),
        (None, _, Some(removal)) => format!("{timing}; {}", how(removal)),
        (None, ExpiryAction::Invalid, _) => format!(
            "{} is '{}', not an RFC 3339 time: the controller records a warning Event InvalidExpiry and deletes nothing",
            keys.expires_at,
            expiry.expires_at.as_deref().unwrap_or_default()
        ),
        (None, _, None) if manual => format!(
            "manual cleanup: label {} is \"true\", so the pod is never removed",
            keys.manual_cleanup
        ),
        (None, _, None) => format!(
            "no {} annotation, so the pod is never removed",
            keys.expires_at
        ),
    };
    let at = expiry
        .at
        .filter(|_| expiry.removal.is_some() && ignored.is_none())
        .map(|t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true));
    let reading = &plan.platform;
    // What the controller would do about the platform is the plan's own
    // `on_unschedulable`; the rest says why it does nothing.
    let platform_reason = match (&ignored, &plan.on_unschedulable) {
        (Some(why), _) => why.clone(),
        (None, PlatformAction::ReportAndRemove(_)) => "Pending, and the scheduler says no node takes its platform: the controller reports it and removes it (controller.platform.deleteUnschedulable)".to_owned(),
        (None, PlatformAction::Report) => "Pending, and the scheduler says no node takes its platform: the controller sets the condition and records a warning Event".to_owned(),
        (None, PlatformAction::None) if !reading.has_platform => "no kubernetes.io/os or kubernetes.io/arch in its nodeSelector or required node affinity, so no scheduling failure is about its platform".to_owned(),
        (None, PlatformAction::None) if !facts.pending => "not Pending: it was scheduled".to_owned(),
        (None, PlatformAction::None) => "Pending, but nothing the scheduler says is about its platform".to_owned(),
    };
    let injection = injection(pod, &facts, config, own_namespace, ignored.as_ref());
    Diagnosis {
        injection,
        pod: format!(
            "{}/{}",
            pod.namespace(),
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
        expiry: ExpiryReport {
            expires_at: expiry.expires_at.clone(),
            expired: expiry.expired,
            action: expiry.action,
            at,
            reason: expiry_reason,
        },
        platform: PlatformReport {
            has_platform: reading.has_platform,
            has_non_platform: reading.has_non_platform,
            has_platform_constraints: reading.has_platform,
            has_non_platform_constraints: reading.has_non_platform,
            platform_annotation: pod.annotation(&keys.platform).map(str::to_owned),
            unschedulable: reading.unschedulable,
            message: reading.message.clone(),
            reason: platform_reason,
        },
    }
}

fn injection(
    pod: &SandboxPod,
    facts: &PodFacts,
    config: &Config,
    own_namespace: Option<&str>,
    ignored: Option<&String>,
) -> InjectionReport {
    let keys = config.keys();
    let drift = facts.drift;
    let differs: Vec<&'static str> = drift.differs.names().collect();
    // The drift audit also counts escapes the controller does not otherwise
    // watch (`super::is_audited`), and leaves some it watches to another.
    let audited = is_audited(facts, config, own_namespace);
    let ignored = ignored.filter(|_| !audited);
    let reason = match (ignored, drift.state) {
        (Some(why), _) => why.clone(),
        (None, DriftState::NotInjected) if !audited => format!(
            "not injected: no {} record with the webhook's containers; the default release's controller reports it (a release with a revision leaves escapes to it)",
            keys.injected
        ),
        (None, DriftState::Current) => format!(
            "its {} record is what this release's webhook writes for it now",
            keys.injected
        ),
        (None, DriftState::Stale) => format!(
            "injected, but its {} record differs from what this release's webhook writes now in {}: recreate the pod to inject it with the current configuration; the controller records a warning Event SandboxInjectionStale",
            keys.injected,
            differs.join(", ")
        ),
        (None, DriftState::OptedOut) => format!("it opted out with {}: \"false\"", keys.inject),
        (None, DriftState::ServerCompleted) => {
            "OpenSandbox's own server completed it, and the webhook keeps it as built".to_owned()
        }
        (None, DriftState::NotInjected) => format!(
            "not injected: no {} record with the webhook's containers, no opt-out, not built by OpenSandbox's server (created while the webhook was down under failurePolicy Ignore, before it was installed, or in a namespace labelled {} for a revision no release serves); recreate it to inject it; the controller records a warning Event SandboxNotInjected",
            keys.injected, keys.rev
        ),
    };
    InjectionReport {
        state: drift.state.as_str(),
        differs,
        record: pod.annotation(&keys.injected).map(str::to_owned),
        expected: drift::expected(pod, config).value,
        reason,
    }
}

/// Why the controller does not look at the pod at all, if it does not (the
/// order of `super::is_watched`).
fn not_watched(pod: &PodFacts, config: &Config, own_namespace: Option<&str>) -> Option<String> {
    let ns = &*pod.namespace;
    if !pod.sandbox {
        Some(format!(
            "not a sandbox: no {} label, so the controller does not watch it",
            config.keys().id
        ))
    } else if pod.other_revision {
        Some(format!(
            "another release's: its {} label is not this release's revision ({}), so that release's controller looks after it",
            config.keys().rev,
            config
                .revision
                .as_deref()
                .unwrap_or("none, the default release")
        ))
    } else if config.excluded_namespaces.iter().any(|e| e == ns) {
        Some(format!(
            "namespace excluded: {ns} is in excludedNamespaces, so the controller does not watch it"
        ))
    } else if own_namespace == Some(ns) {
        Some(format!(
            "namespace excluded: {ns} is the controller's own namespace, so the controller does not watch it"
        ))
    } else {
        None
    }
}

/// How a removal is done, in words.
fn how(removal: &Removal) -> String {
    match removal {
        Removal::DeletePod => "the pod has no controller owner, so it is deleted".to_owned(),
        Removal::DeleteOwner(o) => format!(
            "its controller owner {}/{} is of a kind whose controller.expiry.ownerActions is delete, so the owner is deleted (propagation Background), once no other pod of it is due later",
            o.kind, o.name
        ),
        Removal::ShutdownOwner(o) => format!(
            "its controller owner {}/{} is an agent-sandbox Sandbox whose controller.expiry.ownerActions is shutdown, so its spec.shutdownTime is set to expiresAt (unless it is earlier already): agent-sandbox removes the pod and applies the Sandbox's shutdownPolicy",
            o.kind, o.name
        ),
        Removal::SuspendOwner(o) => format!(
            "its controller owner {}/{} is an agent-sandbox Sandbox whose controller.expiry.ownerActions is suspend, so its spec.operatingMode is set to Suspended: agent-sandbox removes the pod and keeps the Sandbox and its volumes",
            o.kind, o.name
        ),
        Removal::LeaveOwned(o) => format!(
            "its controller owner {}/{} is not of a kind in controller.expiry.ownerActions, so the pod is left, with a warning Event",
            o.kind, o.name
        ),
    }
}
