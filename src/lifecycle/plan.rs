//! The controller's whole decision for one pod: whether it is watched at
//! all, then its expiry and platform readings.

use chrono::{DateTime, Utc};

use super::drift::DriftState;
use super::expiry::{self, ExpiryAction, ExpiryPlan, Removal};
use super::facts::PodFacts;
use super::platform::PlatformReading;
use crate::config::Config;

/// Why the controller does not look at a pod, in the order the checks
/// are made (and `diagnose` says them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unwatched {
    /// No `P/id` label.
    NotSandbox,
    /// Its `P/rev` label is not this release's revision
    /// (contract: revision.controller).
    OtherRevision,
    /// Its namespace is in `excludedNamespaces`.
    ExcludedNamespace,
    /// Its namespace is the controller's own.
    OwnNamespace,
}

/// Why the controller does not look at this pod, or `None` when it does:
/// a sandbox (label `P/id`) of its release's revision (contract:
/// revision.controller), outside the excluded namespaces and the
/// controller's own.
#[must_use]
pub fn unwatched(
    pod: &PodFacts,
    config: &Config,
    own_namespace: Option<&str>,
) -> Option<Unwatched> {
    if !pod.sandbox {
        Some(Unwatched::NotSandbox)
    } else if pod.other_revision {
        Some(Unwatched::OtherRevision)
    } else {
        outside(pod, config, own_namespace)
    }
}

/// Whether the pod's namespace is one the controller leaves alone.
fn outside(pod: &PodFacts, config: &Config, own_namespace: Option<&str>) -> Option<Unwatched> {
    let ns = &*pod.namespace;
    if config.excluded_namespaces.iter().any(|e| e == ns) {
        Some(Unwatched::ExcludedNamespace)
    } else if own_namespace == Some(ns) {
        Some(Unwatched::OwnNamespace)
    } else {
        None
    }
}

/// Whether the controller looks at this pod at all ([`unwatched`] says
/// why not).
#[must_use]
pub fn is_watched(pod: &PodFacts, config: &Config, own_namespace: Option<&str>) -> bool {
    unwatched(pod, config, own_namespace).is_none()
}

/// Whether the controller's watch brings the pod into its cache (its label
/// and field selectors, `crate::controller::runtime::watch_config`): the
/// pods it watches and, for the default release, the sandboxes of other
/// revisions besides (its drift audit reports escapes whatever revision
/// they name). A cached pod of an owner holds that owner's removal back
/// like any other ([`super::decide`]).
#[must_use]
pub fn is_cached(pod: &PodFacts, config: &Config, own_namespace: Option<&str>) -> bool {
    pod.sandbox
        && (config.revision.is_none() || !pod.other_revision)
        && outside(pod, config, own_namespace).is_none()
}

/// Whether the controller's drift audit counts the pod (contract:
/// drift.states, revision.controller): the pods it watches, and, for the
/// default release, every sandbox outside the excluded namespaces that
/// was not injected at all, whatever revision its label names. So an
/// escape is reported once, by the default release, even when its label
/// names a revision no release serves; a release with a revision leaves
/// escapes to the default release.
#[must_use]
pub fn is_audited(pod: &PodFacts, config: &Config, own_namespace: Option<&str>) -> bool {
    let escaped = pod.drift.state == DriftState::NotInjected;
    match (&config.revision, pod.other_revision) {
        (None, false) => is_watched(pod, config, own_namespace),
        (None, true) => escaped && is_cached(pod, config, own_namespace),
        (Some(_), _) => !escaped && is_watched(pod, config, own_namespace),
    }
}

/// What the controller does about a pod no node of its platform takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlatformAction {
    /// Schedulable, or not a watched pod.
    None,
    /// Set the condition and record a warning Event.
    Report,
    /// Report it, then remove it so (controller.platform.deleteUnschedulable).
    ReportAndRemove(Removal),
}

/// Everything the controller would decide for one pod at `now`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub expiry: ExpiryPlan,
    pub platform: PlatformReading,
    pub on_unschedulable: PlatformAction,
}

#[must_use]
pub fn plan(
    pod: &PodFacts,
    config: &Config,
    own_namespace: Option<&str>,
    now: DateTime<Utc>,
) -> Plan {
    let watched = is_watched(pod, config, own_namespace);
    let mut expiry = expiry::plan(pod, config, now);
    let mut platform = pod.platform();
    if !watched {
        // Nothing is removed outside the watched namespaces, whatever the
        // annotation says: without a removal `decide` starts no write.
        expiry.action = ExpiryAction::None;
        expiry.removal = None;
        platform.unschedulable = false;
        platform.message = None;
    }
    let on_unschedulable = if !platform.unschedulable {
        PlatformAction::None
    } else if config.controller.platform.delete_unschedulable {
        PlatformAction::ReportAndRemove(expiry::removal(pod, config))
    } else {
        PlatformAction::Report
    };
    Plan {
        expiry,
        platform,
        on_unschedulable,
    }
}
