//! What the injection record (`<prefix>/injected`, contract: record.value)
//! says about the configuration, made once per configuration so that a
//! review only appends the parts that depend on its pod.
//!
//! The record names the configuration by a hash of the settings that shape
//! an injected pod (`prefix`, `execd`, `egress`, `pod`, `expiry`), each
//! left out while it holds its built-in default. So a default configuration
//! always hashes the same, and a release that adds a setting with a default
//! does not change the hash of a file that does not set it; the images,
//! whose defaults do change between releases, are recorded on their own.
//! `excludedNamespaces`, `revision` and `controller` decide which pods are
//! touched or how they are cleaned up, not what is injected.

use std::fmt::Write as _;

use serde_json::Value;

/// The release that writes records: this crate's version (never the git
/// revision, which would change the record with every build).
pub const RELEASE: &str = env!("CARGO_PKG_VERSION");

/// The configuration's part of every record, as JSON text ready to be
/// joined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordTemplate {
    /// First 16 hex digits of the SHA-256 of the settings that shape an
    /// injected pod and differ from the defaults, as canonical JSON.
    pub config_hash: String,
    /// `{"release":"…"[,"revision":"…"],"config":"…","images":{`
    pub head: String,
    /// `"execd":"<execd.image>"`
    pub execd: String,
    /// `"egress":"<egress.image>"`; `None` when egress injection is off.
    pub egress: Option<String>,
    /// `head`, `execd` and `egress` as they read inside a JSON string (the
    /// patch's value and the audit annotation's): escaped once here, so a
    /// review copies them instead of escaping the record each time.
    pub(crate) escaped: Escaped,
}

/// The template's parts escaped for a JSON string, without its quotes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Escaped {
    pub(crate) head: String,
    pub(crate) execd: String,
    pub(crate) egress: Option<String>,
}

/// `text` as it reads inside a JSON string: escaping is per character, so
/// the escaped parts of a text joined are the escaped text.
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    quoted
        .get(1..quoted.len().saturating_sub(1))
        .unwrap_or_default()
        .to_owned()
}

impl RecordTemplate {
    /// `settings` and `defaults` are the sections that shape an injected
    /// pod, as the configuration holds them and as the built-in defaults
    /// are (`Config::shaping`).
    pub(super) fn new(
        mut settings: Value,
        defaults: &Value,
        revision: Option<&str>,
        execd_image: &str,
        egress_image: Option<&str>,
    ) -> Self {
        strip(&mut settings, defaults);
        let config_hash = short_sha256(canonical(&settings).as_bytes());
        let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let mut head = format!(r#"{{"release":{}"#, quoted(RELEASE));
        if let Some(revision) = revision {
            let _ = write!(head, r#","revision":{}"#, quoted(revision));
        }
        let _ = write!(head, r#","config":"{config_hash}","images":{{"#);
        let execd = format!(r#""execd":{}"#, quoted(execd_image));
        let egress = egress_image.map(|image| format!(r#""egress":{}"#, quoted(image)));
        let escaped = Escaped {
            head: json_escaped(&head),
            execd: json_escaped(&execd),
            egress: egress.as_deref().map(json_escaped),
        };
        RecordTemplate {
            config_hash,
            head,
            execd,
            egress,
            escaped,
        }
    }
}

/// Removes from `value` what equals `default`, member by member.
fn strip(value: &mut Value, default: &Value) {
    let (Value::Object(members), Value::Object(defaults)) = (value, default) else {
        return;
    };
    members.retain(|key, v| {
        let Some(d) = defaults.get(key) else {
            return true;
        };
        strip(v, d);
        v != d && !(v.is_object() && v.as_object().is_some_and(serde_json::Map::is_empty))
    });
}

/// JSON with every object's keys sorted, so the hash depends on the
/// settings only, never on the order of the fields that hold them.
fn canonical(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(members) => {
                let mut keys: Vec<&String> = members.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(key).unwrap_or_default());
                    out.push(':');
                    write(&members[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// The first 8 bytes of the SHA-256 of `bytes`, as 16 lower-case hex
/// digits: enough to tell configurations and policies apart, short enough
/// for an annotation a person reads. `sha256sum` of the same bytes starts
/// with them.
#[must_use]
pub fn short_sha256(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut hex = String::with_capacity(16);
    push_short_sha256(&digest, &mut hex);
    hex
}

/// [`short_sha256`] of a digest already made, appended to `out`.
pub(crate) fn push_short_sha256(digest: &ring::digest::Digest, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &b in &digest.as_ref()[..8] {
        out.push(char::from(HEX[usize::from(b >> 4)]));
        out.push(char::from(HEX[usize::from(b & 0xf)]));
    }
}
