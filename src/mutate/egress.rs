//! The egress-control sidecar (SPEC 4.2), added only when the pod carries a
//! network policy.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::config::EgressMode;

use super::context::Context;
use super::denial::Denial;
use super::intent::Intent;
use super::k8s::{BIN, EnvVar, KnownEnv, MITM_ENV, Mount};
use super::patch::PatchBuilder;
use super::pod::{ContainerView, SpecView};
use super::run_as::{PodUser, RunAs};

pub(crate) const EGRESS: &str = "egress";
const RULES_ENV: &str = KnownEnv::EgressRules.name();
const MODE_ENV: &str = "OPENSANDBOX_EGRESS_MODE";
const TOKEN_ENV: &str = KnownEnv::EgressToken.name();
const API_PORT: u16 = 18080;
const AUTH_HEADER: &str = "OPENSANDBOX-EGRESS-AUTH";

/// A container named `egress` that carries the sidecar's rules env var is
/// ours (or the layout of `OpenSandbox` itself) and is left alone.
fn is_sidecar(c: &ContainerView<'_>) -> bool {
    c.name == EGRESS && c.has_env(KnownEnv::EgressRules)
}

/// Where the sidecar already is, if it is (in either placement): the list
/// (`initContainers` or `containers`), its index and its view. An unrelated
/// container named `egress` is a conflict.
fn existing<'s, 'a>(
    spec: &'s SpecView<'a>,
) -> Result<Option<(&'static str, usize, &'s ContainerView<'a>)>, Denial> {
    for (list, field, containers) in [
        ("init container", "initContainers", spec.init_containers()),
        ("container", "containers", spec.containers()),
    ] {
        if let Some((at, c)) = containers
            .iter()
            .enumerate()
            .find(|(_, c)| c.name == EGRESS)
        {
            if !is_sidecar(c) {
                return Err(Denial::ReservedContainerName {
                    list,
                    name: EGRESS.to_owned(),
                });
            }
            return Ok(Some((field, at, c)));
        }
    }
    Ok(None)
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
    /// Root, said explicitly, when the pod asks for a non-root user.
    run_as: RunAs,
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
    let present = existing(spec)?.is_some();
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
    let token = token_for(intent, ctx)?;
    Ok(Some(Sidecar {
        image,
        rules: &policy.json,
        mode: intent.egress_mode.unwrap_or(config.egress.mode),
        credential_proxy: intent.credential_proxy,
        token,
        resources: config.egress.resources.as_ref(),
        native: config.egress.native_sidecar,
        run_as: PodUser::of(spec).for_root(),
    }))
}

/// The pod's own token, or a new one.
fn token_for<'a>(intent: &'a Intent, ctx: &Context<'_>) -> Result<Token<'a>, Denial> {
    Ok(match &intent.egress_token {
        Some(t) => Token::Given(t),
        None => Token::New(ctx.tokens.token().map_err(Denial::TokenUnavailable)?),
    })
}

/// A sidecar that is there but has no token yet: the one `inject` writes
/// into a workload's pod template, where a token would be shared by every
/// replica. Each pod gets its own at admission: the token env var, the
/// readiness probe's header, and the annotation (SPEC 4.2).
#[derive(Debug)]
pub(crate) struct TokenCompletion<'a> {
    /// `initContainers` or `containers`, and the index there.
    list: &'static str,
    index: usize,
    token: Token<'a>,
    /// Whether the probe's `httpHeaders` list exists; `None` when the
    /// sidecar has no `httpGet` readiness probe or its header is there.
    header_list: Option<bool>,
}

