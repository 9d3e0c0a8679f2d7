//! The egress-control sidecar (contract: egress.container), added only when the
//! pod carries a network policy.

use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::config::{Config, EgressMode, UpstreamProxy};

use super::held;
use super::owned::{At, EGRESS, List, Owned};
use super::probe::{API_PORT, AUTH_HEADER, Probe, READY_FAILURES, STARTUP_FAILURES};
use super::run_as::{PodUser, RunAs};
use super::upstream::{self, CA_MOUNT, CaVolume, Env};
use crate::mutate::context::Context;
use crate::mutate::denial::Denial;
use crate::mutate::intent::Intent;
use crate::mutate::intent::egress_env;
use crate::mutate::read::k8s::{BIN, EnvVar, KnownEnv, MITM_ENV};
use crate::mutate::read::pod::{ContainerView, PodView, SpecView};

const RULES_ENV: &str = KnownEnv::EgressRules.name();
const MODE_ENV: &str = "OPENSANDBOX_EGRESS_MODE";
const OTLP_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const SANDBOX_ID_ENV: &str = "OPENSANDBOX_EGRESS_SANDBOX_ID";
const TOKEN_ENV: &str = KnownEnv::EgressToken.name();

/// With a network policy, no container but the sidecar may be able to
/// undo its rules: every container shares the pod's network namespace, so
/// a privileged one, or one that adds `NET_ADMIN`, `NET_RAW` or `ALL`,
/// could rewrite them whichever list it is in. The webhook's own containers
/// (`owned`) are left to `layout`, which makes them exactly its own.
/// `SYS_ADMIN` alone is allowed: it cannot change the sidecar's rules, and
/// execd's isolated sessions need it.
pub(crate) fn check_privileges(
    spec: &SpecView<'_>,
    owned: Owned,
    policy_key: &str,
) -> Result<(), Denial> {
    for (list, containers) in [
        (List::Init, spec.init_containers()),
        (List::Main, spec.containers()),
    ] {
        for (index, c) in containers.iter().enumerate() {
            if !owned.holds(At { list, index }) {
                check_container(c, list.noun(), policy_key)?;
            }
        }
    }
    Ok(())
}

/// The sidecar needs the iptables nat table; a runtime without it (gVisor)
/// would leave the pod never ready (contract: egress.runtime-class).
pub(crate) fn check_runtime(spec: &SpecView<'_>, config: &Config) -> Result<(), Denial> {
    match spec.runtime_class_name.as_deref() {
        Some(runtime)
            if config
                .egress
                .incompatible_runtime_classes
                .iter()
                .any(|r| r == runtime) =>
        {
            Err(Denial::IncompatibleRuntime {
                runtime: runtime.to_owned(),
                key: config.keys().network_policy.clone(),
            })
        }
        _ => Ok(()),
    }
}

/// One container (`noun` says of which list) beside a policy: neither
/// privileged nor adding a capability that could undo the sidecar's rules,
/// in any spelling a runtime reads as one.
pub(crate) fn check_container(
    c: &ContainerView<'_>,
    noun: &'static str,
    policy_key: &str,
) -> Result<(), Denial> {
    if c.security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false)
    {
        return Err(Denial::PrivilegedWithPolicy {
            list: noun,
            container: c.name.to_string(),
            key: policy_key.to_owned(),
        });
    }
    let added = c.capabilities().and_then(|caps| caps.add.as_ref());
    if let Some(named) = added.and_then(|caps| caps.first_net) {
        return Err(Denial::NetCapabilityWithPolicy {
            list: noun,
            container: c.name.to_string(),
            capability: named.capability(),
            unusual: named.unusual,
            key: policy_key.to_owned(),
        });
    }
    Ok(())
}

/// The egress token the sidecar is given (contract: egress.token,
/// egress.token-kept): a token already in the pod is never replaced.
#[derive(Debug)]
enum Token<'a> {
    /// From the pod's `<prefix>/egress-auth-token` annotation.
    Given(&'a str),
    /// From the sidecar the pod holds (its env, else its probe header):
    /// the control plane that built it knows it, though the pod may not
    /// carry the annotation (agent-sandbox pods of OpenSandbox's server).
    Held(String),
    /// Made for this pod; it goes into that annotation too.
    New(String),
}

