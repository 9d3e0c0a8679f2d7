//! The webhook's configuration file (SPEC section 8).
//!
//! Strict: every field is optional, but a field that is there must be right.
//! `null` only where the defaults show it, images and quantities checked
//! against their grammars ([`rules`]), resources checked as the apiserver
//! checks a container's, unknown keys refused. An empty file is refused too:
//! only running without a file means the built-in defaults. Start-up, reload
//! and `config validate` all go through [`Config::from_file_bytes`] (or
//! [`Config::from_yaml`] without a file name), so they accept the same files.

mod quantity;
mod read;
pub(crate) mod rules;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

pub const DEFAULT_PREFIX: &str = "opensandbox.io";
pub const DEFAULT_EXECD_IMAGE: &str = "opensandbox/execd:v1.0.18";
pub const DEFAULT_EGRESS_IMAGE: &str = "opensandbox/egress:v1.1.0";
pub const DEFAULT_MAX_RULES: usize = 4096;
/// A pod object is at most 1.5 MiB in etcd and the smallest rule,
/// `{"action":"deny","target":"a"}`, takes 30 bytes of the policy JSON that
/// is copied into the pod, so more rules than this could never be stored.
pub const MAX_MAX_RULES: usize = 50_000;
/// Sandboxes shorter than this are refused (SPEC 6).
pub const MIN_TIMEOUT_SECONDS: u64 = 60;
/// Ten years: far beyond any sandbox, and far from the end of what an RFC
/// 3339 `expires-at` can express.
pub const MAX_TIMEOUT_SECONDS: u64 = 10 * 366 * 24 * 3600;

/// Why a configuration was refused. Every message is plain words: the file,
/// the field path (`execd.resources.limits.cpu`) and what to change.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `field` is empty when the whole document is at fault.
    #[error("{}{message}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
    Invalid { field: String, message: String },
    /// More than one mistake, in file order (`config validate` shows them
    /// all; the server logs them all).
    #[error("{} mistakes:{}", .0.len(), several(.0))]
    Several(Vec<ConfigError>),
    #[error("config file {}: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: Box<ConfigError>,
    },
}

impl ConfigError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The field path at fault (empty for the whole file), if the content
    /// was at fault rather than reading it.
    #[must_use]
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Invalid { field, .. } => Some(field),
            ConfigError::File { source, .. } => source.field(),
            ConfigError::Several(all) => all.first().and_then(ConfigError::field),
        }
    }
}

/// Each mistake on its own line, indented under the count.
fn several(all: &[ConfigError]) -> String {
    all.iter().fold(String::new(), |mut out, e| {
        let _ = write!(out, "\n  {e}");
        out
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EgressMode {
    #[serde(rename = "dns")]
    Dns,
    #[serde(rename = "dns+nft")]
    DnsNft,
}

impl EgressMode {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EgressMode::Dns => "dns",
            EgressMode::DnsNft => "dns+nft",
        }
    }

    /// Annotation values are trimmed and case-insensitive.
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        let v = value.trim();
        if v.eq_ignore_ascii_case("dns") {
            Some(EgressMode::Dns)
        } else if v.eq_ignore_ascii_case("dns+nft") {
            Some(EgressMode::DnsNft)
        } else {
            None
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub prefix: String,
    pub excluded_namespaces: Vec<String>,
    pub execd: ExecdConfig,
    pub egress: EgressConfig,
    pub expiry: ExpiryConfig,
    /// The lifecycle controller's section (SPEC 10); the webhook ignores it.
    pub controller: crate::lifecycle::config::ControllerConfig,
    /// Annotation and label keys derived from `prefix`, computed once at load.
    #[serde(skip)]
    keys: Keys,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecdConfig {
    pub image: String,
    pub resources: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressConfig {
    /// `null` disables egress injection: a pod asking for a network policy is
    /// then denied rather than admitted without control.
    pub image: Option<String>,
    pub mode: EgressMode,
    #[serde(rename = "disableIPv6")]
    pub disable_ipv6: bool,
    pub native_sidecar: bool,
    pub max_rules: usize,
    pub resources: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiryConfig {
    pub default_timeout_seconds: Option<u64>,
    pub max_timeout_seconds: Option<u64>,
}

/// `<prefix>/<name>` for every annotation and label the webhook reads or writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Keys {
    pub id: String,
    pub inject: String,
    pub platform: String,
    pub timeout: String,
    pub expires_at: String,
    pub network_policy: String,
    pub egress_mode: String,
    pub credential_proxy: String,
    pub entrypoint: String,
    pub main_container: String,
    pub egress_auth_token: String,
    pub manual_cleanup: String,
}

impl Keys {
    fn new(prefix: &str) -> Self {
        let k = |name: &str| format!("{prefix}/{name}");
        Keys {
            id: k("id"),
            inject: k("inject"),
            platform: k("platform"),
            timeout: k("timeout"),
            expires_at: k("expires-at"),
            network_policy: k("network-policy"),
            egress_mode: k("egress-mode"),
            credential_proxy: k("credential-proxy"),
            entrypoint: k("entrypoint"),
            main_container: k("main-container"),
            egress_auth_token: k("egress-auth-token"),
            manual_cleanup: k("manual-cleanup"),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            prefix: DEFAULT_PREFIX.to_owned(),
            excluded_namespaces: ["kube-system", "kube-public", "kube-node-lease"]
                .map(str::to_owned)
                .to_vec(),
            execd: ExecdConfig::default(),
            egress: EgressConfig::default(),
            expiry: ExpiryConfig::default(),
            controller: crate::lifecycle::config::ControllerConfig::default(),
            keys: Keys::new(DEFAULT_PREFIX),
        }
    }
}

impl Default for ExecdConfig {
    fn default() -> Self {
        ExecdConfig {
            image: DEFAULT_EXECD_IMAGE.to_owned(),
            resources: None,
        }
    }
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            image: Some(DEFAULT_EGRESS_IMAGE.to_owned()),
            mode: EgressMode::Dns,
            disable_ipv6: true,
            native_sidecar: true,
            max_rules: DEFAULT_MAX_RULES,
            resources: None,
        }
    }
}

impl Config {
    #[must_use]
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Reads and checks `path`; errors name the file.
    ///
    /// # Errors
    /// [`ConfigError::Read`], or the file's first mistake (as
    /// [`Config::from_file_bytes`]).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let bytes = std::fs::read(path).map_err(|source| ConfigError::Read {
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
