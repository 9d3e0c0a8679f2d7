//! The one fixed admission time of the tests. The golden fixtures pin it:
//! every `expires-at` in `tests/fixtures/*.expected.yaml` is computed from it.

use chrono::{DateTime, Utc};

/// RFC 3339, as the CLI's `--now` takes it.
pub const NOW: &str = "2026-01-01T00:00:00Z";

/// [`NOW`] as a time; a plain `fn` so it can be a server's clock.
pub fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(NOW)
        .expect("NOW is RFC 3339")
        .to_utc()
}
