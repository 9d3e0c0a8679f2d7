//! The `<prefix>/egress-env` annotation (contract: egress.extra-env-allowlist):
//! extra environment for the egress sidecar, from upstream OpenSandbox's
//! allowlist only. The sidecar holds `NET_ADMIN` and the pod's egress rules, so
//! a pod may tune it (log level, timeouts, the MITM proxy's extra ports) but
//! never set what the webhook sets (`RULES`, `MODE`, `TOKEN`, `SANDBOX_ID`) or
//! anything else it reads.

use serde_json::{Map, Value};

use crate::json::error::quoted;
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
    POLICY_FILE,
];

/// The file the sidecar loads its policy from when it starts (over its
/// `OPENSANDBOX_EGRESS_RULES`) and saves each policy change to.
pub(crate) const POLICY_FILE: &str = "OPENSANDBOX_EGRESS_POLICY_FILE";

/// Where code in the sandbox can write, as the sidecar sees its own
/// filesystem: the binary volume both mount (`/opt/opensandbox`), what the
/// runtime shares across the pod's containers (`/dev/shm`; `/etc/hosts`,
/// `/etc/hostname` and `/etc/resolv.conf`, one writable file each for the
/// whole pod) and `/proc` (another process's root is
/// `/proc/<pid>/root` once the pod shares its process namespace). `/dev`
/// and `/sys` hold nothing the sidecar should take a policy from either.
const SANDBOX_WRITES: [(&str, &str); 7] = [
    (
        "/opt/opensandbox",
        "under /opt/opensandbox, the volume the sandbox container mounts and writes",
    ),
    ("/dev", "under /dev, whose shm the pod's containers share"),
    (
        "/proc",
        "under /proc, through which shared processes reach other containers' files",
    ),
    ("/sys", "under /sys, which is no place for a policy"),
    (
        "/etc/hosts",
        "a file every container of the pod shares and may write",
    ),
    (
        "/etc/hostname",
        "a file every container of the pod shares and may write",
    ),
    (
        "/etc/resolv.conf",
        "a file every container of the pod shares and may write",
    ),
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

    /// `POLICY_FILE` when it points where code in the sandbox can write,
    /// and why that is (contract: egress.policy-file): the sidecar would
    /// load the sandbox's policy over the webhook's when it next starts.
    /// The path is read as the sidecar's `os.ReadFile` does, cleaned; an
    /// empty value means no file.
    pub fn writable_policy_file(&self) -> Option<(&str, &'static str)> {
        let path = self.get(POLICY_FILE)?;
        let trimmed = path.trim();
        if trimmed.is_empty() {
            return None;
        }
        if !trimmed.starts_with('/') {
            return Some((
                path,
                "a relative path, which lands wherever the sidecar's working directory is",
            ));
        }
        let clean = clean(trimmed);
        SANDBOX_WRITES
            .iter()
            .find(|(dir, _)| {
                clean == *dir || clean.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
            })
            .map(|(_, why)| (path, *why))
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

/// An absolute path cleaned as Go's `path.Clean` does: no empty or `.`
/// segments, `..` taking the one before it away (never above `/`).
fn clean(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    format!("/{}", segments.join("/"))
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
    fn a_policy_file_the_sandbox_can_write_is_found() {
        let file = |path: &str| {
            let raw = serde_json::json!({ POLICY_FILE: path }).to_string();
            parse(&raw)
                .unwrap()
                .writable_policy_file()
                .map(|(_, why)| why)
        };
        for own in [
            "",
            "  ",
            "/var/lib/egress/policy.json",
            "/etc/egress/policy.json",
            "/opt/opensandboxx/p.json",
            "/etc/hosts.d/p",
            "/tmp/p.json",
        ] {
            assert_eq!(file(own), None, "{own:?}");
        }
        for (shared, says) in [
            ("/opt/opensandbox/policy.json", "/opt/opensandbox"),
            ("/opt/opensandbox", "/opt/opensandbox"),
            ("//opt/./opensandbox/p", "/opt/opensandbox"),
            ("/var/../opt/opensandbox/p", "/opt/opensandbox"),
            ("/../../opt/opensandbox/p", "/opt/opensandbox"),
            (" /opt/opensandbox/p ", "/opt/opensandbox"),
            ("/dev/shm/p", "/dev"),
            ("/proc/1/root/tmp/p", "/proc"),
            ("/etc/hosts", "every container"),
            ("/etc//resolv.conf", "every container"),
            ("policy.json", "relative"),
            ("./opt/opensandbox/p", "relative"),
        ] {
            let why = file(shared).unwrap_or_else(|| panic!("{shared:?} is writable"));
            assert!(why.contains(says), "{shared:?}: {why}");
        }
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
