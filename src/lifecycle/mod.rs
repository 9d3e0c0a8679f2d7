//! The lifecycle controller's decisions (SPEC 10): a pod, the configuration
//! and the clock in; what to do with it out. Nothing here does I/O:
//! `crate::controller` is the thin Kubernetes layer around these functions,
//! and `sandbox-webhook diagnose` prints the same decisions.

pub(crate) mod config;
mod diagnose;
pub(crate) mod expiry;
pub(crate) mod platform;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

use crate::config::Config;

pub use diagnose::{Diagnosis, ExpiryReport, PlatformReport, diagnose};
pub use expiry::{ExpiryAction, ExpiryPlan, Owner, Removal};
pub use platform::PlatformReading;

/// The parts of a Pod the decisions read. The controller's watch decodes pods
/// straight into this type, so containers and the rest of the status are
/// skipped by the decoder and never held in memory. The fields the seed
/// treats dynamically stay untyped.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(expecting = "a Pod object", default)]
pub struct SandboxPod {
    pub metadata: ObjectMeta,
    pub spec: Option<SpecFields>,
    pub status: Option<StatusFields>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(expecting = "an object (spec)", default, rename_all = "camelCase")]
pub struct SpecFields {
    pub node_selector: Option<Value>,
    pub affinity: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(expecting = "an object (status)", default, rename_all = "camelCase")]
pub struct StatusFields {
    pub phase: Option<Value>,
    pub reason: Option<Value>,
    pub message: Option<Value>,
    pub conditions: Option<Value>,
}

impl SandboxPod {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(key).map(String::as_str)
    }

    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.metadata
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    /// The pod's namespace; `default` for a manifest that names none, as
    /// kubectl would create it.
    #[must_use]
    pub fn namespace(&self) -> &str {
        self.metadata
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
    }
}

/// Whether the controller looks at this pod at all: a sandbox (label
/// `P/id`) outside the excluded namespaces and the controller's own.
#[must_use]
pub fn is_watched(pod: &SandboxPod, config: &Config, own_namespace: Option<&str>) -> bool {
    let ns = pod.namespace();
    pod.label(&config.keys().id).is_some()
        && !config.excluded_namespaces.iter().any(|e| e == ns)
        && own_namespace != Some(ns)
}

/// The type of the pod condition the controller sets on a hit.
#[must_use]
pub fn condition_type(config: &Config) -> String {
    format!("{}/PlatformUnschedulable", config.prefix)
}

/// Everything the controller would decide for one pod at `now`.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub expiry: ExpiryPlan,
    pub platform: PlatformReading,
}

#[must_use]
pub fn plan(
    pod: &SandboxPod,
    config: &Config,
    own_namespace: Option<&str>,
    now: DateTime<Utc>,
) -> Plan {
    let watched = is_watched(pod, config, own_namespace);
    let mut expiry = expiry::plan(pod, config, now);
    let mut platform = platform::read(pod);
    if !watched {
        expiry.action = ExpiryAction::None;
        platform.unschedulable = false;
        platform.message = None;
    }
    Plan { expiry, platform }
}

#[cfg(test)]
mod tests;
