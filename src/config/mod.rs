//! The webhook's configuration file (contract: config.defaults).
//!
//! Strict: every field is optional, but a field that is there must be right.
//! `null` only where the defaults show it, images and quantities checked
//! against their grammars ([`rules`]), resources checked as the apiserver
//! checks a container's, unknown keys refused. An empty file is refused too:
//! only running without a file means the built-in defaults. Start-up, reload
//! and `config validate` all go through [`Config::from_file_bytes`] (or
//! [`Config::from_yaml`] without a file name), so they accept the same files.

pub(crate) mod controller;
mod keys;
mod quantity;
mod read;
pub(crate) mod record;
pub(crate) mod rules;
mod schema;
mod upstream;
mod values;

use std::path::Path;

pub use keys::{ANNOTATION_NAMES, Keys};
pub(crate) use quantity::Quantity;
pub use record::{RELEASE, RecordTemplate, short_sha256};
pub use schema::{
    Config, ConfigError, DEFAULT_EGRESS_IMAGE, DEFAULT_EXECD_IMAGE,
    DEFAULT_INCOMPATIBLE_RUNTIME_CLASSES, DEFAULT_MAX_RULES, DEFAULT_PREFIX, EgressConfig,
    EgressMode, ExecdConfig, ExpiryConfig, MAX_MAX_RULES, MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS,
    PodConfig, SecretKeyRef, UpstreamProxy,
};

impl Config {
    /// Reads and checks `path`; errors name the file. It is read as the
    /// server reads a mounted file: a regular file of at most 1 MiB, what
    /// a `ConfigMap` holds ([`crate::files::read_mounted`]).
    ///
    /// # Errors
    /// [`ConfigError::Read`], or the file's first mistake (as
    /// [`Config::from_file_bytes`]).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let bytes = crate::files::read_mounted(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_file_bytes(path, &bytes)
    }

    /// Checks the contents of `path` (already read); errors name the file.
    /// The server calls this at start-up and at every reload.
    ///
    /// # Errors
    /// A [`ConfigError`] that names the field and says what is wrong.
    pub fn from_file_bytes(path: &Path, bytes: &[u8]) -> Result<Self, ConfigError> {
        let in_file = |source| ConfigError::File {
            path: path.to_owned(),
            source: Box::new(source),
        };
        let text = std::str::from_utf8(bytes).map_err(|e| {
            in_file(ConfigError::invalid(
                "",
                format!(
                    "the file is not UTF-8 text (invalid byte at offset {})",
                    e.valid_up_to()
                ),
            ))
        })?;
        Self::from_yaml(text).map_err(in_file)
    }

    /// Parses and checks a YAML (or JSON) document. An empty document, or one
    /// with only comments, is refused: at reload it is far more likely a file
    /// caught half-written than a wish for the defaults.
    ///
    /// # Errors
    /// A [`ConfigError`] that names the field and says what is wrong.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        const EMPTY: &str = "the file has no settings; write {} for the built-in defaults (or start without --config)";
        if text.trim().is_empty() {
            return Err(ConfigError::invalid("", EMPTY));
        }
        // Deep nesting costs the parser quadratic time: refused first.
        crate::yaml_depth::check(text).map_err(|e| ConfigError::invalid("", e.to_string()))?;
        let root: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(text).map_err(|e| yaml_error(&e, text))?;
        if root.is_null() {
            return Err(ConfigError::invalid("", EMPTY));
        }
        read::config(&root)
    }

    /// The configuration as YAML that [`Config::from_yaml`] reads back
    /// unchanged (`config defaults`).
    ///
    /// # Errors
    /// Only if serde cannot write the YAML, which the tests rule out.
    pub fn to_yaml(&self) -> Result<String, ConfigError> {
        serde_yaml_ng::to_string(self)
            .map_err(|e| ConfigError::invalid("", format!("cannot be written as YAML: {e}")))
    }
}

/// YAML syntax errors are plain words, except two: an integer beyond 64 bits
/// is reported by serde in Rust terms (`invalid type: integer ... as u128`),
/// and a tab in the indentation as "a character that cannot start any
/// token".
fn yaml_error(e: &serde_yaml_ng::Error, file: &str) -> ConfigError {
    let tab_line = e.location().map(|l| l.line()).filter(|&n| {
        let line = file.lines().nth(n.saturating_sub(1)).unwrap_or_default();
        line[..line.len() - line.trim_start().len()].contains('\t')
    });
    if let Some(line) = tab_line {
        return ConfigError::invalid(
            "",
            format!(
                "line {line} is indented with a tab, and YAML is indented with spaces only; replace the tab with spaces"
            ),
        );
    }
    let text = e.to_string();
    if text.contains("u128") || text.contains("i128") {
        let at = e
            .location()
            .map(|l| format!(" at line {} column {}", l.line(), l.column()))
            .unwrap_or_default();
        return ConfigError::invalid("", format!("a number{at} is too large"));
    }
    ConfigError::invalid("", format!("not valid YAML: {text}"))
}

#[cfg(test)]
mod tests;
