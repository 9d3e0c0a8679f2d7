//! The `<prefix>/egress-env` annotation (contract: egress.extra-env-allowlist):
//! extra environment for the egress sidecar, from upstream OpenSandbox's
//! allowlist only. The sidecar holds `NET_ADMIN` and the pod's egress rules, so
//! a pod may tune it (log level, timeouts, the MITM proxy's extra ports) but
//! never set what the webhook sets (`RULES`, `MODE`, `TOKEN`, `SANDBOX_ID`) or
//! anything else it reads.

use serde_json::{Map, Value};

use crate::json_error::quoted;
use crate::mutate::quote::clip;

/// What a pod may set, after `OPENSANDBOX_EGRESS_` (upstream's
/// `ALLOWED_EGRESS_ENV_VARS` as of opensandbox-server 1.1.1, as the contract fixes it:
/// egress.extra-env-allowlist).
pub(crate) const ALLOWED: [&str; 11] = [
    "OPENSANDBOX_EGRESS_LOG_LEVEL",
    "OPENSANDBOX_EGRESS_DNS_UPSTREAM_TIMEOUT",
    SSL_INSECURE,
    TRANSPARENT,
    "OPENSANDBOX_EGRESS_MITMPROXY_EXTRA_PORTS",
    "OPENSANDBOX_EGRESS_DENY_WEBHOOK",
    "OPENSANDBOX_EGRESS_METRICS_EXTRA_ATTRS",
    "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_REQUIRE_TLS",
    "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_TRUSTED_PROXY_CIDRS",
    "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_REQUIRE_SCOPED_MATCH",
    "OPENSANDBOX_EGRESS_POLICY_FILE",
];

/// Turns off the MITM proxy's certificate checks.
pub(crate) const SSL_INSECURE: &str = "OPENSANDBOX_EGRESS_MITMPROXY_SSL_INSECURE";
/// The transparent MITM proxy; also set by the credential proxy.
pub(crate) const TRANSPARENT: &str = "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT";

/// The sidecar's extra env vars, in the annotation's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EgressEnv {
    pub entries: Vec<(String, String)>,
}

impl EgressEnv {
    fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value given to `name`, if it is given (the last, if twice).
    pub fn value(&self, name: &str) -> Option<&str> {
        self.get(name)
    }

    /// The MITM proxy's certificate checks are turned off.
    pub fn ssl_insecure(&self) -> bool {
        self.get(SSL_INSECURE).is_some()
    }

    /// `name` is set to what the egress component reads as on (its
    /// `IsTruthy`): `1`, `true`, `yes`, `y` or `on`, trimmed, in any case.
    pub fn truthy(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| {
            let v = v.trim();
            ["1", "true", "yes", "y", "on"]
                .iter()
                .any(|t| v.eq_ignore_ascii_case(t))
        })
    }
}

/// Why the annotation is refused: the end of a sentence that starts with
/// the annotation key.
pub(crate) fn parse(raw: &str) -> Result<EgressEnv, String> {
    const SHAPE: &str =
        "is not a JSON object of strings, such as {\"OPENSANDBOX_EGRESS_LOG_LEVEL\": \"debug\"}";
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(raw) else {
        return Err(SHAPE.to_owned());
    };
    entries(map).map(|entries| EgressEnv { entries })
}

