//! The sandbox's lifetime becomes an expiry annotation (SPEC 6).

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};

use crate::config::MIN_TIMEOUT_SECONDS;

use super::Denial;

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
pub struct ExpiryIntent<'a> {
    pub has_expires_at: bool,
    pub timeout: Option<u64>,
    pub timeout_key: &'a str,
}

pub fn plan(
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
        .ok_or_else(|| Denial::TimeoutOutOfRange {
            key: intent.timeout_key.to_owned(),
            seconds,
        })?;
    Ok(Expiry::At(at.to_rfc3339_opts(SecondsFormat::Secs, true)))
}

/// Whole seconds (`3600`) or a duration made of hours, minutes and seconds in
/// that order, each at most once (`90s`, `30m`, `2h`, `1h30m`).
pub fn parse_timeout(value: &str) -> Option<u64> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    if v.bytes().all(|b| b.is_ascii_digit()) {
        return v.parse().ok();
    }
    let mut total: u64 = 0;
    let mut rest = v;
    let mut last_rank = u8::MAX;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        let unit = rest[digits..].chars().next()?;
        let (rank, scale) = match unit.to_ascii_lowercase() {
            'h' => (2, 3600),
            'm' => (1, 60),
            's' => (0, 1),
            _ => return None,
        };
        if rank >= last_rank {
            return None;
        }
        last_rank = rank;
        total = total.checked_add(n.checked_mul(scale)?)?;
        rest = &rest[digits + 1..];
    }
    Some(total)
}

/// RFC 3339 check for `expires-at`; the value itself is kept as written.
pub fn valid_expires_at(value: &str) -> bool {
    DateTime::parse_from_rfc3339(value.trim()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-01-02T03:04:05.678Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn durations() {
        assert_eq!(parse_timeout("3600"), Some(3600));
        assert_eq!(parse_timeout(" 90s "), Some(90));
        assert_eq!(parse_timeout("30m"), Some(1800));
        assert_eq!(parse_timeout("2h"), Some(7200));
        assert_eq!(parse_timeout("1h30m"), Some(5400));
        assert_eq!(parse_timeout("1h0m30s"), Some(3630));
        assert_eq!(parse_timeout("1H"), Some(3600));
        for bad in [
            "",
            "abc",
            "1d",
            "30m1h",
            "1h1h",
            "1.5h",
            "-60",
            "h",
            "10 m",
            "99999999999999999999",
        ] {
            assert_eq!(parse_timeout(bad), None, "{bad}");
        }
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
    }

    #[test]
    fn expires_at_validation() {
        assert!(valid_expires_at("2026-01-02T03:04:05Z"));
        assert!(valid_expires_at("2026-01-02T03:04:05.5+02:00"));
        assert!(!valid_expires_at("2026-01-02 03:04"));
        assert!(!valid_expires_at("tomorrow"));
    }
}
