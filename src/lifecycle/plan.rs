//! The controller's whole decision for one pod: whether it is watched at
//! all, then its expiry and platform readings.

use chrono::{DateTime, Utc};

use super::expiry::{self, ExpiryAction, ExpiryPlan, Removal};
use super::facts::PodFacts;
use super::platform::PlatformReading;
use crate::config::Config;

/// Whether the controller looks at this pod at all: a sandbox (label
/// `P/id`) of its release's revision (contract: revision.controller),
/// outside the excluded namespaces and the controller's own.
#[must_use]
pub fn is_watched(pod: &PodFacts, config: &Config, own_namespace: Option<&str>) -> bool {
    let ns = &*pod.namespace;
    pod.sandbox
        && !pod.other_revision
        && !config.excluded_namespaces.iter().any(|e| e == ns)
        && own_namespace != Some(ns)
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
        // annotation says: without a removal `decide` starts no job.
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