/// The sidecar a pod still needs: everything its container is made from.
#[derive(Debug)]
pub(crate) struct Sidecar<'a> {
    image: &'a str,
    rules: &'a str,
    mode: EgressMode,
    otlp_endpoint: Option<&'a str>,
    upstream: Option<&'a UpstreamProxy>,
    /// `OPENSANDBOX_EGRESS_SANDBOX_ID`: the pod's `<prefix>/id` label.
    sandbox_id: &'a str,
    credential_proxy: bool,
    token: Token<'a>,
    /// The pod's `<prefix>/egress-env` entries, in their order.
    extra_env: &'a [(String, String)],
    resources: Option<&'a Value>,
    /// A native sidecar (an init container that keeps running).
    pub native: bool,
    /// Root, said explicitly, when the pod asks for a non-root user.
    run_as: RunAs,
}

/// The sidecar this pod gets: `None` without a network policy. Built
/// whether or not the pod holds one already, which `layout` checks against
/// it; `owned` says where the pod holds one, whose token is kept.
pub(crate) fn plan<'a>(
    pod: &PodView<'_>,
    owned: Owned,
    intent: &'a Intent,
    ctx: &Context<'a>,
) -> Result<Option<Sidecar<'a>>, Denial> {
    let spec = pod.spec();
    let config = ctx.config;
    let Some(policy) = intent.policy.as_ref() else {
        return Ok(None);
    };
    let image = config
        .egress
        .image
        .as_deref()
        .ok_or_else(|| Denial::NoEgressImage {
            key: config.keys().network_policy.clone(),
        })?;
    let token = token_for(pod, owned, intent, ctx)?;
    Ok(Some(Sidecar {
        image,
        rules: &policy.json,
        mode: intent.mode(config),
        otlp_endpoint: config.egress.otlp_endpoint.as_deref(),
        upstream: config.egress.upstream_proxy.as_ref(),
        sandbox_id: &intent.sandbox_id,
        credential_proxy: intent.credential_proxy,
        token,
        extra_env: intent
            .egress_env
            .as_ref()
            .map_or(&[][..], |e| e.entries.as_slice()),
        resources: config.egress.resources.as_ref(),
        native: config.egress.native_sidecar,
        run_as: PodUser::of(spec).for_root(),
    }))
}

/// The pod's own token (its annotation's, else its sidecar's), or a new
/// one. The sidecar is read again only when the pod holds one and no
/// annotation.
fn token_for<'a>(
    pod: &PodView<'_>,
    owned: Owned,
    intent: &'a Intent,
    ctx: &Context<'_>,
) -> Result<Token<'a>, Denial> {
    if let Some(t) = &intent.egress_token {
        return Ok(Token::Given(t));
    }
    let held = owned
        .sidecar
        .and_then(|at| held::container(pod, at))
        .and_then(|c| held::token(&c));
    Ok(match held {
        Some(t) => Token::Held(t),
        None => Token::New(ctx.tokens.token().map_err(Denial::TokenUnavailable)?),
    })
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
            strip_container_token(c, token);
        }
    }
}

