//! A borrowed, read-only view of the parts of a Pod the webhook looks at.
//!
//! The webhook never re-serializes the pod: it reads this view and emits JSON
//! patch operations against the raw request object, so every field it does not
//! name (newer API fields, other webhooks' additions, `managedFields`) is never
//! even parsed and survives byte for byte. Fields whose shape the seed treats
//! dynamically (`nodeSelector`, `affinity`) are kept as raw JSON and parsed only
//! when a platform is requested.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

/// Annotation values stay raw until one of ours is looked up: the
/// `kubectl.kubernetes.io/last-applied-configuration` annotation alone can be
/// larger than the rest of the pod.
pub type RawMap<'a> = BTreeMap<Cow<'a, str>, &'a RawValue>;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodView<'a> {
    #[serde(default, borrow)]
    pub metadata: Option<MetaView<'a>>,
    #[serde(default, borrow)]
    pub spec: Option<SpecView<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MetaView<'a> {
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub generate_name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub namespace: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub labels: Option<RawMap<'a>>,
    #[serde(default, borrow)]
    pub annotations: Option<RawMap<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpecView<'a> {
    #[serde(default, borrow)]
    pub containers: Option<Vec<ContainerView<'a>>>,
    #[serde(default, borrow)]
    pub init_containers: Option<Vec<ContainerView<'a>>>,
    #[serde(default, borrow)]
    pub volumes: Option<Vec<VolumeView<'a>>>,
    #[serde(default, borrow)]
    pub node_selector: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub affinity: Option<&'a RawValue>,
    #[serde(default)]
    pub host_network: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerView<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub command: Option<Vec<Cow<'a, str>>>,
    #[serde(default, borrow)]
    pub env: Option<Vec<EnvView<'a>>>,
    #[serde(default, borrow)]
    pub volume_mounts: Option<Vec<MountView<'a>>>,
    #[serde(default)]
    pub security_context: Option<SecurityContextView<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct EnvView<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub value: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MountView<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub mount_path: Cow<'a, str>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContextView<'a> {
    #[serde(default)]
    pub privileged: Option<bool>,
    #[serde(default, borrow)]
    pub capabilities: Option<CapabilitiesView<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct CapabilitiesView<'a> {
    #[serde(default, borrow)]
    pub add: Option<Vec<Cow<'a, str>>>,
    #[serde(default, borrow)]
    pub drop: Option<Vec<Cow<'a, str>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeView<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default)]
    pub empty_dir: Option<IgnoredAny>,
}

impl<'a> PodView<'a> {
    pub fn parse(raw: &'a str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(raw)
    }

    pub fn label(&self, key: &str) -> Option<&'a RawValue> {
        self.metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref())
            .and_then(|l| l.get(key).copied())
    }

    pub fn annotation(&self, key: &str) -> Option<&'a RawValue> {
        self.metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(key).copied())
    }

    pub fn has_labels(&self) -> bool {
        self.metadata.as_ref().is_some_and(|m| m.labels.is_some())
    }

    pub fn has_annotations(&self) -> bool {
        self.metadata
            .as_ref()
            .is_some_and(|m| m.annotations.is_some())
    }

    pub fn namespace(&self) -> Option<&str> {
        self.metadata.as_ref().and_then(|m| m.namespace.as_deref())
    }

    pub fn spec(&self) -> &SpecView<'a> {
        static EMPTY: SpecView<'static> = SpecView {
            containers: None,
            init_containers: None,
            volumes: None,
            node_selector: None,
            affinity: None,
            host_network: None,
        };
        self.spec.as_ref().unwrap_or(&EMPTY)
    }
}

impl<'a> SpecView<'a> {
    pub fn containers(&self) -> &[ContainerView<'a>] {
        self.containers.as_deref().unwrap_or_default()
    }

    pub fn init_containers(&self) -> &[ContainerView<'a>] {
        self.init_containers.as_deref().unwrap_or_default()
    }

    pub fn volumes(&self) -> &[VolumeView<'a>] {
        self.volumes.as_deref().unwrap_or_default()
    }

    /// Every container and init container, for checks that span both lists.
    pub fn all_containers(&self) -> impl Iterator<Item = &ContainerView<'a>> {
        self.init_containers().iter().chain(self.containers())
    }
}

impl ContainerView<'_> {
    pub fn env(&self) -> &[EnvView<'_>] {
        self.env.as_deref().unwrap_or_default()
    }

    pub fn mounts(&self) -> &[MountView<'_>] {
        self.volume_mounts.as_deref().unwrap_or_default()
    }

    pub fn has_env(&self, name: &str) -> bool {
        self.env().iter().any(|e| e.name == name)
    }

    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env()
            .iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.as_deref())
    }

    pub fn capabilities(&self) -> Option<&CapabilitiesView<'_>> {
        self.security_context
            .as_ref()
            .and_then(|s| s.capabilities.as_ref())
    }
}

impl MountView<'_> {
    /// `/opt/opensandbox/` and `/opt/opensandbox` are the same directory.
    pub fn normalized_path(&self) -> &str {
        let trimmed = self.mount_path.trim_end_matches('/');
        if trimmed.is_empty() { "/" } else { trimmed }
    }
}
