//! When a sandbox expires, and what removing it means (contract:
//! controller.expiry-on-time, controller.expiry-never, controller.expiry-invalid).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::facts::{Owner, PodFacts};
use super::ids::ExpiresAt;
use crate::config::Config;
use crate::config::controller::OwnerAction;
/// The webhook's own reading of `expires-at`, so that the controller removes
/// a pod at exactly the time the webhook accepted.
pub(crate) use crate::mutate::intent::expires_at::parse_expires_at;

/// What happens to the pod when it is expired (`diagnose`'s `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpiryAction {
    /// Never removed: no `expires-at`, `manual-cleanup`, or not a watched pod.
    None,
    DeletePod,
    DeleteOwner,
    /// agent-sandbox `Sandbox`: its `spec.shutdownTime` is set.
    ShutdownOwner,
    /// agent-sandbox `Sandbox`: its `spec.operatingMode` is set `Suspended`.
    SuspendOwner,
    LeaveOwned,
    /// `expires-at` is not an RFC 3339 time: a warning Event, nothing deleted.
    Invalid,
}

impl ExpiryAction {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ExpiryAction::None => "none",
            ExpiryAction::DeletePod => "delete-pod",
            ExpiryAction::DeleteOwner => "delete-owner",
            ExpiryAction::ShutdownOwner => "shutdown-owner",
            ExpiryAction::SuspendOwner => "suspend-owner",
            ExpiryAction::LeaveOwned => "leave-owned",
            ExpiryAction::Invalid => "invalid",
        }
    }
}

/// How a pod is removed, by the owner rules (contract:
/// controller.expiry-delete-pod, controller.expiry-delete-owner,
/// controller.expiry-owner-actions, controller.expiry-left-owned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// No controller owner: delete the pod itself (UID precondition).
    DeletePod,
    /// A controller owner whose kind's action is `delete`: delete it
    /// (Background).
    DeleteOwner(Arc<Owner>),
    /// An agent-sandbox `Sandbox` owner, action `shutdown`: set its
    /// `spec.shutdownTime`; agent-sandbox removes the pod.
    ShutdownOwner(Arc<Owner>),
    /// An agent-sandbox `Sandbox` owner, action `suspend`: set its
    /// `spec.operatingMode: Suspended`; agent-sandbox removes the pod.
    SuspendOwner(Arc<Owner>),
    /// Any other controller owner: leave the pod, with a warning Event.
    LeaveOwned(Arc<Owner>),
}

impl Removal {
    #[must_use]
    pub fn action(&self) -> ExpiryAction {
        match self {
            Removal::DeletePod => ExpiryAction::DeletePod,
            Removal::DeleteOwner(_) => ExpiryAction::DeleteOwner,
            Removal::ShutdownOwner(_) => ExpiryAction::ShutdownOwner,
            Removal::SuspendOwner(_) => ExpiryAction::SuspendOwner,
            Removal::LeaveOwned(_) => ExpiryAction::LeaveOwned,
        }
    }

    /// The owner the removal acts on through its own lifecycle, or deletes;
    /// `None` for a pod deleted itself or left.
    #[must_use]
    pub fn acted_on_owner(&self) -> Option<&Arc<Owner>> {
        match self {
            Removal::DeleteOwner(o) | Removal::ShutdownOwner(o) | Removal::SuspendOwner(o) => {
                Some(o)
            }
            Removal::DeletePod | Removal::LeaveOwned(_) => None,
        }
    }

    /// The `action` label of `sandbox_webhook_expired_total`.
    #[must_use]
    pub fn metric_label(&self) -> &'static str {
        match self {
            Removal::DeletePod => "deleted-pod",
            Removal::DeleteOwner(_) => "deleted-owner",
            Removal::ShutdownOwner(_) => "shutdown-owner",
            Removal::SuspendOwner(_) => "suspended-owner",
            Removal::LeaveOwned(_) => "left-owned",
        }
    }
}

#[must_use]
pub fn removal(pod: &PodFacts, config: &Config) -> Removal {
    match &pod.owner {
        None => Removal::DeletePod,
        Some(owner) => {
            let owner = Arc::clone(owner);
            match config.controller.owner_action(&owner.kind_group()) {
                Some(OwnerAction::Delete) => Removal::DeleteOwner(owner),
                Some(OwnerAction::Shutdown) => Removal::ShutdownOwner(owner),
                Some(OwnerAction::Suspend) => Removal::SuspendOwner(owner),
                None => Removal::LeaveOwned(owner),
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExpiryPlan {
    /// The annotation as written.
    pub expires_at: Option<String>,
    /// Its time, when it parses.
    pub at: Option<DateTime<Utc>>,
    /// `at` is at or before now.
    pub expired: bool,
    /// What is done at `at` (now, when `expired`).
    pub action: ExpiryAction,
    /// How, for the three removal actions.
    pub removal: Option<Removal>,
}

/// `manual-cleanup` wins over everything, then a missing annotation, then an
/// unparsable one; otherwise the owner rules say how the pod goes.
#[must_use]
pub fn plan(pod: &PodFacts, config: &Config, now: DateTime<Utc>) -> ExpiryPlan {
    let raw = pod.expires_at.as_ref();
    let at = raw.and_then(ExpiresAt::time);
    let mut plan = ExpiryPlan {
        expires_at: raw.map(ToString::to_string),
        at,
        expired: at.is_some_and(|at| at <= now),
        action: ExpiryAction::None,
        removal: None,
    };
    if pod.manual_cleanup || raw.is_none() {
        return plan;
    }
    if at.is_none() {
        plan.action = ExpiryAction::Invalid;
        return plan;
    }
    let removal = removal(pod, config);
    plan.action = removal.action();
    plan.removal = Some(removal);
    plan
}
