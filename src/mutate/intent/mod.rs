//! What the pod asks for, read from its `<prefix>/*` annotations (contract:
//! intent.malformed-denied). Every annotation is validated up front: a
//! malformed value is a denial, never silently ignored, even when another
//! annotation makes it moot.

pub(crate) mod egress_env;
pub(crate) mod expires_at;
pub(crate) mod lifecycle;
pub(crate) mod platform;
pub(crate) mod policy;
pub(crate) mod token;
pub(crate) mod typo;

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;

use crate::config::{Config, EgressMode, Keys};
use crate::duration::DurationError;

use self::egress_env::EgressEnv;
use self::expires_at::parse_expires_at;
use self::platform::{Platform, PlatformError};
use self::policy::{NetworkPolicy, PolicyError};
use self::token::is_egress_token;
use crate::json::text::Text;
use crate::mutate::quote::clip;
use crate::mutate::read::pod::PodView;

#[derive(Debug, Default)]
pub(crate) struct Intent {
    pub platform: Option<Platform>,
    pub timeout: Option<u64>,
    /// The pod's own `expires-at`, parsed.
    pub expires_at: Option<DateTime<Utc>>,
    pub policy: Option<NetworkPolicy>,
    pub egress_mode: Option<EgressMode>,
    pub credential_proxy: bool,
    pub entrypoint: Option<Vec<String>>,
    pub main_container: Option<String>,
    pub egress_token: Option<String>,
    /// The pod's `<prefix>/id` label: `OPENSANDBOX_ID` and
    /// `OPENSANDBOX_EGRESS_SANDBOX_ID`.
    pub sandbox_id: String,
    /// `<prefix>/egress-env`, checked against the allowlist.
    pub egress_env: Option<EgressEnv>,
    /// `<prefix>/execd-isolation: "enable"`, allowed by the configuration.
    pub isolation: bool,
    /// `<prefix>/lifecycle` as `OPENSANDBOX_LIFECYCLE`'s value.
    pub lifecycle: Option<String>,
}

impl Intent {
    /// The egress mode the sidecar gets: the pod's, else the configured one.
    pub fn mode(&self, config: &Config) -> EgressMode {
        self.egress_mode.unwrap_or(config.egress.mode)
    }

    /// What the main container is told of the transparent MITM proxy
    /// (contract: execd.env-mitm): `true` with the credential proxy, else
    /// the value `<prefix>/egress-env` gives the sidecar, as upstream does.
    pub fn mitm(&self) -> Option<&str> {
        if self.credential_proxy {
            return Some("true");
        }
        self.egress_env
            .as_ref()
            .and_then(|e| e.value(egress_env::TRANSPARENT))
    }
}

/// Why the annotations cannot be read. `Denial` words each as the variant of
/// the same name (denial.rs), so the sentences live in one place.
#[derive(Debug)]
pub(crate) enum IntentError {
    MalformedAnnotation {
        key: String,
        problem: String,
    },
    Platform(PlatformError),
    Policy {
        key: String,
        source: PolicyError,
    },
    CredentialProxyWithoutPolicy {
        key: String,
        policy_key: String,
    },
    /// An annotation that only the egress sidecar reads, without a policy.
    WithoutPolicy {
        key: String,
        policy_key: String,
    },
    CredentialProxyNeedsNft {
        key: String,
        mode_key: String,
        mode: EgressMode,
    },
    SslInsecureWithCredentialProxy {
        key: String,
        credential_key: String,
    },
    IsolationNotAllowed {
        key: String,
    },
    /// `<prefix>/egress-mode: dns` while an upstream proxy is configured.
    UpstreamProxyNeedsNft {
        mode_key: String,
    },
    /// `MITMPROXY_SSL_INSECURE` turned on while an upstream proxy is
    /// configured.
    UpstreamProxySslInsecure {
        key: String,
    },
    /// A policy without the transparent MITM proxy, which alone chains to
    /// the configured upstream proxy.
    UpstreamProxyNeedsTransparent {
        policy_key: String,
        credential_key: String,
        env_key: String,
    },
    MalformedLabel {
        key: String,
    },
    /// A timeout too long to count in seconds, as the message shows it.
    TimeoutOutOfRange {
        key: String,
        shown: String,
    },
    /// `<prefix>/egress-env` points the sidecar's policy file where code in
    /// the sandbox can write.
    PolicyFileWritable {
        key: String,
        path: String,
        why: &'static str,
    },
}

