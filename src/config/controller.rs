//! The `controller:` section of the configuration file (contract:
//! config.controller): file format, so it lives with the rest of the file; the
//! lifecycle controller reads it from `Config::controller`. `read` checks
//! each owner entry with [`check_owner_action`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// agent-sandbox's `Sandbox` as `Kind.group`: the only kind with a lifecycle
/// of its own the controller can tell (`shutdown`, `suspend`).
pub const AGENT_SANDBOX_KIND: &str = "Sandbox.agents.x-k8s.io";

/// What is done by default to the controller owner of an expired pod, by
/// `Kind.group`, sorted as the map that holds them (contract:
/// controller.expiry-owner-actions).
pub const DEFAULT_OWNER_ACTIONS: [(&str, OwnerAction); 3] = [
    ("BatchSandbox.sandbox.opensandbox.io", OwnerAction::Delete),
    ("Job.batch", OwnerAction::Delete),
    (AGENT_SANDBOX_KIND, OwnerAction::Shutdown),
];

/// What the controller does to the controller owner of an expired pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OwnerAction {
    /// Delete the owner (propagation Background).
    Delete,
    /// agent-sandbox `Sandbox`: set `spec.shutdownTime` to the pod's
    /// `expires-at` (unless it is earlier already); agent-sandbox removes the
    /// pod and applies the Sandbox's own `shutdownPolicy`.
    Shutdown,
    /// agent-sandbox `Sandbox`: set `spec.operatingMode: Suspended`, a pause
    /// that keeps the Sandbox and its volumes.
    Suspend,
}

impl OwnerAction {
    /// Its spelling in the file.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            OwnerAction::Delete => "delete",
            OwnerAction::Shutdown => "shutdown",
            OwnerAction::Suspend => "suspend",
        }
    }

    /// The file's spelling read back; `None` for anything else.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        [
            OwnerAction::Delete,
            OwnerAction::Shutdown,
            OwnerAction::Suspend,
        ]
        .into_iter()
        .find(|a| a.as_str() == value)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ControllerConfig {
    pub expiry: ControllerExpiry,
    pub platform: ControllerPlatform,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ControllerExpiry {
    /// What is done to a controller owner, by its `Kind.group` (`Kind`
    /// alone for the core group), when its pod expires; a pod whose owner's
    /// kind is not here is left, with a warning Event.
    pub owner_actions: BTreeMap<String, OwnerAction>,
    /// The file named the owners with the deprecated `deleteOwnerKinds`
    /// (each entry read as `delete`): worth a warning at start-up.
    #[serde(skip)]
    pub deprecated_delete_owner_kinds: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ControllerPlatform {
    /// Remove a platform-unschedulable pod (by the expiry removal rules)
    /// after reporting it, as OpenSandbox does with such a workload.
    pub delete_unschedulable: bool,
}

impl Default for ControllerExpiry {
    fn default() -> Self {
        ControllerExpiry {
            owner_actions: DEFAULT_OWNER_ACTIONS
                .iter()
                .map(|(kind, action)| ((*kind).to_owned(), *action))
                .collect(),
            deprecated_delete_owner_kinds: false,
        }
    }
}

/// `Err(message)` unless an owner of `kind` (`Kind.group`) can be given
/// `action`.
pub fn check_owner_action(kind: &str, action: OwnerAction) -> Result<(), String> {
    if !valid_kind_group(kind) {
        return Err(format!(
            "'{kind}' is not Kind.group such as Job.batch (a Kind starts with an upper-case letter; the group is a DNS subdomain)"
        ));
    }
    if action != OwnerAction::Delete && kind != AGENT_SANDBOX_KIND {
        return Err(format!(
            "{} applies only to {AGENT_SANDBOX_KIND} (agent-sandbox's own lifecycle); use delete for {kind}",
            action.as_str()
        ));
    }
    Ok(())
}

impl ControllerConfig {
    /// `Err((field, message))` for the first invalid entry.
    /// What the controller does to an owner of `kind_group` (as
    /// [`crate::lifecycle::Owner::kind_group`] spells it), if anything.
    #[must_use]
    pub fn owner_action(&self, kind_group: &str) -> Option<OwnerAction> {
        self.expiry.owner_actions.get(kind_group).copied()
    }

    /// Warnings about a file that loads but uses what is deprecated.
    #[must_use]
    pub fn warnings(&self) -> Vec<String> {
        if self.expiry.deprecated_delete_owner_kinds {
            vec![
                "controller.expiry.deleteOwnerKinds is deprecated: it is read as ownerActions with delete for each kind; write controller.expiry.ownerActions instead (Sandbox.agents.x-k8s.io: shutdown keeps agent-sandbox's own lifecycle)".to_owned(),
            ]
        } else {
            Vec::new()
        }
    }
}

/// `Kind` or `Kind.group`: an upper-case ASCII letter then letters and
/// digits, and a lower-case DNS subdomain.
fn valid_kind_group(entry: &str) -> bool {
    let (kind, group) = match entry.split_once('.') {
        Some((kind, group)) => (kind, Some(group)),
        None => (entry, None),
    };
    let kind_ok = kind.len() <= 63
        && kind.starts_with(|c: char| c.is_ascii_uppercase())
        && kind.bytes().all(|b| b.is_ascii_alphanumeric());
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    let group_ok = group.is_none_or(|g| g.len() <= 253 && g.split('.').all(label_ok));
    kind_ok && group_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_group_syntax() {
        for ok in DEFAULT_OWNER_ACTIONS
            .iter()
            .map(|(kind, _)| *kind)
            .chain(["Pod", "StatefulSet.apps"])
        {
            assert!(valid_kind_group(ok), "{ok}");
        }
        for bad in [
            "",
            "job.batch",
            "Job.",
            "Job.Batch",
            "Job batch",
            ".batch",
            "Job.-x",
            "J-b.batch",
        ] {
            assert!(!valid_kind_group(bad), "{bad}");
        }
    }
}
