//! Is a Pending sandbox stuck because no node offers its platform? (contract:
//! controller.platform-classifier, controller.platform-constraints)
//!
//! An exact port of OpenSandbox's `is_unschedulable_reason`,
//! `has_platform_constraints_in_pod_spec`,
//! `analyze_platform_constraints_in_pod_spec` and `is_platform_unschedulable`
//! (`WorkloadProvider` in the seed); the two pod-spec entry points, which
//! only the seed-parity tests call, live with those tests, over
//! [`analyze_fields`]. The seed works on untyped dicts and
//! tolerates any shape, so these take `serde_json::Value` and keep its quirks:
//! a non-string reason or message is "no", a non-dict spec has no
//! constraints, a non-list term list ends the scan, a non-list expression
//! list skips that term. Python's `str.strip()` and `str.lower()` are
//! [`py_strip`] and [`str::to_lowercase`] (both use Unicode's full case
//! mappings).
//!
//! The lifecycle controller does not call [`is_platform_unschedulable`] on
//! the scheduler's message as is: see [`without_preemption_postscript`].

use serde_json::Value;

use crate::mutate::intent::platform::{ARCH_KEY, OS_KEY};

/// The seed's transient-capacity phrases, in its order: a message with one of
/// them is about capacity, which may free up, not about the platform.
pub const TRANSIENT_CAPACITY_INDICATORS: [&str; 7] = [
    "insufficient cpu",
    "insufficient memory",
    "insufficient ephemeral-storage",
    "too many pods",
    "insufficient pods",
    "preemption is not helpful",
    "preemption: 0/",
];

/// kube-scheduler's generic affinity/selector mismatch wordings, which name
/// no label key.
pub const STANDARD_PATTERNS: [&str; 4] = [
    "didn't match pod's node affinity",
    "didn't match pod's node selector",
    "did not match pod's node affinity",
    "did not match pod's node selector",
];

/// Python's `str.strip()` with no argument: Unicode white space plus the
/// four ASCII separators U+001C..U+001F, which Python also counts as space
/// and Rust's `trim` does not.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// `is_unschedulable_reason`.
pub fn is_unschedulable_reason(reason: Option<&Value>) -> bool {
    let Some(Value::String(reason)) = reason else {
        return false;
    };
    let normalized = py_strip(reason).to_lowercase();
    normalized == "unschedulable"
        || normalized == "failedscheduling"
        || normalized.contains("unschedulable")
}

/// The body of `analyze_platform_constraints_in_pod_spec` on the two fields
/// it reads, for callers that keep only those (a missing field and `{}` are
/// the same to the seed).
pub fn analyze_fields(node_selector: Option<&Value>, affinity: Option<&Value>) -> (bool, bool) {
    let mut has_platform = false;
    let mut has_non_platform = false;

    if let Some(selector) = node_selector.and_then(Value::as_object) {
        for key in selector.keys() {
            if is_platform_key(key) {
                has_platform = true;
            } else {
                has_non_platform = true;
            }
        }
    }

    // The seed reads each level with `.get(key, {})` and returns early on a
    // non-dict or a non-list; in every such case, as for a missing level, the
    // affinity adds nothing, so both are "no terms" here. Likewise a non-dict
    // term or a non-list `matchExpressions` contributes no key.
    let terms = affinity
        .and_then(|a| a.get("nodeAffinity"))
        .and_then(|n| n.get("requiredDuringSchedulingIgnoredDuringExecution"))
        .and_then(|r| r.get("nodeSelectorTerms"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let expressions = terms
        .iter()
        .filter_map(|t| t.get("matchExpressions")?.as_array())
        .flatten();
    for expr in expressions {
        // `isinstance(key, str) and key`: a non-string or empty key is no
        // constraint at all.
        match expr.get("key") {
            Some(Value::String(key)) if is_platform_key(key) => has_platform = true,
            Some(Value::String(key)) if !key.is_empty() => has_non_platform = true,
            _ => {}
        }
    }
    (has_platform, has_non_platform)
}

fn is_platform_key(key: &str) -> bool {
    key == OS_KEY || key == ARCH_KEY
}

/// `is_platform_unschedulable`.
pub fn is_platform_unschedulable(
    reason: Option<&Value>,
    message: Option<&Value>,
    workload_has_platform_constraints: bool,
    workload_has_non_platform_constraints: bool,
) -> bool {
    if !workload_has_platform_constraints {
        return false;
    }
    if !is_unschedulable_reason(reason) {
        return false;
    }
    let Some(Value::String(message)) = message else {
        return false;
    };
    let normalized = message.to_lowercase();
    if TRANSIENT_CAPACITY_INDICATORS
        .iter()
        .any(|indicator| normalized.contains(indicator))
    {
        return false;
    }
    if normalized.contains(OS_KEY) || normalized.contains(ARCH_KEY) {
        return true;
    }
    // The generic mismatch text names no key, so it is about the platform
    // only when the pod has no other selector or affinity key.
    if workload_has_non_platform_constraints {
        return false;
    }
    STANDARD_PATTERNS
        .iter()
        .any(|pattern| normalized.contains(pattern))
}

/// The scheduler's message with its preemption postscript removed: everything
/// from the first `preemption:` (any case) to the end, then trimmed.
///
/// kube-scheduler always appends the postscript (`... preemption: 0/3 nodes
/// are available: 3 Preemption is not helpful for scheduling.`), and two of
/// the seed's transient phrases match it, so the seed as written never fires
/// against a current scheduler. This is the contract's one deliberate deviation
/// (contract: controller.platform-postscript);
/// the seed functions above stay exact.
pub fn without_preemption_postscript(message: &str) -> &str {
    // ASCII lower-casing keeps byte offsets, so the index is valid in
    // `message` itself.
    let lower = message.to_ascii_lowercase();
    let end = lower.find("preemption:").unwrap_or(message.len());
    message[..end].trim()
}

/// [`is_platform_unschedulable`] as the controller calls it: a string
/// message loses its preemption postscript first.
pub fn is_platform_unschedulable_stripped(
    reason: Option<&Value>,
    message: Option<&Value>,
    has_platform: bool,
    has_non_platform: bool,
) -> bool {
    match message {
        Some(Value::String(m)) => {
            let stripped = Value::String(without_preemption_postscript(m).to_owned());
            is_platform_unschedulable(reason, Some(&stripped), has_platform, has_non_platform)
        }
        other => is_platform_unschedulable(reason, other, has_platform, has_non_platform),
    }
}

#[cfg(test)]
mod tests;
