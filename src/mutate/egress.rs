//! The egress-control sidecar (SPEC 4.2), added only when the pod carries a
//! network policy.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde_json::Value;

use crate::config::EgressMode;

use super::Denial;
use super::execd::{EnvVar, MITM_ENV, Mount, bin_mount, same_capability};
use super::pod::{ContainerView, SpecView};

pub const EGRESS: &str = "egress";
pub const RULES_ENV: &str = "OPENSANDBOX_EGRESS_RULES";
const MODE_ENV: &str = "OPENSANDBOX_EGRESS_MODE";
const TOKEN_ENV: &str = "OPENSANDBOX_EGRESS_TOKEN";
const API_PORT: u16 = 18080;
const AUTH_HEADER: &str = "OPENSANDBOX-EGRESS-AUTH";

/// Where the egress token comes from when the pod has none: random in the
/// server, fixed in tests and reproducible CLI runs.
pub trait TokenSource: Send + Sync {
    fn token(&self) -> Result<String, String>;
}

/// 24 random bytes, URL-safe base64 without padding (32 characters).
pub struct RandomTokens;

impl TokenSource for RandomTokens {
    fn token(&self) -> Result<String, String> {
        let mut bytes = [0u8; 24];
        // No fallback: a predictable token would let anyone drive the sidecar.
        getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
        Ok(URL_SAFE_NO_PAD.encode(bytes))
    }
}

pub struct FixedToken(pub String);

impl TokenSource for FixedToken {
    fn token(&self) -> Result<String, String> {
        Ok(self.0.clone())
    }
}

/// A container named `egress` that carries the sidecar's rules env var is
/// ours (or OpenSandbox's own layout) and is left alone.
fn is_sidecar(c: &ContainerView<'_>) -> bool {
    c.name == EGRESS && c.has_env(RULES_ENV)
}

/// Whether the sidecar is already there (in either placement); an unrelated
/// container named `egress` is a conflict.
pub fn existing(spec: &SpecView<'_>) -> Result<bool, Denial> {
    for (list, containers) in [
        ("init container", spec.init_containers()),
        ("container", spec.containers()),
    ] {
        if let Some(c) = containers.iter().find(|c| c.name == EGRESS) {
            if !is_sidecar(c) {
                return Err(Denial::ReservedContainerName {
                    list,
                    name: EGRESS.to_owned(),
                });
            }
            return Ok(true);
        }
    }
    Ok(false)
}

/// The main container must not be able to undo the sidecar's rules.
pub fn check_main(c: &ContainerView<'_>, policy_key: &str) -> Result<(), Denial> {
    if c.security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false)
    {
        return Err(Denial::PrivilegedWithPolicy {
            container: c.name.to_string(),
            key: policy_key.to_owned(),
        });
    }
    let added = c
        .capabilities()
        .and_then(|caps| caps.add.as_deref())
        .unwrap_or_default();
    for cap in added {
        if let Some(name) = ["NET_ADMIN", "NET_RAW", "ALL"]
            .into_iter()
            .find(|w| same_capability(cap, w))
        {
            return Err(Denial::NetCapabilityWithPolicy {
                container: c.name.to_string(),
                capability: name.to_owned(),
                key: policy_key.to_owned(),
            });
        }
    }
    Ok(())
}

pub struct Sidecar<'a> {
    pub image: &'a str,
    pub rules: &'a str,
    pub mode: EgressMode,
    pub credential_proxy: bool,
    pub token: &'a str,
    pub resources: Option<&'a Value>,
    pub native: bool,
}

/// The sidecar container, in the shape OpenSandbox's own provider gives it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container<'a> {
    name: &'static str,
    image: &'a str,
    env: Vec<EnvVar<'a>>,
    security_context: SecurityContext,
    ports: [Port; 1],
    readiness_probe: Probe<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    volume_mounts: Option<[Mount; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restart_policy: Option<&'static str>,
}

#[derive(Debug, Serialize)]
struct SecurityContext {
    capabilities: Capabilities,
}

#[derive(Debug, Serialize)]
struct Capabilities {
    add: [&'static str; 1],
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Port {
    name: &'static str,
    container_port: u16,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Probe<'a> {
    http_get: HttpGet<'a>,
    period_seconds: u32,
    failure_threshold: u32,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct HttpGet<'a> {
    path: &'static str,
    port: u16,
    http_headers: [EnvVar<'a>; 1],
}

pub fn container<'a>(s: &Sidecar<'a>) -> Container<'a> {
    let mut env = Vec::with_capacity(4);
    env.push(EnvVar {
        name: RULES_ENV,
        value: s.rules,
    });
    env.push(EnvVar {
        name: MODE_ENV,
        value: s.mode.as_str(),
    });
    if s.credential_proxy {
        env.push(EnvVar {
            name: MITM_ENV,
            value: "true",
        });
    }
    env.push(EnvVar {
        name: TOKEN_ENV,
        value: s.token,
    });
    Container {
        name: EGRESS,
        image: s.image,
        env,
        security_context: SecurityContext {
            capabilities: Capabilities { add: ["NET_ADMIN"] },
        },
        ports: [Port {
            name: "egress-api",
            container_port: API_PORT,
        }],
        readiness_probe: Probe {
            http_get: HttpGet {
                path: "/healthz",
                port: API_PORT,
                // `{name, value}` is also the shape of an HTTP header.
                http_headers: [EnvVar {
                    name: AUTH_HEADER,
                    value: s.token,
                }],
            },
            period_seconds: 1,
            failure_threshold: 30,
        },
        volume_mounts: s.credential_proxy.then(|| [bin_mount()]),
        resources: s.resources,
        restart_policy: s.native.then_some("Always"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_tokens_are_32_url_safe_chars() {
        let a = RandomTokens.token().unwrap();
        let b = RandomTokens.token().unwrap();
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        );
    }

    #[test]
    fn env_order_and_native_placement() {
        let c = serde_json::to_value(container(&Sidecar {
            image: "img",
            rules: "{}",
            mode: EgressMode::DnsNft,
            credential_proxy: true,
            token: "tok",
            resources: None,
            native: true,
        }))
        .unwrap();
        let names: Vec<&str> = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, [RULES_ENV, MODE_ENV, MITM_ENV, TOKEN_ENV]);
        assert_eq!(c["restartPolicy"], "Always");
        assert_eq!(c["env"][1]["value"], "dns+nft");
        assert_eq!(c["volumeMounts"][0]["mountPath"], "/opt/opensandbox");
        assert!(c.get("command").is_none() && c.get("args").is_none());
        assert_eq!(
            c["readinessProbe"]["httpGet"]["httpHeaders"],
            serde_json::json!([{"name": AUTH_HEADER, "value": "tok"}])
        );
        assert_eq!(c["securityContext"]["capabilities"]["add"][0], "NET_ADMIN");
        assert_eq!(c["ports"][0]["containerPort"], API_PORT);
    }
}
