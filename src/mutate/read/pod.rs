//! A borrowed, read-only view of the parts of a Pod the webhook looks at.
//!
//! The webhook never re-serializes the pod: it reads this view and emits JSON
//! patch operations against the raw request object, so every field it does not
//! name (newer API fields, other webhooks' additions, `managedFields`) is never
//! even parsed and survives byte for byte. `affinity`, whose shape the seed
//! treats dynamically, is kept as raw JSON and parsed only when a platform is
//! requested.

use std::borrow::Cow;
use std::ops::Deref;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess};
use serde_json::value::RawValue;

use super::k8s::KnownEnv;
use super::lists::{
    CapabilitiesView, Command, EnvNames, Mounts, Owners, SecurityContextView, Volumes,
};
pub use super::raw::Source;
use crate::json::text::Text;

/// Labels or annotations, in document order, with values still raw JSON
/// until one of ours is looked up: the
/// `kubectl.kubernetes.io/last-applied-configuration` annotation alone can be
/// larger than the rest of the pod. Keys are borrowed from the request, so
/// reading them allocates nothing per key (docs/performance.md,
/// "Why the code is shaped this way").
#[derive(Debug, Default)]
pub struct RawMap<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> RawMap<'a> {
    /// A key given twice means its last value, as in any JSON decoder the
    /// apiserver or kubectl use.
    pub fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// The keys in document order (a key given twice appears twice).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| k.as_ref())
    }
}

deserialize_by_visitor! {
    impl<'de, 'a> for RawMap<'a>, visitor V<'a> where ['de: 'a];
    expecting "an object", by deserialize_map;
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some((Text(k), v)) = map.next_entry()? {
            entries.push((k, v));
        }
        Ok(RawMap(entries))
    }
}

/// A JSON list, read with room for a typical pod's items up front: JSON
/// gives no length, so serde grows a plain `Vec` from nothing, one
/// reallocation per doubling. The lists inside a container are not kept at
/// all: each is read into what the decisions need (`lists`).
#[derive(Debug)]
pub struct List<T>(pub Vec<T>);

/// Room for most lists in a pod (eight items), within 1 KiB: glibc serves
/// blocks up to 1,032 bytes from a per-thread cache, and larger ones from
/// its shared bins, which costs more and sorts freed blocks on the way.
/// A container's view is a few hundred bytes, so `containers` starts with
/// room for four. Longer lists grow as usual.
fn list_capacity<T>() -> usize {
    (1024 / size_of::<T>().max(1)).clamp(1, 8)
}

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<T> Deref for List<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

deserialize_by_visitor! {
    impl<'de, T> for List<T>, visitor V<T> where [T: Deserialize<'de>];
    expecting "an array", by deserialize_seq;
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(list_capacity::<T>());
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(List(items))
    }
}

/// `spec.nodeSelector`. The apiserver decodes it as a map of strings before
/// admission, so a value that is not a string (or null) makes the pod
/// unreadable, with an error that names the key. Anything but an object
/// counts as no selector, as in the seed.
#[derive(Debug, Default)]
pub enum NodeSelector<'a> {
    #[default]
    NotAMap,
    /// In document order; `None` for a null value.
    Map(Vec<(Cow<'a, str>, Option<Cow<'a, str>>)>),
}

impl NodeSelector<'_> {
    /// The value of `key`, the last one if given twice, unless null.
    pub fn get(&self, key: &str) -> Option<&str> {
        match self {
            NodeSelector::NotAMap => None,
            NodeSelector::Map(entries) => entries
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .and_then(|(_, v)| v.as_deref()),
        }
    }
}

/// A nodeSelector value: a string, or null (`None`). Anything else is an
/// error about this value, so that the error's path names the key.
struct SelectorValue<'a>(Option<Cow<'a, str>>);

deserialize_by_visitor! {
    impl<'de, 'a> for SelectorValue<'a>, visitor V<'a> where ['de: 'a];
    expecting "a string (quote the value)", by deserialize_any;
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(SelectorValue(Some(Cow::Borrowed(v))))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(SelectorValue(Some(Cow::Owned(v.to_owned()))))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(SelectorValue(None))
    }
}

deserialize_by_visitor! {
    impl<'de, 'a> for NodeSelector<'a>, visitor V<'a> where ['de: 'a];
    expecting "an object of strings", by deserialize_any;
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(4));
        while let Some(Text(key)) = map.next_key()? {
            let SelectorValue(value) = map.next_value()?;
            entries.push((key, value));
        }
        Ok(NodeSelector::Map(entries))
    }
    not_this_shape!(NodeSelector::NotAMap, lists as IgnoredAny);
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct PodView<'a> {
    #[serde(borrow)]
    pub metadata: Option<MetaView<'a>>,
    #[serde(borrow)]
    pub spec: Option<SpecView<'a>>,
    /// The text the view was read from, for the rare decision that needs
    /// a container or volume whole (`raw`): set by [`PodView::parse`], or
    /// by the caller that read the view out of a larger document.
    #[serde(skip)]
    pub source: Source<'a>,
}

objects_only! {
    impl<'de, 'a> for PodView<'a> where ['de: 'a];
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct MetaView<'a> {
    #[serde(default, borrow)]
    pub name: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub generate_name: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub namespace: Option<Text<'a>>,
    #[serde(borrow)]
    pub labels: Option<RawMap<'a>>,
    #[serde(borrow)]
    pub annotations: Option<RawMap<'a>>,
    #[serde(borrow)]
    pub owner_references: Option<Owners<'a>>,
}

