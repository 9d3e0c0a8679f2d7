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
/// reallocation per doubling, for every container's env, mounts and command.
#[derive(Debug)]
pub struct List<T>(pub Vec<T>);

/// Enough for most lists in a pod; longer ones grow as usual.
const LIST_CAPACITY: usize = 8;

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
        let mut items = Vec::with_capacity(LIST_CAPACITY);
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(List(items))
    }
}

/// A string borrowed from the request unless it holds escapes. serde borrows
/// a `Cow<str>` field marked `borrow`, but not the items of a list or the
/// keys of a map: those need this newtype. Read as a string, not as a
/// newtype, so that a reader that tracks paths sees a map key it reads.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Text<'a>(pub Cow<'a, str>);

deserialize_by_visitor! {
    impl<'de, 'a> for Text<'a>, visitor V<'a> where ['de: 'a];
    expecting "a string", by deserialize_str;
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text(Cow::Owned(v.to_owned())))
    }
}

impl PartialEq<str> for Text<'_> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
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
#[serde(rename_all = "camelCase", expecting = "an object")]
pub struct PodView<'a> {
    #[serde(default, borrow)]
    pub metadata: Option<MetaView<'a>>,
    #[serde(default, borrow)]
    pub spec: Option<SpecView<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an object")]
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
#[serde(rename_all = "camelCase", expecting = "an object")]
pub struct SpecView<'a> {
    #[serde(default, borrow)]
    pub containers: Option<List<ContainerView<'a>>>,
    #[serde(default, borrow)]
    pub init_containers: Option<List<ContainerView<'a>>>,
    #[serde(default, borrow)]
    pub volumes: Option<List<VolumeView<'a>>>,
    #[serde(default, borrow)]
    pub node_selector: Option<NodeSelector<'a>>,
    #[serde(default, borrow)]
    pub affinity: Option<&'a RawValue>,
    #[serde(default)]
    pub host_network: Option<bool>,
    #[serde(default)]
    pub security_context: Option<PodSecurityView>,
}

/// The pod-level `securityContext` fields the injected containers would
/// inherit (`run_as`).
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "a securityContext object", rename_all = "camelCase")]
pub struct PodSecurityView {
    #[serde(default)]
    pub run_as_non_root: Option<bool>,
    #[serde(default)]
    pub run_as_user: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an object")]
pub struct ContainerView<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub command: Option<List<Text<'a>>>,
    #[serde(default, borrow)]
    pub env: Option<List<EnvView<'a>>>,
    #[serde(default, borrow)]
    pub volume_mounts: Option<List<MountView<'a>>>,
    #[serde(default)]
    pub security_context: Option<SecurityContextView<'a>>,
    /// Read only for an egress sidecar that still lacks its token.
    #[serde(default, borrow)]
    pub readiness_probe: Option<&'a RawValue>,
}

/// Only names matter: a variable the webhook would add is never overwritten.
#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "an object")]
pub struct EnvView<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an object")]
pub struct MountView<'a> {
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub mount_path: Cow<'a, str>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an object")]
pub struct SecurityContextView<'a> {
    #[serde(default)]
    pub privileged: Option<bool>,
    #[serde(default, borrow)]
    pub capabilities: Option<CapabilitiesView<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(expecting = "an object")]
pub struct CapabilitiesView<'a> {
    #[serde(default, borrow)]
    pub add: Option<List<Text<'a>>>,
    #[serde(default, borrow)]
    pub drop: Option<List<Text<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", expecting = "an object")]
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

    /// Why `raw`, which [`PodView::parse`] refused, is not a readable pod:
    /// the path of what broke, from `root` (the object's own path), and
    /// what was expected there. Read again with the path tracked, so only
    /// a refused pod pays for that.
    pub fn unreadable(raw: &str, root: &str) -> String {
        match crate::json_error::from_str::<PodView<'_>>(raw, root) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn borrows_what_it_can_and_reads_escapes() {
        let raw = r#"{"metadata":{"annotations":{"a":"1","b\u002fc":"2","a":"3"}},
            "spec":{"containers":[{"name":"m","command":["x","\u0079"],
            "securityContext":{"capabilities":{"add":["NET\u005fRAW"],"drop":["ALL"]}}}]}}"#;
        let pod = PodView::parse(raw).unwrap();
        // The last of a repeated key wins.
        assert_eq!(pod.annotation("a").map(RawValue::get), Some("\"3\""));
        assert_eq!(pod.annotation("b/c").map(RawValue::get), Some("\"2\""));
        assert!(pod.annotation("c").is_none());
        let c = &pod.spec().containers()[0];
        let command: Vec<&str> = c.command.as_deref().unwrap().iter().map(|t| &**t).collect();
        assert_eq!(command, ["x", "y"]);
        assert!(matches!(c.command.as_ref().unwrap()[0].0, Cow::Borrowed(_)));
        let caps = c.capabilities().unwrap();
        assert_eq!(&*caps.add.as_ref().unwrap()[0], "NET_RAW");
        assert!(caps.drop.as_ref().unwrap()[0] == *"ALL");
    }
}
