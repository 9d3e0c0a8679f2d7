//! The pod as the lifecycle decisions see it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// The parts of a Pod the decisions read. The controller's watch decodes pods
/// straight into this type, so containers, the rest of the status and the
/// metadata no decision reads (`managedFields` above all, often the largest
/// part of a pod) are skipped by the decoder and never held in memory. The
/// fields the seed treats dynamically stay untyped.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, remote = "Self")]
pub struct SandboxPod {
    /// Only the fields of [`Meta`]; the others stay `None`.
    #[serde(deserialize_with = "meta")]
    pub metadata: ObjectMeta,
    pub spec: Option<SpecFields>,
    pub status: Option<StatusFields>,
}

objects_only! {
    impl<'de> for SandboxPod;
}

/// The metadata the controller reads: its identity and version (for the
/// writes' preconditions), deletion, labels, annotations and owners.
#[derive(Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct Meta {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    deletion_timestamp: Option<Time>,
    labels: Option<BTreeMap<String, String>>,
    annotations: Option<BTreeMap<String, String>>,
    owner_references: Option<Vec<OwnerReference>>,
}

fn meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = Option::<Meta>::deserialize(d)?.unwrap_or_default();
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resource_version: m.resource_version,
        deletion_timestamp: m.deletion_timestamp,
        labels: m.labels,
        annotations: m.annotations,
        owner_references: m.owner_references,
        ..ObjectMeta::default()
    })
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase", remote = "Self")]
pub struct SpecFields {
    pub node_selector: Option<Value>,
    pub affinity: Option<Value>,
    /// The containers as their JSON, for the drift audit to read with the
    /// webhook's own pod reader (`super::drift`); never cached.
    pub init_containers: Option<RawJson>,
    pub containers: Option<RawJson>,
}

/// A part of the pod kept as its JSON text.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(transparent)]
pub struct RawJson(pub Box<RawValue>);

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
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

    /// The owner reference marked as the pod's controller, if any.
    #[must_use]
    pub fn controller_reference(&self) -> Option<&OwnerReference> {
        let references = self.metadata.owner_references.as_deref()?;
        references.iter().find(|r| r.controller == Some(true))
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
