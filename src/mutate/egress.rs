//! The egress-control sidecar (SPEC 4.2), added only when the pod carries a
//! network policy.

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::config::EgressMode;

use super::context::Context;
use super::denial::Denial;
use super::intent::Intent;
use super::k8s::{BIN, EnvVar, KnownEnv, MITM_ENV, Mount};
use super::pod::{ContainerView, SpecView};

pub(crate) const EGRESS: &str = "egress";
const RULES_ENV: &str = KnownEnv::EgressRules.name();
const MODE_ENV: &str = "OPENSANDBOX_EGRESS_MODE";
const TOKEN_ENV: &str = "OPENSANDBOX_EGRESS_TOKEN";
const API_PORT: u16 = 18080;
const AUTH_HEADER: &str = "OPENSANDBOX-EGRESS-AUTH";

/// A container named `egress` that carries the sidecar's rules env var is
/// ours (or the layout of `OpenSandbox` itself) and is left alone.
fn is_sidecar(c: &ContainerView<'_>) -> bool {
    c.name == EGRESS && c.has_env(KnownEnv::EgressRules)
}

/// Whether the sidecar is already there (in either placement); an unrelated
/// container named `egress` is a conflict.
fn existing(spec: &SpecView<'_>) -> Result<bool, Denial> {
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
pub(crate) fn check_main(c: &ContainerView<'_>, policy_key: &str) -> Result<(), Denial> {
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
    let added = c.capabilities().and_then(|caps| caps.add.as_ref());
    if let Some(name) = added.and_then(|caps| caps.first_net) {
        return Err(Denial::NetCapabilityWithPolicy {
            container: c.name.to_string(),
            capability: name.to_owned(),
            key: policy_key.to_owned(),
        });
    }
    Ok(())
}

/// The egress token the sidecar is given.
#[derive(Debug)]
enum Token<'a> {
    /// From the pod's `<prefix>/egress-auth-token` annotation.
    Given(&'a str),
    /// Made for this pod; it goes into that annotation too.
    New(String),
}

/// The sidecar a pod still needs: everything its container is made from.
#[derive(Debug)]
pub(crate) struct Sidecar<'a> {
    image: &'a str,
    rules: &'a str,
    mode: EgressMode,
    credential_proxy: bool,
    token: Token<'a>,
    resources: Option<&'a Value>,
    /// A native sidecar (an init container that keeps running).
    pub native: bool,
}

/// The sidecar this pod still needs: `None` without a network policy or
/// when one is already there (in either placement).
pub(crate) fn plan<'a>(
    spec: &SpecView<'_>,
    intent: &'a Intent,
    ctx: &Context<'a>,
) -> Result<Option<Sidecar<'a>>, Denial> {
    let config = ctx.config;
    // A conflicting `egress` container is denied even without a policy.
    let present = existing(spec)?;
    let Some(policy) = intent.policy.as_ref().filter(|_| !present) else {
        return Ok(None);
    };
    let image = config
        .egress
        .image
        .as_deref()
        .ok_or_else(|| Denial::NoEgressImage {
            key: config.keys().network_policy.clone(),
        })?;
    let token = match &intent.egress_token {
        Some(t) => Token::Given(t),
        None => Token::New(ctx.tokens.token().map_err(Denial::TokenUnavailable)?),
    };
    Ok(Some(Sidecar {
        image,
        rules: &policy.json,
        mode: intent.egress_mode.unwrap_or(config.egress.mode),
        credential_proxy: intent.credential_proxy,
        token,
        resources: config.egress.resources.as_ref(),
        native: config.egress.native_sidecar,
    }))
}

impl Sidecar<'_> {
    /// A token made for this pod, to be written to its annotation.
    pub fn new_token(&self) -> Option<&str> {
        match &self.token {
            Token::New(t) => Some(t),
            Token::Given(_) => None,
        }
    }

    fn token(&self) -> &str {
        match &self.token {
            Token::New(t) => t,
            Token::Given(t) => t,
        }
    }

    /// The sidecar container, in the shape the `OpenSandbox` provider gives it.
    fn container(&self) -> Container<'_> {
        let token = self.token();
        let mut env = Vec::with_capacity(4);
        env.push(EnvVar {
            name: RULES_ENV,
            value: self.rules,
        });
        env.push(EnvVar {
            name: MODE_ENV,
            value: self.mode.as_str(),
        });
        if self.credential_proxy {
            env.push(EnvVar {
                name: MITM_ENV,
                value: "true",
            });
        }
        env.push(EnvVar {
            name: TOKEN_ENV,
            value: token,
        });
        Container {
            name: EGRESS,
            image: self.image,
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
                    http_headers: [HttpHeader {
                        name: AUTH_HEADER,
                        value: token,
                    }],
                },
                period_seconds: 1,
                failure_threshold: 30,
            },
            volume_mounts: self.credential_proxy.then_some([BIN]),
            resources: self.resources,
            restart_policy: self.native.then_some("Always"),
        }
    }
}

/// Serialized as its container, built on the spot from what it borrows.
impl Serialize for Sidecar<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.container().serialize(s)
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Container<'a> {
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
    http_headers: [HttpHeader<'a>; 1],
}

/// An `httpHeaders` item of a probe.
#[derive(Debug, Serialize)]
struct HttpHeader<'a> {
    name: &'static str,
    value: &'a str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_order_and_native_placement() {
        let c = serde_json::to_value(Sidecar {
            image: "img",
            rules: "{}",
            mode: EgressMode::DnsNft,
            credential_proxy: true,
            token: Token::Given("tok"),
            resources: None,
            native: true,
        })
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
