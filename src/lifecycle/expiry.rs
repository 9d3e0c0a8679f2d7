//! When a sandbox expires, and what removing it means (SPEC 10).

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::Serialize;

use super::pod::SandboxPod;
use crate::config::Config;
/// The webhook's own reading of `expires-at`, so that the controller removes
/// a pod at exactly the time the webhook accepted.
pub(crate) use crate::mutate::expires_at::parse_expires_at;

/// What happens to the pod when it is expired (`diagnose`'s `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExpiryAction {
    /// Never removed: no `expires-at`, `manual-cleanup`, or not a watched pod.
    None,
    DeletePod,
    DeleteOwner,
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
            ExpiryAction::LeaveOwned => "leave-owned",
            ExpiryAction::Invalid => "invalid",
        }
    }
}

/// A pod's controller owner, as its owner reference names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

impl Owner {
    fn from_ref(r: &OwnerReference) -> Self {
        Owner {
            api_version: r.api_version.clone(),
            kind: r.kind.clone(),
            name: r.name.clone(),
            uid: r.uid.clone(),
        }
    }

    /// The API group: `batch` for `batch/v1`, empty for the core `v1`.
    #[must_use]
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// `Kind.group` as `controller.expiry.deleteOwnerKinds` spells it
    /// (`Kind` alone for the core group).
    #[must_use]
    pub fn kind_group(&self) -> String {
        match self.group() {
            "" => self.kind.clone(),
            group => format!("{}.{group}", self.kind),
        }
    }
}

/// How a pod is removed, by SPEC 10's owner rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Removal {
    /// No controller owner: delete the pod itself (UID precondition).
    DeletePod,
    /// A controller owner of a configured kind: delete it (Background).
    DeleteOwner(Owner),
    /// Any other controller owner: leave the pod, with a warning Event.
    LeaveOwned(Owner),
}

impl Removal {
    #[must_use]
    pub fn action(&self) -> ExpiryAction {
        match self {
            Removal::DeletePod => ExpiryAction::DeletePod,
            Removal::DeleteOwner(_) => ExpiryAction::DeleteOwner,
            Removal::LeaveOwned(_) => ExpiryAction::LeaveOwned,
        }
    }

    /// The `action` label of `sandbox_webhook_expired_total`.
    #[must_use]
    pub fn metric_label(&self) -> &'static str {
        match self {
            Removal::DeletePod => "deleted-pod",
            Removal::DeleteOwner(_) => "deleted-owner",
            Removal::LeaveOwned(_) => "left-owned",
        }
    }
}

pub fn removal(pod: &SandboxPod, config: &Config) -> Removal {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(Owner::from_ref);
    match owner {
        None => Removal::DeletePod,
        Some(owner) => {
            let kind_group = owner.kind_group();
            if config
                .controller
                .expiry
                .delete_owner_kinds
                .contains(&kind_group)
            {
                Removal::DeleteOwner(owner)
            } else {
                Removal::LeaveOwned(owner)
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
pub fn plan(pod: &SandboxPod, config: &Config, now: DateTime<Utc>) -> ExpiryPlan {
    let keys = config.keys();
    let raw = pod.annotation(&keys.expires_at);
    let at = raw.and_then(parse_expires_at);
    let mut plan = ExpiryPlan {
        expires_at: raw.map(str::to_owned),
        at,
        expired: at.is_some_and(|at| at <= now),
        action: ExpiryAction::None,
        removal: None,
    };
    let manual = pod
        .label(&keys.manual_cleanup)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if manual || raw.is_none() {
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