/// What a present sidecar without `OPENSANDBOX_EGRESS_TOKEN` still needs;
/// `None` for no sidecar or one with its token.
pub(crate) fn complete<'a>(
    spec: &SpecView<'_>,
    intent: &'a Intent,
    ctx: &Context<'_>,
) -> Result<Option<TokenCompletion<'a>>, Denial> {
    let Some((list, index, c)) = existing(spec)? else {
        return Ok(None);
    };
    if c.has_env(KnownEnv::EgressToken) {
        return Ok(None);
    }
    let header_list = c
        .readiness_probe
        .and_then(|raw| serde_json::from_str::<ProbeView>(raw.get()).ok())
        .and_then(|probe| probe.http_get)
        .and_then(|get| match get.http_headers {
            None => Some(false),
            Some(headers) if headers.iter().any(|h| h.name == AUTH_HEADER) => None,
            Some(_) => Some(true),
        });
    Ok(Some(TokenCompletion {
        list,
        index,
        token: token_for(intent, ctx)?,
        header_list,
    }))
}

/// The parts of a readiness probe the completion reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", remote = "Self")]
struct ProbeView {
    http_get: Option<HttpGetView>,
}

objects_only! {
    impl<'de> for ProbeView;
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", remote = "Self")]
struct HttpGetView {
    http_headers: Option<Vec<HeaderView>>,
}

objects_only! {
    impl<'de> for HttpGetView;
}

#[derive(Deserialize)]
#[serde(remote = "Self")]
struct HeaderView {
    #[serde(default)]
    name: String,
}

objects_only! {
    impl<'de> for HeaderView;
}

impl TokenCompletion<'_> {
    /// A token made for this pod, to be written to its annotation.
    pub fn new_token(&self) -> Option<&str> {
        self.token.new_token()
    }

    /// The token env var and probe header. Written before any init
    /// container is inserted, so `index` is still the sidecar's.
    pub fn write(&self, patch: &mut PatchBuilder) {
        let index = self.index.to_string();
        let c = ["spec", self.list, index.as_str()];
        let value = self.token.get();
        patch.add(
            &[c[0], c[1], c[2], "env", "-"],
            &EnvVar {
                name: TOKEN_ENV,
                value,
            },
        );
        let header = HttpHeader {
            name: AUTH_HEADER,
            value,
        };
        let at = [c[0], c[1], c[2], "readinessProbe", "httpGet", "httpHeaders"];
        match self.header_list {
            Some(true) => patch.add(&[at[0], at[1], at[2], at[3], at[4], at[5], "-"], &header),
            Some(false) => patch.add(&at, &[header]),
            None => {}
        }
    }
}

/// Takes out of a pod (or template) what [`complete`] or the sidecar added
/// for `token`: its env var and probe header. `inject` does this on a
/// workload's template, whose pods each get their own token at admission.
pub fn strip_token(pod: &mut Value, token: &str) {
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod
            .pointer_mut(&format!("/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for c in containers.iter_mut().filter(|c| c["name"] == EGRESS) {
            let ours = |item: &Value, name: &str, field: &str| {
                item["name"] == name && item[field] == token
            };
            if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
                env.retain(|e| !ours(e, TOKEN_ENV, "value"));
            }
            let Some(get) = c
                .pointer_mut("/readinessProbe/httpGet")
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            if let Some(headers) = get.get_mut("httpHeaders").and_then(Value::as_array_mut) {
                headers.retain(|h| !ours(h, AUTH_HEADER, "value"));
                if headers.is_empty() {
                    get.remove("httpHeaders");
                }
            }
        }
    }
}

impl Token<'_> {
    fn new_token(&self) -> Option<&str> {
        match self {
            Token::New(t) => Some(t),
            Token::Given(_) => None,
        }
    }

    fn get(&self) -> &str {
        match self {
            Token::New(t) => t,
            Token::Given(t) => t,
        }
    }
}

impl Sidecar<'_> {
    /// A token made for this pod, to be written to its annotation.
    pub fn new_token(&self) -> Option<&str> {
        self.token.new_token()
    }

    /// The sidecar container, in the shape the `OpenSandbox` provider gives it.
    fn container(&self) -> Container<'_> {
        let token = self.token.get();
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
                run_as: self.run_as,
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
    #[serde(flatten)]
    run_as: RunAs,
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
            run_as: RunAs::default(),
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
