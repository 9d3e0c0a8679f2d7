//! The crate's one duration grammar, for the `<prefix>/timeout` annotation
//! and the `serve` flags alike: a bare number of seconds (`3600`), or parts
//! `<digits><unit>` with the units `h`, `m`, `s` and `ms` (any case), each at
//! most once, largest first, nothing in between (`90s`, `30m`, `1h30m`,
//! `250ms`). Surrounding whitespace is ignored.

use std::time::Duration;

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DurationError {
    #[error("`{0}` is not a duration like 90s, 30m, 1h30m or 250ms")]
    Syntax(String),
    #[error("`{0}` is longer than any duration this program can hold")]
    TooLong(String),
    #[error("`{0}` is not a whole number of seconds")]
    NotWholeSeconds(String),
    #[error("duration must be positive")]
    Zero,
}

/// Units, largest first, with their length in milliseconds.
const UNITS: [(&str, u128); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];

/// The duration in milliseconds. u128 holds any sum of u64 parts in any
/// unit, so overflow is only reported where a caller needs a smaller type.
fn millis(text: &str) -> Result<u128, DurationError> {
    let syntax = || DurationError::Syntax(text.to_owned());
    let v = text.trim();
    if v.is_empty() {
        return Err(syntax());
    }
    // Digits that do not fit in 64 bits are a number too long to hold,
    // not a mistake of syntax.
    let too_long = || DurationError::TooLong(text.to_owned());
    if v.bytes().all(|b| b.is_ascii_digit()) {
        let seconds: u64 = v.parse().map_err(|_| too_long())?;
        return Ok(u128::from(seconds) * 1_000);
    }
    let mut total: u128 = 0;
    let mut rest = v;
    // Index into UNITS of the last unit seen; the next must come later.
    let mut next_unit = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let letters = rest[digits..]
            .bytes()
            .take_while(u8::is_ascii_alphabetic)
            .count();
        if digits == 0 || letters == 0 {
            return Err(syntax());
        }
        let unit = &rest[digits..digits + letters];
        let at = UNITS[next_unit..]
            .iter()
            .position(|(name, _)| unit.eq_ignore_ascii_case(name))
            .ok_or_else(syntax)?
            + next_unit;
        let n: u64 = rest[..digits].parse().map_err(|_| too_long())?;
        next_unit = at + 1;
        total += u128::from(n) * UNITS[at].1;
        rest = &rest[digits + letters..];
    }
    Ok(total)
}

/// Any duration of the grammar, zero included.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let ms = millis(text)?;
    let seconds = u64::try_from(ms / 1_000).map_err(|_| DurationError::TooLong(text.to_owned()))?;
    // The remainder is below 1,000, so the cast cannot truncate.
    let rest = (ms % 1_000) as u32;
    Ok(Duration::new(seconds, rest * 1_000_000))
}

/// A duration that is more than zero (timeouts and intervals of `serve`).
pub fn parse_positive(text: &str) -> Result<Duration, DurationError> {
    let d = parse(text)?;
    if d.is_zero() {
        return Err(DurationError::Zero);
    }
    Ok(d)
}

/// Whole seconds, without the `ms` unit (the sandbox timeout).
pub fn parse_seconds(text: &str) -> Result<u64, DurationError> {
    // `ms` is the smallest unit, so if present it comes last.
    let t = text.trim().as_bytes();
    if t.len() >= 2 && t[t.len() - 2..].eq_ignore_ascii_case(b"ms") {
        return Err(DurationError::NotWholeSeconds(text.to_owned()));
    }
    let ms = millis(text)?;
    u64::try_from(ms / 1_000).map_err(|_| DurationError::TooLong(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("3600"), Ok(3600));
        assert_eq!(parse_seconds(" 90s "), Ok(90));
        assert_eq!(parse_seconds("30m"), Ok(1800));
        assert_eq!(parse_seconds("2h"), Ok(7200));
        assert_eq!(parse_seconds("1h30m"), Ok(5400));
        assert_eq!(parse_seconds("1h0m30s"), Ok(3630));
        assert_eq!(parse_seconds("1H"), Ok(3600));
        assert_eq!(parse_seconds("18446744073709551615"), Ok(u64::MAX));
        for bad in [
            "", "abc", "1d", "30m1h", "1h1h", "1.5h", "-60", "h", "10 m", "1500ms", "1s500ms",
        ] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        for long in [
            "18446744073709551615h",
            "99999999999999999999",
            "99999999999999999999m",
        ] {
            assert_eq!(
                parse_seconds(long),
                Err(DurationError::TooLong(long.into())),
                "{long}"
            );
        }
        assert_eq!(
            parse_seconds("99999999999999999999x"),
            Err(DurationError::Syntax("99999999999999999999x".into()))
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("15"), Ok(Duration::from_secs(15)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("5h"), Ok(Duration::from_secs(18_000)));
        assert_eq!(parse("1m30s250ms"), Ok(Duration::from_millis(90_250)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_positive("0s"), Err(DurationError::Zero));
        assert_eq!(parse_positive("1ms"), Ok(Duration::from_millis(1)));
        for bad in ["s", "ms", "5ms1s", "5x", "5 s", "1.5s"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse("5x").unwrap_err().to_string(),
            "`5x` is not a duration like 90s, 30m, 1h30m or 250ms"
        );
    }
}
