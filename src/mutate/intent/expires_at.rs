//! The `<prefix>/expires-at` annotation (contract: intent.expires-at-format):
//! an RFC 3339 time.

use chrono::{DateTime, Utc};

/// RFC 3339 check for `expires-at`; the value itself is kept as written.
#[cfg(test)]
fn valid_expires_at(value: &str) -> bool {
    parse_expires_at(value).is_some()
}

/// The time an `expires-at` value names (surrounding blanks ignored). The
/// controller reads the annotation with this too (`lifecycle::expiry`).
pub(crate) fn parse_expires_at(value: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(value.trim())
        .ok()
        .map(|t| t.to_utc())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expires_at_validation() {
        assert!(valid_expires_at("2026-01-02T03:04:05Z"));
        assert!(valid_expires_at("2026-01-02T03:04:05.5+02:00"));
        assert!(!valid_expires_at("2026-01-02 03:04"));
        assert!(!valid_expires_at("tomorrow"));
    }
}
