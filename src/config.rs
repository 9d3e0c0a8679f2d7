//! The webhook's configuration file (SPEC section 8).
//!
//! Every field has a default, so an empty file is the built-in configuration.
//! Loading validates the whole file and names the offending field; the server
//! keeps the previous configuration when a reloaded file is invalid.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

pub const DEFAULT_PREFIX: &str = "opensandbox.io";
pub const DEFAULT_EXECD_IMAGE: &str = "opensandbox/execd:v1.0.18";
pub const DEFAULT_EGRESS_IMAGE: &str = "opensandbox/egress:v1.1.0";
pub const DEFAULT_MAX_RULES: usize = 4096;
/// Sandboxes shorter than this are refused (SPEC 6).
pub const MIN_TIMEOUT_SECONDS: u64 = 60;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config field `{field}`: {message}")]
    Invalid { field: String, message: String },
}

impl ConfigError {
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EgressMode {
    #[serde(rename = "dns")]
    Dns,
    #[serde(rename = "dns+nft")]
    DnsNft,
}

impl EgressMode {
    pub fn as_str(self) -> &'static str {
        match self {
            EgressMode::Dns => "dns",
            EgressMode::DnsNft => "dns+nft",
        }
    }

    /// Annotation values are trimmed and case-insensitive.
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ExecdConfig {
    pub image: String,
    pub resources: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
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
            controller: Default::default(),
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
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    /// Parses and validates a YAML (or JSON) document. An empty document is
    /// the default configuration.
    pub fn from_yaml(text: &str) -> Result<Self, ConfigError> {
        let mut config = if text.trim().is_empty() {
            Config::default()
        } else {
            let de = serde_yaml_ng::Deserializer::from_str(text);
            serde_path_to_error::deserialize::<_, Option<Config>>(de)
                .map_err(|e| {
                    let field = e.path().to_string();
                    let field = if field == "." {
                        "(top level)".into()
                    } else {
                        field
                    };
                    ConfigError::invalid(field, e.into_inner().to_string())
                })?
                .unwrap_or_default()
        };
        config.validate()?;
        config.keys = Keys::new(&config.prefix);
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        validate_prefix(&self.prefix)?;
        for (i, ns) in self.excluded_namespaces.iter().enumerate() {
            if ns.trim().is_empty() {
                return Err(ConfigError::invalid(
                    format!("excludedNamespaces[{i}]"),
                    "must not be empty",
                ));
            }
        }
        if self.execd.image.trim().is_empty() {
            return Err(ConfigError::invalid("execd.image", "must not be empty"));
        }
        if let Some(image) = &self.egress.image
            && image.trim().is_empty()
        {
            return Err(ConfigError::invalid(
                "egress.image",
                "must not be empty (use null to turn egress injection off)",
            ));
        }
        validate_resources("execd.resources", self.execd.resources.as_ref())?;
        validate_resources("egress.resources", self.egress.resources.as_ref())?;
        if self.egress.max_rules == 0 {
            return Err(ConfigError::invalid(
                "egress.maxRules",
                "must be at least 1",
            ));
        }
        let expiry = &self.expiry;
        for (field, value) in [
            (
                "expiry.defaultTimeoutSeconds",
                expiry.default_timeout_seconds,
            ),
            ("expiry.maxTimeoutSeconds", expiry.max_timeout_seconds),
        ] {
            if let Some(v) = value
                && v < MIN_TIMEOUT_SECONDS
            {
                return Err(ConfigError::invalid(
                    field,
                    format!("must be at least {MIN_TIMEOUT_SECONDS}, got {v}"),
                ));
            }
        }
        if let (Some(default), Some(max)) =
            (expiry.default_timeout_seconds, expiry.max_timeout_seconds)
            && default > max
        {
            return Err(ConfigError::invalid(
                "expiry.defaultTimeoutSeconds",
                format!("{default} exceeds expiry.maxTimeoutSeconds ({max})"),
            ));
        }
        self.controller
            .validate()
            .map_err(|(field, message)| ConfigError::invalid(field, message))?;
        Ok(())
    }
}

/// The prefix becomes the prefix of label and annotation keys, so it must be a
/// DNS subdomain.
fn validate_prefix(prefix: &str) -> Result<(), ConfigError> {
    let valid_label = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if prefix.is_empty() || prefix.len() > 253 || !prefix.split('.').all(valid_label) {
        return Err(ConfigError::invalid(
            "prefix",
            format!("'{prefix}' is not a DNS subdomain such as opensandbox.io"),
        ));
    }
    Ok(())
}

/// Resources are copied into containers as given, so they must already be a
/// valid Kubernetes ResourceRequirements object.
fn validate_resources(field: &str, value: Option<&Value>) -> Result<(), ConfigError> {
    use k8s_openapi::api::core::v1::ResourceRequirements;
    let Some(value) = value else { return Ok(()) };
    let Some(map) = value.as_object() else {
        return Err(ConfigError::invalid(
            field,
            "must be an object with limits and/or requests",
        ));
    };
    if let Some(unknown) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "limits" | "requests" | "claims"))
    {
        return Err(ConfigError::invalid(
            format!("{field}.{unknown}"),
            "unknown field, expected limits, requests or claims",
        ));
    }
    serde_json::from_value::<ResourceRequirements>(value.clone())
        .map(|_| ())
        .map_err(|e| ConfigError::invalid(field, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_default() {
        let c = Config::from_yaml("").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.keys().id, "opensandbox.io/id");
    }

    #[test]
    fn spec_example_parses() {
        let c = Config::from_yaml(
            r#"
prefix: example.com
excludedNamespaces: [kube-system, kube-public, kube-node-lease]
execd:   {image: "opensandbox/execd:v1.0.18", resources: null}
egress:  {image: "opensandbox/egress:v1.1.0", mode: dns+nft, disableIPv6: false, nativeSidecar: false, maxRules: 10, resources: {limits: {cpu: 100m}}}
expiry:  {defaultTimeoutSeconds: 600, maxTimeoutSeconds: 3600}
"#,
        )
        .unwrap();
        assert_eq!(c.keys().expires_at, "example.com/expires-at");
        assert_eq!(c.egress.mode, EgressMode::DnsNft);
        assert!(!c.egress.native_sidecar);
        assert_eq!(c.expiry.max_timeout_seconds, Some(3600));
    }

    #[test]
    fn partial_sections_keep_defaults() {
        let c = Config::from_yaml("egress: {mode: dns}").unwrap();
        assert_eq!(c.egress.image.as_deref(), Some(DEFAULT_EGRESS_IMAGE));
        assert!(c.egress.native_sidecar);
    }

    fn err(yaml: &str) -> String {
        Config::from_yaml(yaml).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_the_field() {
        assert!(err("egress: {mode: nft}").contains("egress.mode"));
        assert!(err("execd: {imag: x}").contains("execd"));
        assert!(err("execd: {imag: x}").contains("imag"));
        assert!(err("egress: {maxRules: 0}").contains("egress.maxRules"));
        assert!(err("prefix: Bad_Prefix").contains("prefix"));
        assert!(err("expiry: {maxTimeoutSeconds: 10}").contains("expiry.maxTimeoutSeconds"));
        assert!(
            err("expiry: {defaultTimeoutSeconds: 900, maxTimeoutSeconds: 600}")
                .contains("expiry.defaultTimeoutSeconds")
        );
        assert!(err("egress: {resources: {limit: {}}}").contains("egress.resources.limit"));
        assert!(err("egress: {image: ''}").contains("egress.image"));
        assert!(err("execd: {image: ' '}").contains("execd.image"));
        assert!(err("excludedNamespaces: ['']").contains("excludedNamespaces[0]"));
        assert!(err("unknown: 1").contains("unknown"));
    }

    #[test]
    fn null_egress_image_is_allowed() {
        let c = Config::from_yaml("egress: {image: null}").unwrap();
        assert_eq!(c.egress.image, None);
    }
}
