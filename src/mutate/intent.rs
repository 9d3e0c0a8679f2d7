//! What the pod asks for, read from its `<prefix>/*` annotations (SPEC 2).
//! Every annotation is validated up front: a malformed value is a denial,
//! never silently ignored, even when another annotation makes it moot.

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;

use crate::config::{Config, EgressMode};
use crate::duration::DurationError;

use super::expires_at::parse_expires_at;
use super::platform::{Platform, PlatformError};
use super::pod::PodView;
use super::policy::{self, NetworkPolicy, PolicyError};
use super::quote::clip;
use super::token::is_egress_token;

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
    /// A timeout too long to count in seconds, as the message shows it.
    TimeoutOutOfRange {
        key: String,
        shown: String,
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

    if let Some(value) = get(&keys.egress_auth_token)? {
        if !is_egress_token(&value) {
            return Err(malformed(
                &keys.egress_auth_token,
                "must be a non-empty string of visible ASCII characters; remove it to have one generated",
            ));
        }
        intent.egress_token = Some(value);
    }

    Ok(Some(intent))
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
fn string_annotation(pod: &PodView<'_>, key: &str) -> Result<Option<String>, IntentError> {
    let Some(raw) = pod.annotation(key) else {
        return Ok(None);
    };
    decode_string(raw).map_err(|_| malformed(key, "must be a string"))
}

/// `Ok(None)` for JSON null, which the apiserver would not send but a file may.
pub(crate) fn decode_string(raw: &RawValue) -> Result<Option<String>, serde_json::Error> {
    serde_json::from_str::<Option<String>>(raw.get())
}

fn parse_bool(value: &str) -> Option<bool> {
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