objects_only! {
    impl<'de, 'a> for MetaView<'a> where ['de: 'a];
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct SpecView<'a> {
    #[serde(borrow)]
    pub containers: Option<List<ContainerView<'a>>>,
    #[serde(borrow)]
    pub init_containers: Option<List<ContainerView<'a>>>,
    #[serde(borrow)]
    pub volumes: Option<Volumes<'a>>,
    #[serde(borrow)]
    pub node_selector: Option<NodeSelector<'a>>,
    #[serde(borrow)]
    pub affinity: Option<&'a RawValue>,
    pub host_network: Option<bool>,
    pub security_context: Option<PodSecurityView>,
    pub automount_service_account_token: Option<bool>,
    #[serde(default, borrow)]
    pub runtime_class_name: Option<Text<'a>>,
    /// Only the apiserver's `ephemeralcontainers` subresource adds them;
    /// a CREATE that carries some is refused by the apiserver anyway.
    #[serde(borrow)]
    pub ephemeral_containers: Option<List<ContainerView<'a>>>,
    pub share_process_namespace: Option<bool>,
    #[serde(rename = "hostPID")]
    pub host_pid: Option<bool>,
    pub dns_config: Option<DnsConfigView>,
}

objects_only! {
    impl<'de, 'a> for SpecView<'a> where ['de: 'a];
}

/// `spec.dnsConfig`: only whether it names nameservers of its own.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self")]
pub struct DnsConfigView {
    pub nameservers: Option<List<IgnoredAny>>,
}

objects_only! {
    impl<'de> for DnsConfigView;
}

impl DnsConfigView {
    pub fn has_nameservers(&self) -> bool {
        self.nameservers.as_ref().is_some_and(|n| !n.is_empty())
    }
}

/// The pod-level `securityContext` fields the injected containers would
/// inherit (`run_as`).
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct PodSecurityView {
    pub run_as_non_root: Option<bool>,
    pub run_as_user: Option<i64>,
}

objects_only! {
    impl<'de> for PodSecurityView;
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", remote = "Self")]
pub struct ContainerView<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    pub command: Option<Command>,
    pub env: Option<EnvNames>,
    #[serde(borrow)]
    pub volume_mounts: Option<Mounts<'a>>,
    pub security_context: Option<SecurityContextView>,
    /// Read only for an egress sidecar that still lacks its token.
    #[serde(borrow)]
    pub readiness_probe: Option<&'a RawValue>,
}

objects_only! {
    impl<'de, 'a> for ContainerView<'a> where ['de: 'a];
}

impl<'a> PodView<'a> {
    pub fn parse(raw: &'a str) -> Result<Self, serde_json::Error> {
        let mut pod: Self = serde_json::from_str(raw)?;
        pod.source = Source::Pod(raw);
        Ok(pod)
    }

    /// Why `raw`, which [`PodView::parse`] refused, is not a readable pod:
    /// the path of what broke, from `root` (the object's own path), and
    /// what was expected there. Read again with the path tracked, so only
    /// a refused pod pays for that.
    pub fn unreadable(raw: &str, root: &str) -> String {
        match crate::json::error::from_str::<PodView<'_>>(raw, root) {
            Err(e) => e.to_string(),
            // The same reader on the same text fails the same way.
            Ok(_) => "it is not a pod".to_owned(),
        }
    }

    pub fn label(&self, key: &str) -> Option<&'a RawValue> {
        self.metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref())
            .and_then(|l| l.get(key))
    }

    pub fn annotation(&self, key: &str) -> Option<&'a RawValue> {
        self.metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(key))
    }

    pub fn annotation_keys(&self) -> impl Iterator<Item = &str> {
        self.metadata
            .as_ref()
            .and_then(|m| m.annotations.as_ref())
            .into_iter()
            .flat_map(RawMap::keys)
    }

    pub fn has_labels(&self) -> bool {
        self.metadata.as_ref().is_some_and(|m| m.labels.is_some())
    }

    pub fn has_annotations(&self) -> bool {
        self.metadata
            .as_ref()
            .is_some_and(|m| m.annotations.is_some())
    }

    /// The controller owner's API group and kind, if the pod has one.
    pub fn controller_owner(&self) -> Option<(&str, &str)> {
        self.metadata
            .as_ref()
            .and_then(|m| m.owner_references.as_ref())
            .and_then(|o| o.controller.as_ref())
            .map(|(group, kind)| (group.as_ref(), kind.as_ref()))
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
            security_context: None,
            automount_service_account_token: None,
            runtime_class_name: None,
            ephemeral_containers: None,
            share_process_namespace: None,
            host_pid: None,
            dns_config: None,
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

    pub fn ephemeral_containers(&self) -> &[ContainerView<'a>] {
        self.ephemeral_containers.as_deref().unwrap_or_default()
    }

    /// Every container and init container, for checks that span both lists.
    pub fn all_containers(&self) -> impl Iterator<Item = &ContainerView<'a>> {
        self.init_containers().iter().chain(self.containers())
    }
}

impl ContainerView<'_> {
    pub fn has_env(&self, name: KnownEnv) -> bool {
        self.env.is_some_and(|e| e.has(name))
    }

    /// Mounts the binary volume where execd expects it.
    pub fn mounts_bin(&self) -> bool {
        self.volume_mounts.as_ref().is_some_and(|m| m.bin)
    }

    pub fn capabilities(&self) -> Option<&CapabilitiesView> {
        self.security_context
            .as_ref()
            .and_then(|s| s.capabilities.as_ref())
    }
}

#[cfg(test)]
mod tests;
