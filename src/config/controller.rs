//! The `controller:` section of the configuration file (contract:
//! config.controller): file format, so it lives with the rest of the file; the
//! lifecycle controller reads it from `Config::controller`. `read` calls
//! [`ControllerConfig::validate`] with the rest of the file.

use serde::{Deserialize, Serialize};

/// Owner kinds deleted instead of the pod when it expires, as `Kind.group`.
pub const DEFAULT_DELETE_OWNER_KINDS: [&str; 3] = [
    "BatchSandbox.sandbox.opensandbox.io",
    "Sandbox.agents.x-k8s.io",
    "Job.batch",
];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ControllerConfig {
    pub expiry: ControllerExpiry,
    pub platform: ControllerPlatform,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ControllerExpiry {
    /// `Kind.group` (`Kind` alone for the core group) of controller owners
    /// that are deleted, with propagation Background, when their pod expires.
    pub delete_owner_kinds: Vec<String>,
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
            delete_owner_kinds: DEFAULT_DELETE_OWNER_KINDS.map(str::to_owned).to_vec(),
        }
    }
}

impl ControllerConfig {
    /// `Err((field, message))` for the first invalid entry.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for (i, entry) in self.expiry.delete_owner_kinds.iter().enumerate() {
            if !valid_kind_group(entry) {
                return Err((
                    format!("controller.expiry.deleteOwnerKinds[{i}]"),
                    format!(
                        "'{entry}' is not Kind.group such as Job.batch (a Kind starts with an upper-case letter; the group is a DNS subdomain)"
                    ),
                ));
            }
        }
        Ok(())
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
        for ok in DEFAULT_DELETE_OWNER_KINDS
            .iter()
            .copied()
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
