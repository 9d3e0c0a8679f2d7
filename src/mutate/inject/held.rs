//! What a pod's own egress sidecar holds that the webhook keeps rather than
//! rewrites (contract: egress.token-kept, egress.rules-as-values): the
//! token the control plane already knows, and rules that are the requested
//! policy in other spelling. OpenSandbox's server writes both (its rules
//! with Python's JSON spacing and actions as the request gave them, its
//! token in the workload, not always on the pod), so a pod it built is
//! recognised as holding the policy it asks for.
//!
//! Nothing else is forgiven: the sidecar must still be exactly the
//! webhook's (`same`), so a held sidecar cannot carry other code, other
//! capabilities or other env by spelling its rules differently.

use serde_json::Value;

use super::owned::{At, List};
use crate::mutate::intent::token::is_egress_token;
use crate::mutate::read::k8s::KnownEnv;
use crate::mutate::read::pod::PodView;

const AUTH_HEADER: &str = "OPENSANDBOX-EGRESS-AUTH";

/// The container at `at`, as the pod has it. Only a pod that already
/// holds a sidecar comes here.
pub(crate) fn container(pod: &PodView<'_>, at: At) -> Option<Value> {
    let lists = pod.source.lists()?;
    let raw = match at.list {
        List::Init => lists.init_containers.get(at.index),
        List::Main => lists.containers.get(at.index),
    }?;
    serde_json::from_str(raw.get()).ok()
}

/// The value of the last `env` entry named `name` (the one a container
/// sees when a name is given twice).
fn env<'c>(container: &'c Value, name: &str) -> Option<&'c str> {
    container
        .get("env")?
        .as_array()?
        .iter()
        .rev()
        .find(|e| e.get("name").and_then(Value::as_str) == Some(name))?
        .get("value")?
        .as_str()
}

/// The token the held sidecar works with: its `OPENSANDBOX_EGRESS_TOKEN`,
/// else its readiness probe's header. One that could not travel in a
/// header is none.
pub(crate) fn token(sidecar: &Value) -> Option<String> {
    let header = || {
        sidecar
            .pointer("/readinessProbe/httpGet/httpHeaders")?
            .as_array()?
            .iter()
            .find(|h| h.get("name").and_then(Value::as_str) == Some(AUTH_HEADER))?
            .get("value")?
            .as_str()
    };
    env(sidecar, KnownEnv::EgressToken.name())
        .or_else(header)
        .filter(|t| is_egress_token(t))
        .map(str::to_owned)
}

/// The held sidecar's rules text.
pub(crate) fn rules(sidecar: &Value) -> Option<&str> {
    env(sidecar, KnownEnv::EgressRules.name())
}

/// Whether `held` (a sidecar's rules text) is the policy `normalized` (the
/// webhook's compact form of the annotation) as the sidecar reads it: equal
/// as JSON values once actions are lower-cased. Whitespace and key order do
/// not matter; anything else does (a target trimmed differently, an
/// `egress: null`, a key in other case). A key given twice counts by its
/// last value, as Go's `encoding/json` in the sidecar reads it, and a key
/// Go would match without case (`DefaultAction`) is an extra key here, so
/// never equal.
pub(crate) fn same_rules(held: &str, normalized: &str) -> bool {
    let (Ok(mut held), Ok(normalized)) = (
        serde_json::from_str::<Value>(held),
        serde_json::from_str::<Value>(normalized),
    ) else {
        return false;
    };
    let lower = |v: Option<&mut Value>| {
        if let Some(Value::String(s)) = v {
            s.make_ascii_lowercase();
        }
    };
    if let Some(policy) = held.as_object_mut() {
        lower(policy.get_mut("defaultAction"));
        if let Some(Value::Array(rules)) = policy.get_mut("egress") {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                lower(rule.get_mut("action"));
            }
        }
    }
    held == normalized
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NORMALIZED: &str =
        r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;

    /// contract: egress.rules-as-values
    #[test]
    fn rules_are_compared_as_the_sidecar_reads_them() {
        for same in [
            NORMALIZED,
            r#"{"defaultAction": "deny", "egress": [{"action": "allow", "target": "pypi.org"}]}"#,
            r#"{"egress":[{"target":"pypi.org","action":"ALLOW"}],"defaultAction":"Deny"}"#,
            r#"{"defaultAction":"allow","defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#,
            "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\",\"target\":\"\\u0070ypi.org\"}]}",
        ] {
            assert!(same_rules(same, NORMALIZED), "{same}");
        }
        for other in [
            r#"{"defaultAction":"allow","egress":[{"action":"allow","target":"pypi.org"}]}"#,
            r#"{"defaultAction":"deny","defaultAction":"allow","egress":[{"action":"allow","target":"pypi.org"}]}"#,
            r#"{"defaultAction":"deny","DefaultAction":"allow","egress":[{"action":"allow","target":"pypi.org"}]}"#,
            r#"{"defaultaction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#,
            r#"{"defaultAction":"deny","egress":[{"action":"allow","target":" pypi.org"}]}"#,
            r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"PyPI.org"}]}"#,
            r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org","port":443}]}"#,
            r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"},{"action":"allow","target":"x.org"}]}"#,
            r#"{"defaultAction":"deny","egress":null}"#,
            r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]"#,
            "",
        ] {
            assert!(!same_rules(other, NORMALIZED), "{other}");
        }
    }

    /// contract: egress.token-kept
    #[test]
    fn the_token_is_the_env_s_else_the_probe_s() {
        let probe =
            |t: &str| json!({"httpGet": {"httpHeaders": [{"name": AUTH_HEADER, "value": t}]}});
        let both = json!({"env": [{"name": "OPENSANDBOX_EGRESS_TOKEN", "value": "old"},
                                  {"name": "OPENSANDBOX_EGRESS_TOKEN", "value": "env-token"}],
                          "readinessProbe": probe("probe-token")});
        assert_eq!(token(&both).as_deref(), Some("env-token"));
        let probe_only = json!({"env": [], "readinessProbe": probe("probe-token")});
        assert_eq!(token(&probe_only).as_deref(), Some("probe-token"));
        let unusable = json!({"env": [{"name": "OPENSANDBOX_EGRESS_TOKEN", "value": "a b"}]});
        assert_eq!(token(&unusable), None);
        assert_eq!(token(&json!({})), None);
    }
}