/// [`strip_token`] on one sidecar container: its env var and both probes'
/// headers.
fn strip_container_token(c: &mut Value, token: &str) {
    let ours = |item: &Value, name: &str, field: &str| item["name"] == name && item[field] == token;
    if let Some(env) = c.get_mut("env").and_then(Value::as_array_mut) {
        env.retain(|e| !ours(e, TOKEN_ENV, "value"));
    }
    for probe in ["/readinessProbe/httpGet", "/startupProbe/httpGet"] {
        let Some(get) = c.pointer_mut(probe).and_then(Value::as_object_mut) else {
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

impl Token<'_> {
    fn new_token(&self) -> Option<&str> {
        match self {
            Token::New(t) => Some(t),
            Token::Given(_) | Token::Held(_) => None,
        }
    }

    fn get(&self) -> &str {
        match self {
            Token::New(t) | Token::Held(t) => t,
            Token::Given(t) => t,
        }
    }
}

impl<'a> Sidecar<'a> {
    /// A token made for this pod, to be written to its annotation.
    pub fn new_token(&self) -> Option<&str> {
        self.token.new_token()
    }

    /// `OPENSANDBOX_EGRESS_RULES`: the normalized policy, as compact JSON.
    pub fn rules(&self) -> &str {
        self.rules
    }

    /// The upstream proxy's CA volume the pod needs beside it, if any.
    pub fn ca_volume(&self) -> Option<CaVolume<'a>> {
        self.upstream.and_then(upstream::ca_volume)
    }

    /// `container` (this sidecar as JSON) without its token: what `inject`
    /// writes into a workload's template, where each pod gets its own token
    /// at admission.
    pub fn tokenless(&self, container: &Value) -> Value {
        let mut c = container.clone();
        strip_container_token(&mut c, self.token.get());
        c
    }

    /// The sidecar container, in the shape the `OpenSandbox` provider gives it.
    fn container(&self) -> Container<'_> {
        fn push<'v>(env: &mut Vec<Env<'v>>, name: &'static str, value: &'v str) {
            env.push(Env::Value(EnvVar { name, value }));
        }
        let token = self.token.get();
        let mut env = Vec::with_capacity(9 + self.extra_env.len());
        push(&mut env, RULES_ENV, self.rules);
        push(&mut env, MODE_ENV, self.mode.as_str());
        if let Some(endpoint) = self.otlp_endpoint {
            push(&mut env, OTLP_ENV, endpoint);
        }
        if let Some(proxy) = self.upstream {
            upstream::env(proxy, &mut env);
        }
        push(&mut env, SANDBOX_ID_ENV, self.sandbox_id);
        if self.credential_proxy {
            push(&mut env, MITM_ENV, "true");
        }
        push(&mut env, TOKEN_ENV, token);
        env.extend(
            self.extra_env
                .iter()
                // The credential proxy sets it already.
                .filter(|(name, _)| !(self.credential_proxy && name == egress_env::TRANSPARENT))
                .map(|(name, value)| Env::Value(EnvVar { name, value })),
        );
        let volume_mounts = SidecarMounts {
            ca: self.ca_volume().is_some(),
        };
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
            readiness_probe: Probe::healthz(token, READY_FAILURES),
            // A native sidecar counts as started, and the kubelet starts the
            // next init container and then the app, once this succeeds:
            // the sidecar answers /healthz only once its rules are in place
            // (contract: egress.startup-probe). Without it the app would
            // start as soon as the sidecar's process did.
            startup_probe: self.native.then(|| Probe::healthz(token, STARTUP_FAILURES)),
            volume_mounts,
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
    env: Vec<Env<'a>>,
    security_context: SecurityContext,
    ports: [Port; 1],
    readiness_probe: Probe<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    startup_probe: Option<Probe<'a>>,
    /// The binary volume always (the sidecar writes its MITM CA there for
    /// bootstrap.sh), then the upstream proxy's CA bundle when there is one.
    volume_mounts: SidecarMounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    restart_policy: Option<&'static str>,
}

/// The sidecar's `volumeMounts`: the binary volume, and the CA bundle's
/// when `ca`.
#[derive(Debug)]
struct SidecarMounts {
    ca: bool,
}

impl Serialize for SidecarMounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(Some(1 + usize::from(self.ca)))?;
        seq.serialize_element(&BIN)?;
        if self.ca {
            seq.serialize_element(&CA_MOUNT)?;
        }
        seq.end()
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_order_and_native_placement() {
        let extra = [
            (egress_env::TRANSPARENT.to_owned(), "true".to_owned()),
            (
                "OPENSANDBOX_EGRESS_LOG_LEVEL".to_owned(),
                "debug".to_owned(),
            ),
        ];
        let c = serde_json::to_value(Sidecar {
            image: "img",
            rules: "{}",
            mode: EgressMode::DnsNft,
            otlp_endpoint: Some("http://otel:4318"),
            upstream: None,
            sandbox_id: "sb-1",
            credential_proxy: true,
            token: Token::Given("tok"),
            extra_env: &extra,
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
        // The contract's order (egress.env-order); the pod's MITM setting is
        // the credential proxy's already.
        assert_eq!(
            names,
            [
                RULES_ENV,
                MODE_ENV,
                OTLP_ENV,
                SANDBOX_ID_ENV,
                MITM_ENV,
                TOKEN_ENV,
                "OPENSANDBOX_EGRESS_LOG_LEVEL"
            ]
        );
        assert_eq!(c["env"][3]["value"], "sb-1");
        assert_eq!(c["env"][2]["value"], "http://otel:4318");
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
        // Native: the app waits for the rules (contract: egress.startup-probe).
        assert_eq!(c["startupProbe"]["httpGet"], c["readinessProbe"]["httpGet"]);
        assert_eq!(c["startupProbe"]["periodSeconds"], 1);
        assert_eq!(c["startupProbe"]["failureThreshold"], STARTUP_FAILURES);
        let mut stripped = c.clone();
        strip_container_token(&mut stripped, "tok");
        for probe in ["readinessProbe", "startupProbe"] {
            assert!(
                stripped[probe]["httpGet"].get("httpHeaders").is_none(),
                "{probe}"
            );
        }
    }
}
