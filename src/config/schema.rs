//! The file's schema: every section as the webhook holds it, its defaults
//! and its limits. `read` fills it from a file; `mod.rs` is the way in.

use std::fmt;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use thiserror::Error;

use super::controller::ControllerConfig;
use super::keys::Keys;
use super::record::RecordTemplate;

pub const DEFAULT_PREFIX: &str = "opensandbox.io";
/// What opensandbox-server 1.1.1's example configuration installs.
pub const DEFAULT_EXECD_IMAGE: &str = "opensandbox/execd:v1.1.0";
pub const DEFAULT_EGRESS_IMAGE: &str = "opensandbox/egress:v1.1.7";
/// The runtime classes whose sandboxes cannot run the egress sidecar:
/// gVisor has no iptables nat table (contract: egress.runtime-class).
pub const DEFAULT_INCOMPATIBLE_RUNTIME_CLASSES: [&str; 1] = ["gvisor"];
pub const DEFAULT_MAX_RULES: usize = 4096;
/// A pod object is at most 1.5 MiB in etcd and the smallest rule,
/// `{"action":"deny","target":"a"}`, takes 30 bytes of the policy JSON that
/// is copied into the pod, so more rules than this could never be stored.
pub const MAX_MAX_RULES: usize = 50_000;
/// Sandboxes shorter than this are refused (contract: expiry.min).
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
    pub(super) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
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
    /// This release's revision (contract: revision.label): it injects only
    /// the pods of namespaces (or, in namespaces without the label, pods)
    /// labelled `<prefix>/rev: <revision>`, labels what it injects so, and
    /// its controller watches only those. `None` is the default release,
    /// which leaves every pod and namespace so labelled alone.
    pub revision: Option<String>,
    pub excluded_namespaces: Vec<String>,
    pub execd: ExecdConfig,
    pub egress: EgressConfig,
    pub pod: PodConfig,
    pub expiry: ExpiryConfig,
    /// The lifecycle controller's section (contract: config.controller); the
    /// webhook ignores it.
    pub controller: ControllerConfig,
    /// Annotation and label keys derived from `prefix`, computed once at load.
    #[serde(skip)]
    pub(super) keys: Keys,
    /// The configuration's part of the injection record, computed once at
    /// load.
    #[serde(skip)]
    pub(super) record: RecordTemplate,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecdConfig {
    pub image: String,
    pub resources: Option<Value>,
    /// `EXECD_INIT=1` in the main container: bootstrap.sh runs execd as
    /// PID 1 (contract: execd.env-init).
    pub run_as_init: bool,
    /// Whether a pod may ask for execd's isolated sessions
    /// (`<prefix>/execd-isolation`), which need `SYS_ADMIN` and no seccomp
    /// or AppArmor profile (contract: execd.isolation-disabled).
    pub allow_isolation: bool,
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
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` of the sidecar: an `http://` or
    /// `https://` URL with a host.
    pub otlp_endpoint: Option<String>,
    /// Runtime class names whose pods are denied a network policy.
    pub incompatible_runtime_classes: Vec<String>,
    /// The corporate proxy every sidecar chains through (contract:
    /// config.upstream-proxy); `None`: egress leaves directly.
    pub upstream_proxy: Option<UpstreamProxy>,
}

/// Where an upstream proxy's sidecar gets the complete `Proxy-Authorization` value
/// (`OPENSANDBOX_EGRESS_UPSTREAM_PROXY_AUTH`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretKeyRef {
    pub name: String,
    pub key: String,
}

/// The proxy, as checked: `url` is `http(s)://host[:port]`, at most one of
/// `authorization` and `authorization_secret_ref`.
#[derive(Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpstreamProxy {
    pub url: String,
    /// The header value as a literal in every sidecar's env (upstream's
    /// way; the credential then sits in each pod spec).
    pub authorization: Option<String>,
    /// The header value from a Secret in the sandbox's namespace, as
    /// `valueFrom.secretKeyRef`: the credential never sits in a pod spec.
    pub authorization_secret_ref: Option<SecretKeyRef>,
    /// A Secret whose `ca.crt` the sidecar trusts for the proxy's TLS.
    pub ca_secret_name: Option<String>,
}

/// Never the URL or the literal credential, even in a debug dump.
impl fmt::Debug for UpstreamProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamProxy")
            .field("url", &"<not shown>")
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<not shown>"),
            )
            .field(
                "authorization_secret_ref",
                &self
                    .authorization_secret_ref
                    .as_ref()
                    .map(|r| format!("{}/{}", r.name, r.key)),
            )
            .field("ca_secret_name", &self.ca_secret_name)
            .finish()
    }
}

/// What the webhook sets on the sandbox pod itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodConfig {
    /// `Some(false)`: a pod that does not set
    /// `spec.automountServiceAccountToken` gets `false` (contract:
    /// execd.service-account-token); `None` leaves every pod alone. `true` is
    /// not a choice: it is the API's own default.
    pub automount_service_account_token: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiryConfig {
    pub default_timeout_seconds: Option<u64>,
    pub max_timeout_seconds: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        let mut config = Config {
            prefix: DEFAULT_PREFIX.to_owned(),
            revision: None,
            excluded_namespaces: ["kube-system", "kube-public", "kube-node-lease"]
                .map(str::to_owned)
                .to_vec(),
            execd: ExecdConfig::default(),
            egress: EgressConfig::default(),
            pod: PodConfig::default(),
            expiry: ExpiryConfig::default(),
            controller: ControllerConfig::default(),
            keys: Keys::new(DEFAULT_PREFIX),
            record: RecordTemplate::default(),
        };
        config.record = config.make_record();
        config
    }
}

impl Default for ExecdConfig {
    fn default() -> Self {
        ExecdConfig {
            image: DEFAULT_EXECD_IMAGE.to_owned(),
            resources: None,
            run_as_init: false,
            allow_isolation: false,
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
            otlp_endpoint: None,
            incompatible_runtime_classes: DEFAULT_INCOMPATIBLE_RUNTIME_CLASSES
                .map(str::to_owned)
                .to_vec(),
            upstream_proxy: None,
        }
    }
}

impl Default for PodConfig {
    fn default() -> Self {
        PodConfig {
            automount_service_account_token: Some(false),
        }
    }
}

impl Config {
    #[must_use]
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The configuration's part of the injection record.
    #[must_use]
    pub fn record(&self) -> &RecordTemplate {
        &self.record
    }

    /// The record's part, made from the settings that shape an injected
    /// pod (contract: record.config): `prefix`, `execd`, `egress`, `pod`
    /// and `expiry`, compared with their built-in defaults.
    pub(super) fn make_record(&self) -> RecordTemplate {
        let settings = serde_json::json!({
            "prefix": self.prefix,
            "execd": self.execd,
            "egress": self.egress,
            "pod": self.pod,
            "expiry": self.expiry,
        });
        // The sections' own defaults: `Config::default` makes its record
        // with this.
        let defaults = serde_json::json!({
            "prefix": DEFAULT_PREFIX,
            "execd": ExecdConfig::default(),
            "egress": EgressConfig::default(),
            "pod": PodConfig::default(),
            "expiry": ExpiryConfig::default(),
        });
        RecordTemplate::new(
            settings,
            &defaults,
            self.revision.as_deref(),
            &self.execd.image,
            self.egress.image.as_deref(),
        )
    }
}