/// `Ok(None)` when the pod opted out with `<prefix>/inject: "false"`.
pub(crate) fn read(pod: &PodView<'_>, config: &Config) -> Result<Option<Intent>, IntentError> {
    let keys = config.keys();
    let get = |key: &str| string_annotation(pod, key);

    if let Some(inject) = get(&keys.inject)? {
        match parse_bool(&inject) {
            Some(false) => return Ok(None),
            Some(true) => {}
            None => return Err(malformed(&keys.inject, bool_problem(&inject))),
        }
    }

    let mut intent = Intent::default();

    if let Some(value) = get(&keys.platform)? {
        intent.platform = Some(Platform::parse(&value).map_err(|e| match e {
            PlatformError::Shape(_) => malformed(&keys.platform, e.to_string()),
            other => IntentError::Platform(other),
        })?);
    }

    if let Some(value) = get(&keys.timeout)? {
        intent.timeout = Some(
            crate::duration::parse_seconds(&value)
                .map_err(|e| timeout_error(&e, &value, &keys.timeout))?,
        );
    }

    if let Some(value) = get(&keys.expires_at)? {
        let Some(at) = parse_expires_at(&value) else {
            return Err(malformed(
                &keys.expires_at,
                format!(
                    "is '{}'; use an RFC 3339 time such as 2026-01-02T15:04:05Z",
                    clip(&value)
                ),
            ));
        };
        intent.expires_at = Some(at);
    }

    if let Some(value) = get(&keys.network_policy)? {
        let parsed = policy::parse(&value, config.egress.max_rules);
        intent.policy = Some(parsed.map_err(|source| IntentError::Policy {
            key: keys.network_policy.clone(),
            source,
        })?);
    }

    if let Some(value) = get(&keys.egress_mode)? {
        intent.egress_mode = Some(EgressMode::parse(&value).ok_or_else(|| {
            malformed(
                &keys.egress_mode,
                format!("is '{}'; use \"dns\" or \"dns+nft\"", clip(&value)),
            )
        })?);
    }

    if let Some(value) = get(&keys.credential_proxy)? {
        intent.credential_proxy = parse_bool(&value)
            .ok_or_else(|| malformed(&keys.credential_proxy, bool_problem(&value)))?;
        if intent.credential_proxy && intent.policy.is_none() {
            return Err(IntentError::CredentialProxyWithoutPolicy {
                key: keys.credential_proxy.clone(),
                policy_key: keys.network_policy.clone(),
            });
        }
    }

    read_command(&mut intent, &get, keys)?;

    intent.sandbox_id = match pod.label(&keys.id).map(decode_string) {
        Some(Ok(Some(id))) => id.into_owned(),
        // `select` admits only pods that carry the label.
        None => String::new(),
        Some(_) => {
            return Err(IntentError::MalformedLabel {
                key: keys.id.clone(),
            });
        }
    };

    read_sidecar_env(&mut intent, &get, config)?;

    if let Some(value) = get(&keys.execd_isolation)? {
        if value != "enable" {
            return Err(malformed(
                &keys.execd_isolation,
                format!("is '{}'; the only value is \"enable\"", clip(&value)),
            ));
        }
        if !config.execd.allow_isolation {
            return Err(IntentError::IsolationNotAllowed {
                key: keys.execd_isolation.clone(),
            });
        }
        intent.isolation = true;
    }

    if let Some(value) = get(&keys.lifecycle)? {
        intent.lifecycle =
            Some(lifecycle::parse(&value).map_err(|problem| malformed(&keys.lifecycle, problem))?);
    }

    if let Some(value) = get(&keys.egress_auth_token)? {
        if !is_egress_token(&value) {
            return Err(malformed(
                &keys.egress_auth_token,
                "must be a non-empty string of visible ASCII characters; remove it to have one generated",
            ));
        }
        intent.egress_token = Some(value.into_owned());
    }

    Ok(Some(intent))
}

/// `<prefix>/entrypoint` and `<prefix>/main-container`: what runs, and in
/// which container.
fn read_command<'a>(
    intent: &mut Intent,
    get: &impl Fn(&str) -> Result<Option<Cow<'a, str>>, IntentError>,
    keys: &Keys,
) -> Result<(), IntentError> {
    if let Some(value) = get(&keys.entrypoint)? {
        let entrypoint: Vec<String> = serde_json::from_str(&value).map_err(|_| {
            malformed(
                &keys.entrypoint,
                "is not a JSON array of strings; use a value such as [\"python\", \"app.py\"]",
            )
        })?;
        if entrypoint.is_empty() {
            return Err(malformed(
                &keys.entrypoint,
                "is an empty array; give the command to run, such as [\"python\", \"app.py\"]",
            ));
        }
        intent.entrypoint = Some(entrypoint);
    }

    if let Some(value) = get(&keys.main_container)? {
        if value.trim().is_empty() {
            return Err(malformed(
                &keys.main_container,
                "is empty; name a container of spec.containers",
            ));
        }
        intent.main_container = Some(value.trim().to_owned());
    }
    Ok(())
}

