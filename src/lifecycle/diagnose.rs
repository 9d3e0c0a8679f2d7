//! `diagnose`'s JSON: what the controller does with one pod, when and why,
//! from the same [`super::due()`] that [`super::decide()`] acts on, with
//! the other pods of its owner given as its siblings, and the readings of
//! [`super::plan()`] it starts from.
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

use super::decide::{Due, due};
use super::drift::{self, DriftState};
use super::expiry::{ExpiryAction, Removal};
use super::facts::PodFacts;
use super::plan::{PlatformAction, Unwatched, is_audited, is_cached, plan, unwatched};
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

/// What the controller does with `pod` at `now`, the pod alone (no other
/// pod of its owner holds it back).
#[must_use]
pub fn diagnose(
    pod: &SandboxPod,
    config: &Config,
    own_namespace: Option<&str>,
    now: DateTime<Utc>,
) -> Diagnosis {
    let facts = PodFacts::of(pod, config);
    let due = due(&facts, config, own_namespace, std::iter::empty(), now);
    one(pod, &facts, &due, None, config, own_namespace, now)
}

/// What the controller does with each of `pods` at `now`, in order (contract:
/// diagnose.siblings): the pods of one controller owner among them are each
/// other's siblings, as the controller's cache holds them, so a pod whose
/// owner is acted on is due when the last of them is.
#[must_use]
pub fn diagnose_all(
    pods: &[SandboxPod],
    config: &Config,
    own_namespace: Option<&str>,
    now: DateTime<Utc>,
) -> Vec<Diagnosis> {
    let facts: Vec<PodFacts> = pods.iter().map(|p| PodFacts::of(p, config)).collect();
    let names: Vec<String> = pods.iter().map(full_name).collect();
    (0..pods.len())
        .map(|i| {
            // The cache keys pods by name: one of the same name is this one.
            let siblings: Vec<usize> = (0..pods.len())
                .filter(|&j| names[j] != names[i])
                .filter(|&j| {
                    let owner = |k: usize| facts[k].owner.as_ref().map(|o| &o.uid);
                    owner(i).is_some() && owner(j) == owner(i)
                })
                .filter(|&j| is_cached(&facts[j], config, own_namespace))
                .collect();
            let due = due(
                &facts[i],
                config,
                own_namespace,
                siblings.iter().map(|&j| &facts[j]),
                now,
            );
            let held_by = match &due {
                Due::At {
                    held_by: Some(k), ..
                } => siblings.get(*k).map(|&j| names[j].as_str()),
                _ => None,
            };
            one(
                &pods[i],
                &facts[i],
                &due,
                held_by,
                config,
                own_namespace,
                now,
            )
        })
        .collect()
}

fn full_name(pod: &SandboxPod) -> String {
    format!(
        "{}/{}",
        pod.namespace(),
        pod.metadata.name.as_deref().unwrap_or_default()
    )
}

