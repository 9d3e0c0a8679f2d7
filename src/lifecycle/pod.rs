//! The pod as the lifecycle decisions see it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::Value;

/// The parts of a Pod the decisions read. The controller's watch decodes pods
/// straight into this type, so containers and the rest of the status are
/// skipped by the decoder and never held in memory. The fields the seed
/// treats dynamically stay untyped.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, remote = "Self")]
pub struct SandboxPod {
    pub metadata: ObjectMeta,
    pub spec: Option<SpecFields>,
    pub status: Option<StatusFields>,
}

objects_only! {
    impl<'de> for SandboxPod;
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", remote = "Self")]
pub struct SpecFields {
    pub node_selector: Option<Value>,
    pub affinity: Option<Value>,
}

objects_only! {
    impl<'de> for SpecFields;
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", remote = "Self")]
pub struct StatusFields {
    pub phase: Option<Value>,
    pub reason: Option<Value>,
    pub message: Option<Value>,
    pub conditions: Option<Value>,
}

objects_only! {
    impl<'de> for StatusFields;
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