/// `<prefix>/egress-env` and what the credential proxy asks of the
/// sidecar's settings (contract: intent.credential-proxy-needs-policy,
/// egress.extra-env-needs-policy): both configure a sidecar, so both
/// need a policy, and a credential proxy needs `dns+nft` and certificate
/// checks.
fn read_sidecar_env<'a>(
    intent: &mut Intent,
    get: &impl Fn(&str) -> Result<Option<Cow<'a, str>>, IntentError>,
    config: &Config,
) -> Result<(), IntentError> {
    let keys = config.keys();
    if let Some(value) = get(&keys.egress_env)? {
        let env =
            egress_env::parse(&value).map_err(|problem| malformed(&keys.egress_env, problem))?;
        if intent.policy.is_none() {
            return Err(IntentError::WithoutPolicy {
                key: keys.egress_env.clone(),
                policy_key: keys.network_policy.clone(),
            });
        }
        if let Some((path, why)) = env.writable_policy_file() {
            return Err(IntentError::PolicyFileWritable {
                key: keys.egress_env.clone(),
                path: path.to_owned(),
                why,
            });
        }
        if intent.credential_proxy && env.ssl_insecure() {
            return Err(IntentError::SslInsecureWithCredentialProxy {
                key: keys.egress_env.clone(),
                credential_key: keys.credential_proxy.clone(),
            });
        }
        intent.egress_env = Some(env);
    }
    if intent.credential_proxy && intent.mode(config) != EgressMode::DnsNft {
        return Err(IntentError::CredentialProxyNeedsNft {
            key: keys.credential_proxy.clone(),
            mode_key: keys.egress_mode.clone(),
            mode: intent.mode(config),
        });
    }
    if config.egress.upstream_proxy.is_some() && intent.policy.is_some() {
        upstream_proxy(intent, config)?;
    }
    Ok(())
}

/// What a policy pod needs where every sidecar chains through an upstream
/// proxy (contract: egress.upstream-proxy-pod): the sidecar's transparent
/// MITM proxy, the only path that chains, in mode `dns+nft`, with its
/// certificate checks on. Upstream refuses the same requests.
fn upstream_proxy(intent: &Intent, config: &Config) -> Result<(), IntentError> {
    let keys = config.keys();
    let env = intent.egress_env.as_ref();
    if intent.mode(config) != EgressMode::DnsNft {
        return Err(IntentError::UpstreamProxyNeedsNft {
            mode_key: keys.egress_mode.clone(),
        });
    }
    if env.is_some_and(|e| e.truthy(egress_env::SSL_INSECURE)) {
        return Err(IntentError::UpstreamProxySslInsecure {
            key: keys.egress_env.clone(),
        });
    }
    if !(intent.credential_proxy || env.is_some_and(|e| e.truthy(egress_env::TRANSPARENT))) {
        return Err(IntentError::UpstreamProxyNeedsTransparent {
            policy_key: keys.network_policy.clone(),
            credential_key: keys.credential_proxy.clone(),
            env_key: keys.egress_env.clone(),
        });
    }
    Ok(())
}

/// Why a timeout annotation is refused. A well-formed timeout too long to
/// count in seconds is as far out of range as one that counts past year
/// 9999; anything else is not a timeout.
fn timeout_error(e: &DurationError, value: &str, key: &str) -> IntentError {
    if let DurationError::TooLong(_) = e {
        let trimmed = value.trim();
        let unit = if trimmed.bytes().all(|b| b.is_ascii_digit()) {
            "s"
        } else {
            ""
        };
        return IntentError::TimeoutOutOfRange {
            key: key.to_owned(),
            shown: format!("{trimmed}{unit}"),
        };
    }
    malformed(
        key,
        format!(
            "is '{}'; use whole seconds (3600) or a duration such as 90s, 30m, 2h or 1h30m",
            clip(value)
        ),
    )
}

/// Annotation values are strings in any pod the apiserver sends; anything
/// else is reported rather than guessed at.
fn string_annotation<'a>(
    pod: &PodView<'a>,
    key: &str,
) -> Result<Option<Cow<'a, str>>, IntentError> {
    let Some(raw) = pod.annotation(key) else {
        return Ok(None);
    };
    decode_string(raw).map_err(|_| malformed(key, "must be a string"))
}

/// `Ok(None)` for JSON null, which the apiserver would not send but a file may.
/// Borrowed from the request unless the value holds escapes: every sandbox
/// has several of these read.
pub(crate) fn decode_string(raw: &RawValue) -> Result<Option<Cow<'_, str>>, serde_json::Error> {
    Ok(serde_json::from_str::<Option<Text<'_>>>(raw.get())?.map(|t| t.0))
}

/// `true` or `false`, trimmed, in any case: how every yes/no annotation
/// is read (the controller reads `inject` with it too).
pub(crate) fn parse_bool(value: &str) -> Option<bool> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("true") {
        Some(true)
    } else if v.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

fn bool_problem(value: &str) -> String {
    format!("is '{}'; use \"true\" or \"false\"", clip(value))
}

fn malformed(key: &str, problem: impl Into<String>) -> IntentError {
    IntentError::MalformedAnnotation {
        key: key.to_owned(),
        problem: problem.into(),
    }
}

#[cfg(test)]
mod tests;
