//! What the fuzz targets and the release replay share: the configurations a
//! review is run under, a fixed clock and token, and the invariants checked
//! on every answer ([`check`]). The replay must decode and check an input
//! exactly as the fuzz target did, so both call into this crate.

pub mod check;
pub mod fixtures;
pub mod structured;

use std::sync::OnceLock;

use chrono::{DateTime, Utc};
use sandbox_webhook::config::Config;
use sandbox_webhook::mutate::{Context, FixedToken};

/// libFuzzer's `-max_len` in `run.sh`: inputs up to this size are fuzzed.
pub const MAX_LEN: usize = 16384;

/// The admission time of every review: fixed, so that re-admitting a
/// patched pod sees the `expires-at` the first pass wrote as already there.
pub const NOW: &str = "2026-01-01T00:00:00Z";
/// A generated token: 32 visible ASCII characters, as the real source makes.
pub const TOKEN: &str = "fuzzTokenFuzzTokenFuzzTokenFuzz0";
/// The webhook's own namespace (always excluded).
pub const OWN_NAMESPACE: &str = "sandbox-webhook";

/// Configurations that reach different branches of the core: the defaults;
/// the classic sidecar layout with resources, expiry limits and execd's
/// isolation allowed; egress turned off with a low rule cap; a custom
/// prefix that also excludes the namespace the generated pods use.
const CONFIGS: [(&str, &str); 4] = [
    ("default", "{}"),
    (
        "classic",
        "execd: {resources: {limits: {cpu: 100m, memory: 64Mi}}, allowIsolation: true}\n\
         egress: {mode: dns+nft, disableIPv6: false, nativeSidecar: false, maxRules: 8,\n\
         \x20 resources: {requests: {cpu: 10m}}}\n\
         expiry: {defaultTimeoutSeconds: 3600, maxTimeoutSeconds: 86400}\n",
    ),
    (
        "no-egress",
        "egress: {image: null, maxRules: 2}\nexpiry: {maxTimeoutSeconds: 600}\n",
    ),
    (
        "prefix",
        "prefix: sandbox.example.com\nexcludedNamespaces: [kube-system, excluded]\n",
    ),
];

pub struct Configs {
    pub all: Vec<(&'static str, Config)>,
}

/// The configurations, parsed once. A configuration the binary rejects is a
/// broken harness, not a finding: it fails the very first input loudly.
///
/// # Panics
///
/// When the binary rejects one of [`CONFIGS`].
pub fn configs() -> &'static Configs {
    static CONFIGS_CELL: OnceLock<Configs> = OnceLock::new();
    CONFIGS_CELL.get_or_init(|| Configs {
        all: CONFIGS
            .iter()
            .map(|(name, yaml)| match Config::from_yaml(yaml) {
                Ok(c) => (*name, c),
                Err(e) => panic!("fuzz configuration {name} is rejected: {e}"),
            })
            .collect(),
    })
}

#[must_use]
pub fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(NOW).map_or(DateTime::<Utc>::UNIX_EPOCH, |t| t.with_timezone(&Utc))
}

/// Runs `f` with a context for `config`.
pub fn with_context<R>(config: &Config, f: impl FnOnce(&Context<'_>) -> R) -> R {
    let tokens = FixedToken(TOKEN.into());
    let ctx = Context {
        config,
        now: now(),
        own_namespace: Some(OWN_NAMESPACE),
        tokens: &tokens,
    };
    f(&ctx)
}

/// A Pod CREATE review of `pod` as the apiserver sends it; without a
/// `namespace` the field is left out (a request the apiserver never sends,
/// which the webhook must still answer).
#[must_use]
pub fn pod_create(
    uid: &str,
    namespace: Option<&str>,
    pod: &serde_json::Value,
) -> serde_json::Value {
    let mut request = serde_json::json!({
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "object": pod,
    });
    if let Some(ns) = namespace {
        request["namespace"] = ns.into();
    }
    serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}
