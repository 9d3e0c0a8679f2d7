//! The sandbox's lifetime becomes an expiry annotation (contract:
//! expiry.timeout).

use chrono::{DateTime, Datelike, SecondsFormat, TimeDelta, Utc};

use crate::config::MIN_TIMEOUT_SECONDS;

use crate::mutate::context::Context;
use crate::mutate::denial::Denial;
use crate::mutate::intent::{Intent, decode_string};
use crate::mutate::read::pod::PodView;

/// What the pod's expiry metadata should become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expiry {
    /// `expires-at` is already set (and valid): keep it.
    Keep,
    /// Write `expires-at` with this RFC 3339 value.
    At(String),
    /// No lifetime at all: label the pod for manual cleanup.
    Manual,
}

/// Inputs already read from annotations (see `intent`).
struct ExpiryIntent<'a> {
    has_expires_at: bool,
    timeout: Option<u64>,
    timeout_key: &'a str,
}

/// What the pod's expiry metadata gains: `None` when it already has what it
/// needs (a valid `expires-at`, or the manual-cleanup label).
pub(crate) fn change(
    pod: &PodView<'_>,
    intent: &Intent,
    ctx: &Context<'_>,
) -> Result<Option<Expiry>, Denial> {
    let config = ctx.config;
    let keys = config.keys();
    if intent.expires_at.is_none() && intent.timeout.is_none() && owner_holds_lifetime(pod) {
        return Ok(None);
    }
    let planned = plan(
        &ExpiryIntent {
            has_expires_at: intent.expires_at.is_some(),
            timeout: intent.timeout,
            timeout_key: &keys.timeout,
        },
        config.expiry.default_timeout_seconds,
        config.expiry.max_timeout_seconds,
        ctx.now,
    )?;
    Ok(match planned {
        Expiry::Keep => None,
        Expiry::Manual => {
            let labelled = pod
                .label(&keys.manual_cleanup)
                .and_then(|raw| decode_string(raw).ok().flatten())
                .is_some_and(|v| v == "true");
            (!labelled).then_some(Expiry::Manual)
        }
        at @ Expiry::At(_) => Some(at),
    })
}

/// The controller owners that keep a sandbox's lifetime themselves
/// (contract: expiry.owner-held): OpenSandbox's `BatchSandbox`
/// (`spec.expireTime`) and agent-sandbox's Sandbox (`spec.shutdownTime`),
/// by API group and kind. A pod of theirs that names no lifetime of its own
/// gets neither a default expiry, which would end it before its owner says,
/// nor the manual-cleanup label, which would say it has no lifetime.
const LIFETIME_OWNERS: [(&str, &str); 2] = [
    ("sandbox.opensandbox.io", "BatchSandbox"),
    ("agents.x-k8s.io", "Sandbox"),
];

fn owner_holds_lifetime(pod: &PodView<'_>) -> bool {
    pod.controller_owner()
        .is_some_and(|owner| LIFETIME_OWNERS.contains(&owner))
}

fn plan(
    intent: &ExpiryIntent<'_>,
    default_timeout: Option<u64>,
    max_timeout: Option<u64>,
    now: DateTime<Utc>,
) -> Result<Expiry, Denial> {
    if intent.has_expires_at {
        return Ok(Expiry::Keep);
    }
    let Some(seconds) = intent.timeout.or(default_timeout) else {
        return Ok(Expiry::Manual);
    };
    if seconds < MIN_TIMEOUT_SECONDS {
        return Err(Denial::TimeoutTooShort {
            key: intent.timeout_key.to_owned(),
            seconds,
        });
    }
    if let Some(max) = max_timeout
        && seconds > max
    {
        return Err(Denial::TimeoutAboveMaximum { seconds, max });
    }
    let at = i64::try_from(seconds)
        .ok()
        .and_then(TimeDelta::try_seconds)
        .and_then(|d| now.checked_add_signed(d))
        // RFC 3339 has four-digit years: beyond 9999 chrono writes `+10000-…`,
        // which the webhook itself would then refuse as `expires-at`.
        .filter(|at| at.year() <= 9999)
        .ok_or_else(|| Denial::TimeoutOutOfRange {
            key: intent.timeout_key.to_owned(),
            shown: format!("{seconds}s"),
        })?;
    Ok(Expiry::At(at.to_rfc3339_opts(SecondsFormat::Secs, true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-02T03:04:05.678Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn intent(timeout: Option<u64>) -> ExpiryIntent<'static> {
        ExpiryIntent {
            has_expires_at: false,
            timeout,
            timeout_key: "opensandbox.io/timeout",
        }
    }

    #[test]
    fn plans() {
        assert_eq!(
            plan(&intent(Some(3600)), None, None, now()).unwrap(),
            Expiry::At("2026-01-02T04:04:05Z".into())
        );
        assert_eq!(
            plan(&intent(None), Some(60), None, now()).unwrap(),
            Expiry::At("2026-01-02T03:05:05Z".into())
        );
        assert_eq!(
            plan(&intent(None), None, None, now()).unwrap(),
            Expiry::Manual
        );
        let keep = ExpiryIntent {
            has_expires_at: true,
            ..intent(Some(10))
        };
        assert_eq!(plan(&keep, None, Some(60), now()).unwrap(), Expiry::Keep);
        assert_eq!(
            plan(&intent(Some(59)), None, None, now())
                .unwrap_err()
                .to_string(),
            "annotation opensandbox.io/timeout is 59s, below the minimum sandbox timeout of 60s; set it to 60 or more."
        );
        assert_eq!(
            plan(&intent(Some(7200)), None, Some(3600), now())
                .unwrap_err()
                .to_string(),
            "Sandbox timeout 7200s exceeds configured maximum of 3600s."
        );
        assert!(matches!(
            plan(&intent(Some(u64::MAX)), None, None, now()).unwrap_err(),
            Denial::TimeoutOutOfRange { .. }
        ));
        // Found by fuzzing: an expiry past year 9999 is not RFC 3339.
        let last: DateTime<Utc> = "9999-12-31T23:59:59Z".parse().unwrap();
        let to_last = u64::try_from((last - now()).num_seconds()).unwrap();
        assert_eq!(
            plan(&intent(Some(to_last)), None, None, now()).unwrap(),
            Expiry::At("9999-12-31T23:59:58Z".into())
        );
        assert!(matches!(
            plan(&intent(Some(to_last + 2)), None, None, now()).unwrap_err(),
            Denial::TimeoutOutOfRange { .. }
        ));
        assert!(matches!(
            plan(&intent(Some(499_092_186_221)), None, None, now()).unwrap_err(),
            Denial::TimeoutOutOfRange { .. }
        ));
    }
}