/// One pod's diagnosis, given when it is [`Due`] and the sibling that
/// holds it (`held_by`).
fn one(
    pod: &SandboxPod,
    facts: &PodFacts,
    due: &Due,
    held_by: Option<&str>,
    config: &Config,
    own_namespace: Option<&str>,
    now: DateTime<Utc>,
) -> Diagnosis {
    let plan = plan(facts, config, own_namespace, now);
    let keys = config.keys();
    let ignored =
        unwatched(facts, config, own_namespace).map(|why| not_watched(why, facts, config));
    let deleting = facts.deleting.then(|| {
        "being deleted (metadata.deletionTimestamp is set), so the controller leaves it alone"
            .to_owned()
    });
    let expiry = &plan.expiry;
    let timing = if expiry.expired {
        "expires-at passed"
    } else {
        "at expires-at"
    };
    let manual = facts.manual_cleanup;
    let expiry_reason = match (ignored.as_ref().or(deleting.as_ref()), due) {
        (Some(why), _) => why.clone(),
        (None, Due::At { removal, at, .. }) => match held_by {
            Some(sibling) => format!(
                "{timing}; waits for {sibling}, the last pod of its owner to be due ({}); {}",
                rfc3339(*at),
                how(removal)
            ),
            None => format!("{timing}; {}", how(removal)),
        },
        (None, Due::Invalid { value }) => format!(
            "{} is '{value}', not an RFC 3339 time: the controller records a warning Event InvalidExpiry and deletes nothing",
            keys.expires_at,
        ),
        (None, Due::Never) if manual => format!(
            "manual cleanup: label {} is \"true\", so the pod is never removed",
            keys.manual_cleanup
        ),
        (None, Due::Never) => format!(
            "no {} annotation, so the pod is never removed",
            keys.expires_at
        ),
    };
    let (action, at) = match due {
        Due::Never => (ExpiryAction::None, None),
        Due::Invalid { .. } => (ExpiryAction::Invalid, None),
        Due::At { removal, at, .. } => (removal.action(), Some(rfc3339(*at))),
    };
    let reading = &plan.platform;
    // What the controller would do about the platform is the plan's own
    // `on_unschedulable`; the rest says why it does nothing.
    let platform_reason = match (ignored.as_ref().or(deleting.as_ref()), &plan.on_unschedulable) {
        (Some(why), _) => why.clone(),
        (None, PlatformAction::ReportAndRemove(Removal::LeaveOwned(o))) => format!("Pending, and the scheduler says no node takes its platform: the controller reports it, but leaves it (controller.platform.deleteUnschedulable): its controller owner {}/{} is not of a kind in controller.expiry.ownerActions", o.kind, o.name),
        (None, PlatformAction::ReportAndRemove(_)) => "Pending, and the scheduler says no node takes its platform: the controller reports it and removes it (controller.platform.deleteUnschedulable)".to_owned(),
        (None, PlatformAction::Report) => "Pending, and the scheduler says no node takes its platform: the controller sets the condition and records a warning Event".to_owned(),
        (None, PlatformAction::None) if !reading.has_platform => "no kubernetes.io/os or kubernetes.io/arch in its nodeSelector or required node affinity, so no scheduling failure is about its platform".to_owned(),
        (None, PlatformAction::None) if !facts.pending => "not Pending: it was scheduled".to_owned(),
        (None, PlatformAction::None) => "Pending, but nothing the scheduler says is about its platform".to_owned(),
    };
    let injection = injection(pod, facts, config, own_namespace, ignored.as_ref());
    Diagnosis {
        injection,
        pod: full_name(pod),
        expiry: ExpiryReport {
            expires_at: expiry.expires_at.clone(),
            expired: expiry.expired,
            action,
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

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
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

/// Why the controller does not look at the pod at all, in words.
fn not_watched(why: Unwatched, pod: &PodFacts, config: &Config) -> String {
    let ns = &*pod.namespace;
    match why {
        Unwatched::NotSandbox => format!(
            "not a sandbox: no {} label, so the controller does not watch it",
            config.keys().id
        ),
        Unwatched::OtherRevision => format!(
            "another release's: its {} label is not this release's revision ({}), so that release's controller looks after it",
            config.keys().rev,
            config
                .revision
                .as_deref()
                .unwrap_or("none, the default release")
        ),
        Unwatched::ExcludedNamespace => format!(
            "namespace excluded: {ns} is in excludedNamespaces, so the controller does not watch it"
        ),
        Unwatched::OwnNamespace => format!(
            "namespace excluded: {ns} is the controller's own namespace, so the controller does not watch it"
        ),
    }
}

/// How a removal is done, in words.
fn how(removal: &Removal) -> String {
    let (owner, what) = match removal {
        Removal::DeletePod => {
            return "the pod has no controller owner, so it is deleted".to_owned();
        }
        Removal::DeleteOwner(o) => (
            o,
            "is of a kind whose controller.expiry.ownerActions is delete, so the owner is deleted (propagation Background), once no other pod of it is due later",
        ),
        Removal::ShutdownOwner(o) => (
            o,
            "is an agent-sandbox Sandbox whose controller.expiry.ownerActions is shutdown, so its spec.shutdownTime is set to expiresAt (unless it is earlier already): agent-sandbox removes the pod and applies the Sandbox's shutdownPolicy",
        ),
        Removal::SuspendOwner(o) => (
            o,
            "is an agent-sandbox Sandbox whose controller.expiry.ownerActions is suspend, so its spec.operatingMode is set to Suspended: agent-sandbox removes the pod and keeps the Sandbox and its volumes",
        ),
        Removal::LeaveOwned(o) => (
            o,
            "is not of a kind in controller.expiry.ownerActions, so the pod is left, with a warning Event",
        ),
    };
    format!("its controller owner {}/{} {what}", owner.kind, owner.name)
}