fn entries(map: Map<String, Value>) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::with_capacity(map.len());
    for (key, value) in map {
        if !ALLOWED.contains(&key.as_str()) {
            return Err(format!(
                "sets {}, which a pod may not set on the egress sidecar; the permitted keys are {}",
                quoted(&clip(&key)),
                ALLOWED.join(", ")
            ));
        }
        let value = match value {
            Value::String(s) => s,
            Value::Null => String::new(),
            _ => {
                return Err(format!(
                    "sets {key} to a value that is not a string; quote it (or use null for an empty value)"
                ));
            }
        };
        out.push((key, value));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_keys_in_their_order_null_as_empty() {
        let env = parse(
            r#"{"OPENSANDBOX_EGRESS_LOG_LEVEL": "debug", "OPENSANDBOX_EGRESS_DENY_WEBHOOK": null,
                "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT": "true"}"#,
        )
        .unwrap();
        assert_eq!(
            env.entries,
            [
                ("OPENSANDBOX_EGRESS_LOG_LEVEL".into(), "debug".into()),
                ("OPENSANDBOX_EGRESS_DENY_WEBHOOK".into(), String::new()),
                (TRANSPARENT.into(), "true".into()),
            ]
        );
        assert!(env.truthy(TRANSPARENT) && !env.ssl_insecure());
        assert_eq!(env.value(TRANSPARENT), Some("true"));
        assert_eq!(parse("{}").unwrap(), EgressEnv::default());
        let off = parse(r#"{"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT": "false"}"#).unwrap();
        assert!(!off.truthy(TRANSPARENT));
        for on in ["1", " TRUE ", "yes", "Y", "on"] {
            let env = parse(&format!(r#"{{"{TRANSPARENT}": "{on}"}}"#)).unwrap();
            assert!(env.truthy(TRANSPARENT), "{on}");
        }
        let insecure = parse(r#"{"OPENSANDBOX_EGRESS_MITMPROXY_SSL_INSECURE": "1"}"#).unwrap();
        assert!(insecure.ssl_insecure());
    }

    /// opensandbox-server 1.1.1 added one key to its allowlist; a pod the
    /// server admits with it is admitted here too.
    /// contract: egress.extra-env-allowlist
    #[test]
    fn the_allowlist_is_upstreams_as_of_1_1_1() {
        let key = "OPENSANDBOX_EGRESS_CREDENTIAL_VAULT_REQUIRE_SCOPED_MATCH";
        let env = parse(&format!(r#"{{"{key}": "true"}}"#)).unwrap();
        assert_eq!(env.entries, [(key.to_owned(), "true".to_owned())]);
        assert_eq!(ALLOWED.len(), 11);
    }

    #[test]
    fn every_other_key_or_value_is_refused_naming_it() {
        for (raw, says) in [
            ("[]", "not a JSON object"),
            ("{bad", "not a JSON object"),
            (r#""x""#, "not a JSON object"),
            (
                r#"{"OPENSANDBOX_EGRESS_RULES": "{}"}"#,
                "sets \"OPENSANDBOX_EGRESS_RULES\", which a pod may not set",
            ),
            (
                r#"{"OPENSANDBOX_EGRESS_TOKEN": "t"}"#,
                "\"OPENSANDBOX_EGRESS_TOKEN\"",
            ),
            (
                r#"{"OPENSANDBOX_EGRESS_MODE": "dns"}"#,
                "\"OPENSANDBOX_EGRESS_MODE\"",
            ),
            (r#"{"OPENSANDBOX_EGRESS_SANDBOX_ID": "x"}"#, "SANDBOX_ID"),
            (r#"{"HTTP_PROXY": "http://x"}"#, "\"HTTP_PROXY\""),
            (
                r#"{"opensandbox_egress_log_level": "x"}"#,
                "opensandbox_egress_log_level",
            ),
            (
                r#"{"OPENSANDBOX_EGRESS_LOG_LEVEL": 3}"#,
                "sets OPENSANDBOX_EGRESS_LOG_LEVEL to a value that is not a string",
            ),
            (r#"{"OPENSANDBOX_EGRESS_LOG_LEVEL": ["a"]}"#, "not a string"),
        ] {
            let e = parse(raw).unwrap_err();
            assert!(e.contains(says), "{raw}: {e}");
        }
        let e = parse(r#"{"X": "1"}"#).unwrap_err();
        for key in ALLOWED {
            assert!(e.contains(key), "{e}");
        }
    }
}
