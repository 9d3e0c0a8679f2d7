//! The strings the controller keeps for every cached pod, in their
//! smallest form: a UID, a `resourceVersion`, an `expires-at` value. Each
//! has a compact form for the values the apiserver and the webhook write
//! (16 bytes of a UUID, a number, a time) and keeps anything else as
//! written; either way it prints back exactly what was read, since a UID
//! and a version are sent back in preconditions and an `expires-at` is
//! quoted in Events.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};

use crate::mutate::intent::expires_at::parse_expires_at;

/// An object's UID.

#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    /// A lowercase hyphenated UUID (`8-4-4-4-12` hex digits).
    Uuid([u8; 16]),
    /// Any other value, as written.
    Other(Box<str>),
}

/// Where the hyphens of a hyphenated UUID are.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];

impl Uid {
    #[must_use]
    pub fn new(s: &str) -> Self {
        uuid_bytes(s).map_or_else(|| Uid::Other(s.into()), Uid::Uuid)
    }
}

/// The 16 bytes of `s` when it is a lowercase hyphenated UUID, so that
/// printing them gives `s` back.
fn uuid_bytes(s: &str) -> Option<[u8; 16]> {
    let text = s.as_bytes();
    if text.len() != 36 || HYPHENS.iter().any(|&i| text[i] != b'-') {
        return None;
    }
    let mut digits = text
        .iter()
        .enumerate()
        .filter(|(i, _)| !HYPHENS.contains(i))
        .map(|(_, &c)| match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        });
    let mut bytes = [0u8; 16];
    for byte in &mut bytes {
        *byte = (digits.next()?? << 4) | digits.next()??;
    }
    Some(bytes)
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Uid::Other(s) => f.write_str(s),
            Uid::Uuid(bytes) => {
                for (i, b) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        f.write_str("-")?;
                    }
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
    }
}

/// A `resourceVersion`: an opaque string to clients, a decimal number in
/// every apiserver backed by etcd.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Version {
    /// Digits that print back the same (no sign, no leading zero).
    Number(u64),
    Other(Box<str>),
}

impl Version {
    #[must_use]
    pub fn new(s: &str) -> Self {
        match s.parse::<u64>() {
            Ok(n) if n.to_string() == s => Version::Number(n),
            _ => Version::Other(s.into()),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Number(n) => write!(f, "{n}"),
            Version::Other(s) => f.write_str(s),
        }
    }
}

impl fmt::Debug for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// An `expires-at` annotation as written.
#[derive(Clone, PartialEq, Eq)]
pub enum ExpiresAt {
    /// A time written as the webhook writes it (`2026-01-02T03:04:05Z`):
    /// its Unix seconds.
    Utc(i64),
    /// Any other value, valid or not.
    Other(Box<str>),
}

impl ExpiresAt {
    #[must_use]
    pub fn new(s: &str) -> Self {
        match parse_expires_at(s) {
            Some(t) if t.to_rfc3339_opts(SecondsFormat::Secs, true) == s => {
                ExpiresAt::Utc(t.timestamp())
            }
            _ => ExpiresAt::Other(s.into()),
        }
    }

    /// The time it names, when it is an RFC 3339 time.
    #[must_use]
    pub fn time(&self) -> Option<DateTime<Utc>> {
        match self {
            ExpiresAt::Utc(seconds) => DateTime::from_timestamp(*seconds, 0),
            ExpiresAt::Other(s) => parse_expires_at(s),
        }
    }
}

impl fmt::Display for ExpiresAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExpiresAt::Utc(seconds) => match DateTime::from_timestamp(*seconds, 0) {
                Some(t) => f.write_str(&t.to_rfc3339_opts(SecondsFormat::Secs, true)),
                None => write!(f, "{seconds}"),
            },
            ExpiresAt::Other(s) => f.write_str(s),
        }
    }
}

impl fmt::Debug for ExpiresAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl From<&str> for Uid {
    fn from(s: &str) -> Self {
        Uid::new(s)
    }
}

impl PartialEq<str> for Uid {
    fn eq(&self, other: &str) -> bool {
        match self {
            Uid::Other(s) => &**s == other,
            Uid::Uuid(bytes) => uuid_bytes(other).as_ref() == Some(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `new(s)`, which must print back as `s`.
    fn read_back<T: std::fmt::Display>(new: fn(&str) -> T, s: &str) -> T {
        let read = new(s);
        assert_eq!(read.to_string(), s);
        read
    }

    #[test]
    fn prints_back_what_it_read() {
        for s in [
            "0f8fad5b-d9cb-469f-a165-70867728950e",
            "00000000-0000-0000-0000-000000000000",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
            // Not the apiserver's form: kept as written.
            "0F8FAD5B-D9CB-469F-A165-70867728950E",
            "0f8fad5bd9cb469fa16570867728950e",
            "0f8fad5b-d9cb-469f-a165-70867728950g",
            "0f8fad5b+d9cb-469f-a165-70867728950e",
            "u1",
            "",
            "ééééééééééééééééééé",
        ] {
            assert!(read_back(Uid::new, s) == *s, "{s}");
        }
        assert!(matches!(
            Uid::new("0f8fad5b-d9cb-469f-a165-70867728950e"),
            Uid::Uuid(_)
        ));
        assert!(matches!(
            Uid::new("0F8FAD5B-D9CB-469F-A165-70867728950E"),
            Uid::Other(_)
        ));
        assert_ne!(
            Uid::new("0f8fad5b-d9cb-469f-a165-70867728950e"),
            Uid::new("0f8fad5b-d9cb-469f-a165-70867728950f")
        );
        assert!(Uid::new("0f8fad5b-d9cb-469f-a165-70867728950e") != *"other");
    }

    #[test]
    fn versions_print_back() {
        for s in ["0", "1", "4000049", "18446744073709551615"] {
            assert!(
                matches!(read_back(Version::new, s), Version::Number(_)),
                "{s}"
            );
        }
        for s in ["", "01", "+1", "-1", "18446744073709551616", "abc", " 1"] {
            assert!(
                matches!(read_back(Version::new, s), Version::Other(_)),
                "{s}"
            );
        }
        assert_ne!(Version::new("1"), Version::new("01"));
    }

    #[test]
    fn expiry_values_print_back_and_name_their_time() {
        let utc = ExpiresAt::new("2026-01-02T03:04:05Z");
        assert_eq!(utc, ExpiresAt::Utc(1_767_323_045));
        for s in [
            "2026-01-02T03:04:05Z",
            "2026-01-02T05:04:05+02:00",
            "2026-01-02T03:04:05.000Z",
            " 2026-01-02T03:04:05Z",
            "2026-01-02t03:04:05z",
        ] {
            assert_eq!(read_back(ExpiresAt::new, s).time(), utc.time(), "{s}");
        }
        for s in ["", "soon", "2026-13-02T00:00:00Z", "1767322000"] {
            assert_eq!(read_back(ExpiresAt::new, s).time(), None, "{s}");
        }
    }
}
