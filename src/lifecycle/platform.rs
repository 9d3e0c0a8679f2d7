//! Reading a pod's scheduling failure (contract: controller.platform-reading):
//! OpenSandbox's per-pod reading
//! (`_extract_platform_unschedulable_message_from_pod`) around the seed
//! classifier of `crate::lifecycle::unschedulable`.

use serde_json::Value;

use super::pod::{SandboxPod, StatusFields};
use crate::config::Config;
use crate::lifecycle::unschedulable::{analyze_fields, is_platform_unschedulable_stripped};

/// Reported when a hit carries no message of its own.
pub const DEFAULT_MESSAGE: &str = "Pod scheduling constraints cannot be satisfied.";

/// The condition type kube-scheduler writes.
const POD_SCHEDULED: &str = "PodScheduled";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlatformReading {
    pub has_platform: bool,
    pub has_non_platform: bool,
    /// A Pending pod that no node can take because of its platform.
    pub unschedulable: bool,
    /// The scheduler's whole message, when `unschedulable`.
    pub message: Option<String>,
}

/// A classifier with the seed's `is_platform_unschedulable` signature.
pub type Checker = fn(Option<&Value>, Option<&Value>, bool, bool) -> bool;

/// `_extract_platform_unschedulable_message_from_pod`: the first
/// `PodScheduled` condition whose status is `False` (any case) and that
/// `checker` accepts, else the pod's own `status.reason`/`status.message`.
///
/// Where the original would raise (a `conditions: null`), this reads no
/// conditions; a non-list `conditions` matches nothing in both.
pub fn extract_message(
    status: Option<&StatusFields>,
    has_platform: bool,
    has_non_platform: bool,
    checker: Checker,
) -> Option<String> {
    if !has_platform {
        return None;
    }
    let status = status?;
    let conditions = status
        .conditions
        .as_ref()
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for condition in conditions {
        let field = |name: &str| condition.get(name);
        if field("type").and_then(Value::as_str) == Some(POD_SCHEDULED)
            && py_str_lower_is_false(field("status"))
            && checker(
                field("reason"),
                field("message"),
                has_platform,
                has_non_platform,
            )
        {
            return Some(message_or_default(field("message")));
        }
    }
    if checker(
        status.reason.as_ref(),
        status.message.as_ref(),
        has_platform,
        has_non_platform,
    ) {
        return Some(message_or_default(status.message.as_ref()));
    }
    None
}

/// `str(value).lower() == "false"`: a string in any case, or the boolean
/// `false` (Python prints it `False`). A missing status is `"None"`.
fn py_str_lower_is_false(value: Option<&Value>) -> bool {
    match value {
        Some(Value::String(s)) => s.to_lowercase() == "false",
        Some(Value::Bool(false)) => true,
        _ => false,
    }
}

fn message_or_default(message: Option<&Value>) -> String {
    match message {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        _ => DEFAULT_MESSAGE.to_owned(),
    }
}

/// The controller's reading: the seed's constraint analysis of the pod's own
/// spec, the per-pod reading with the stripped classifier, and only for a
/// pod that is still Pending (a pod read from a manifest without a phase
/// counts as Pending).
pub fn read(pod: &SandboxPod) -> PlatformReading {
    let (has_platform, has_non_platform) = pod.spec.as_ref().map_or((false, false), |s| {
        analyze_fields(s.node_selector.as_ref(), s.affinity.as_ref())
    });
    let message = pending(pod)
        .then(|| {
            extract_message(
                pod.status.as_ref(),
                has_platform,
                has_non_platform,
                is_platform_unschedulable_stripped,
            )
        })
        .flatten();
    PlatformReading {
        has_platform,
        has_non_platform,
        unschedulable: message.is_some(),
        message,
    }
}

/// The type of the pod condition the controller sets on a hit.
#[must_use]
pub fn condition_type(config: &Config) -> String {
    format!("{}/PlatformUnschedulable", config.prefix)
}

/// Pending, or no phase at all (a manifest not yet applied).
pub(super) fn pending(pod: &SandboxPod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_ref())
        .is_none_or(|p| p.as_str() == Some("Pending"))
}

/// The pod already carries the controller's condition with status `True`
/// (it is set once).
pub fn already_reported(pod: &SandboxPod, condition_type: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(Value::as_array)
        .is_some_and(|conditions| {
            conditions.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(condition_type)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}
