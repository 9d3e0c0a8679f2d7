//! Log hygiene for values a client controls, and a rate limit for warnings a
//! client can trigger at will.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Longest request-derived value written to a log line, in characters.
pub const MAX_LOGGED_CHARS: usize = 256;

/// Displays a request-derived string so that it cannot forge log lines:
/// control characters (newlines above all), quotes and backslashes are
/// escaped as in a Rust string literal, and anything past
/// [`MAX_LOGGED_CHARS`] is cut and marked with `…`. Used for every field
/// that comes from the request (uid, namespace, name, operation, messages
/// that quote the pod), in text and JSON logs alike.
pub struct Clean<'a>(pub &'a str);

impl fmt::Display for Clean<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, c) in self.0.chars().enumerate() {
            if i == MAX_LOGGED_CHARS {
                return f.write_char('…');
            }
            match c {
                '"' | '\\' => {
                    f.write_char('\\')?;
                    f.write_char(c)?;
                }
                c if c.is_control() || is_line_break(c) => {
                    for e in c.escape_default() {
                        f.write_char(e)?;
                    }
                }
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// Unicode line and paragraph separators end a line in some log viewers.
fn is_line_break(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}' | '\u{85}')
}

/// Lets through at most one event per `period_secs`, and says how many were
/// held back in between. Lock-free; callers race benignly (at worst two
/// events pass in the same period).
pub struct RateLimit {
    started: Instant,
    period_secs: u64,
    /// The period (seconds since `started`, divided by `period_secs`) in
    /// which an event last passed, plus one; 0 before the first.
    last: AtomicU64,
    suppressed: AtomicU64,
}

impl RateLimit {
    pub fn new(period_secs: u64) -> Self {
        RateLimit {
            started: Instant::now(),
            period_secs: period_secs.max(1),
            last: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// `Some(n)` when this event should be logged, `n` being how many were
    /// suppressed since the last one that was; `None` to stay quiet.
    pub fn check(&self) -> Option<u64> {
        let period = self.started.elapsed().as_secs() / self.period_secs + 1;
        let last = self.last.load(Ordering::Relaxed);
        if last != period
            && self
                .last
                .compare_exchange(last, period, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// contract: limits.logs
    #[test]
    fn newlines_and_quotes_are_escaped() {
        let forged = "sb-1\n2026-01-01T00:00:00Z INFO admission outcome=\"mutated\"\r\u{2028}";
        let shown = Clean(forged).to_string();
        assert!(!shown.contains('\n') && !shown.contains('\r') && !shown.contains('\u{2028}'));
        assert_eq!(
            shown,
            "sb-1\\n2026-01-01T00:00:00Z INFO admission outcome=\\\"mutated\\\"\\r\\u{2028}"
        );
        assert_eq!(Clean("team-a").to_string(), "team-a");
    }

    /// contract: limits.logs
    #[test]
    fn long_values_are_cut() {
        let long = "x".repeat(10_000);
        let shown = Clean(&long).to_string();
        assert_eq!(shown.chars().count(), MAX_LOGGED_CHARS + 1);
        assert!(shown.ends_with('…'));
        let exact = "y".repeat(MAX_LOGGED_CHARS);
        assert_eq!(Clean(&exact).to_string(), exact);
    }

    #[test]
    fn rate_limit_lets_one_through_per_period() {
        let limit = RateLimit::new(3600);
        assert_eq!(limit.check(), Some(0));
        assert_eq!(limit.check(), None);
        assert_eq!(limit.check(), None);
        // A new period reports what was held back.
        limit.last.store(0, Ordering::Relaxed);
        assert_eq!(limit.check(), Some(2));
    }
}
