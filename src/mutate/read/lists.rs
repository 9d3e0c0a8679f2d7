//! What the decisions read of a pod spec's lists (a container's `command`,
//! `env`, `volumeMounts` and capabilities, the spec's `volumes`): each list
//! is read item by item into the few facts the decisions ask of it, and its
//! items are not kept. Strings are borrowed from the request ([`Text`]).

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, SeqAccess};

use crate::json::text::Text;

use super::k8s::{
    BIN_MOUNT, BIN_VOLUME, BOOTSTRAP, ISOLATION_MOUNT, ISOLATION_VOLUME, KnownEnv, RuntimeName,
    TOKEN_VOLUME_PREFIX, UPSTREAM_CA_VOLUME, runtime_drops, same_capability, same_dir,
};

/// An `env` item. Only names matter: a variable the webhook would add is
/// never overwritten. (The value of `OPENSANDBOX_ID`, which the webhook
/// sets, is read from the pod's text when an entry of that name is there,
/// `sandbox`: reading every item's value cost 12k instructions of a 10 KB
/// review, and keeping each as raw text 5k.)
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct EnvView<'a> {
    #[serde(default, borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    value_from: Option<WithFieldRef<'a>>,
}

objects_only! {
    impl<'de, 'a> for EnvView<'a> where ['de: 'a];
}

/// An env item's `valueFrom`, or an item of a `downwardAPI` volume or
/// projected source: only a `fieldRef` matters (the downward API).
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct WithFieldRef<'a> {
    #[serde(borrow)]
    field_ref: Option<FieldRefView<'a>>,
}

objects_only! {
    impl<'de, 'a> for WithFieldRef<'a> where ['de: 'a];
}

impl WithFieldRef<'_> {
    /// Reads the pod's annotations or labels, all or one: where the egress
    /// token lives (`egress::guard` reads such a reference whole).
    fn reads_metadata_maps(&self) -> bool {
        self.field_ref
            .as_ref()
            .is_some_and(|f| reads_metadata_maps(&f.field_path))
    }
}

/// A downward API `fieldRef`, in env or in a volume.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct FieldRefView<'a> {
    #[serde(default, borrow)]
    field_path: Cow<'a, str>,
}

objects_only! {
    impl<'de, 'a> for FieldRefView<'a> where ['de: 'a];
}

/// Whether a downward API `fieldPath` reads the pod's annotations or
/// labels (`metadata.annotations`, `metadata.labels['k']`...).
pub(crate) fn reads_metadata_maps(field_path: &str) -> bool {
    let path = field_path.trim_start();
    path.starts_with("metadata.annotations") || path.starts_with("metadata.labels")
}

/// The items of a `downwardAPI` volume or projected source: whether one
/// reads the annotations or labels.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self")]
struct DownwardView {
    items: Option<DownwardItems>,
}

objects_only! {
    impl<'de> for DownwardView;
}

#[derive(Debug, Default)]
struct DownwardItems(bool);

/// A `projected` volume: whether a `downwardAPI` source reads the
/// annotations or labels.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self")]
struct ProjectedView {
    sources: Option<ProjectedSources>,
}

objects_only! {
    impl<'de> for ProjectedView;
}

#[derive(Debug, Default)]
struct ProjectedSources(bool);

#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct ProjectedSource {
    #[serde(rename = "downwardAPI")]
    downward_api: Option<DownwardView>,
}

objects_only! {
    impl<'de> for ProjectedSource;
}

impl DownwardView {
    fn reads_metadata_maps(&self) -> bool {
        self.items.as_ref().is_some_and(|i| i.0)
    }
}

impl ProjectedView {
    fn reads_metadata_maps(&self) -> bool {
        self.sources.as_ref().is_some_and(|s| s.0)
    }
}

/// A `volumeMounts` item.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct MountView<'a> {
    #[serde(default, borrow)]
    name: Cow<'a, str>,
    #[serde(default, borrow)]
    mount_path: Cow<'a, str>,
}

objects_only! {
    impl<'de, 'a> for MountView<'a> where ['de: 'a];
}

impl MountView<'_> {
    /// `/opt/opensandbox/`, `/opt//opensandbox` and `/opt/opensandbox` are
    /// the same directory.
    fn at_bin_mount(&self) -> bool {
        same_dir(&self.mount_path, BIN_MOUNT)
    }
}

/// A `volumes` item.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct VolumeView<'a> {
    #[serde(default, borrow)]
    name: Cow<'a, str>,
    empty_dir: Option<IgnoredAny>,
    projected: Option<ProjectedView>,
    #[serde(rename = "downwardAPI")]
    downward_api: Option<DownwardView>,
}

objects_only! {
    impl<'de, 'a> for VolumeView<'a> where ['de: 'a];
}

/// A list read item by item (each item as strictly as a list of them would
/// be, so a malformed item is reported the same way) into what the
/// decisions need, without keeping the items: no allocation per list
/// (docs/performance.md, "Why the code is shaped this way").
macro_rules! summary_of_list {
    ($ty:ty $(, $lt:lifetime)?; $item:ty, |$summary:ident, $it:ident| $fold:block) => {
        impl<'de $(: $lt, $lt)?> Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V<'de $(, $lt)?>(std::marker::PhantomData<(&'de (), fn() -> $ty)>);
                impl<'de $(: $lt, $lt)?> de::Visitor<'de> for V<'de $(, $lt)?> {
                    type Value = $ty;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str("an array")
                    }
                    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<$ty, A::Error> {
                        let mut $summary = <$ty>::default();
                        while let Some($it) = seq.next_element::<$item>()? $fold
                        Ok($summary)
                    }
                }
                d.deserialize_seq(V(std::marker::PhantomData))
            }
        }
    };
}

summary_of_list!(DownwardItems; WithFieldRef<'de>, |found, item| {
    found.0 |= item.reads_metadata_maps();
});

summary_of_list!(ProjectedSources; ProjectedSource, |found, source| {
    found.0 |= source.downward_api.as_ref().is_some_and(DownwardView::reads_metadata_maps);
});

/// `command`, as execd's decision reads it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    #[default]
    Empty,
    /// Starts with `bootstrap.sh`: execd is already wrapped around it.
    Wrapped,
    Other,
}

summary_of_list!(Command; Text<'de>, |command, item| {
    if command == Command::Empty {
        command = if *item == *BOOTSTRAP {
            Command::Wrapped
        } else {
            Command::Other
        };
    }
});

/// An `ownerReferences` item.
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
struct OwnerView<'a> {
    #[serde(default, borrow)]
    api_version: Cow<'a, str>,
    #[serde(default, borrow)]
    kind: Cow<'a, str>,
    controller: Option<bool>,
}

objects_only! {
    impl<'de, 'a> for OwnerView<'a> where ['de: 'a];
}

/// `metadata.ownerReferences`, as the expiry reads it: the controller
/// owner's API group and kind.
#[derive(Debug, Default)]
pub struct Owners<'a> {
    pub controller: Option<(Cow<'a, str>, Cow<'a, str>)>,
}

summary_of_list!(Owners<'a>, 'a; OwnerView<'de>, |owners, o| {
    if o.controller == Some(true) && owners.controller.is_none() {
        let group = match o.api_version {
            Cow::Borrowed(v) => Cow::Borrowed(v.rsplit_once('/').map_or("", |(g, _)| g)),
            Cow::Owned(v) => Cow::Owned(v.rsplit_once('/').map_or("", |(g, _)| g).to_owned()),
        };
        owners.controller = Some((group, o.kind));
    }
});

/// The [`KnownEnv`] names a container's `env` has, and the index of its
/// last `OPENSANDBOX_ID` entry (the one that counts: a later entry of a
/// name wins).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EnvNames {
    names: u8,
    len: usize,
    pub id_at: Option<usize>,
    /// Some entry takes its value from the pod's annotations or labels
    /// (`valueFrom.fieldRef`), where the egress token lives.
    pub reads_metadata_maps: bool,
}

impl EnvNames {
    pub fn has(self, name: KnownEnv) -> bool {
        self.names & (1 << name as u8) != 0
    }
}

summary_of_list!(EnvNames; EnvView<'de>, |names, item| {
    if let Some(known) = KnownEnv::ALL.into_iter().find(|k| item.name == k.name()) {
        names.names |= 1 << known as u8;
        if known == KnownEnv::Id {
            names.id_at = Some(names.len);
        }
    }
    names.reads_metadata_maps |= item
        .value_from
        .as_ref()
        .is_some_and(WithFieldRef::reads_metadata_maps);
    names.len += 1;
});

/// `volumeMounts`, as execd's decisions read it.
#[derive(Debug, Default)]
pub struct Mounts<'a> {
    /// The binary volume is mounted where execd expects it.
    pub bin: bool,
    /// The first other volume mounted at that path.
    pub bin_path_taken_by: Option<Cow<'a, str>>,
    /// The isolated sessions' volume is mounted where execd expects it.
    pub isolation: bool,
    /// The mounts of a service-account token volume (`kube-api-access-*`):
    /// the first one's index and volume name, and how many there are.
    pub token: Option<(usize, Cow<'a, str>)>,
    pub token_count: u8,
    len: usize,
}

summary_of_list!(Mounts<'a>, 'a; MountView<'de>, |mounts, m| {
    if m.at_bin_mount() {
        if m.name == BIN_VOLUME {
            mounts.bin = true;
        } else if mounts.bin_path_taken_by.is_none() {
            mounts.bin_path_taken_by = Some(m.name);
        }
    } else if m.name.starts_with(TOKEN_VOLUME_PREFIX) {
        mounts.token_count = mounts.token_count.saturating_add(1);
        if mounts.token.is_none() {
            mounts.token = Some((mounts.len, m.name));
        }
    } else if m.name == ISOLATION_VOLUME && same_dir(&m.mount_path, ISOLATION_MOUNT) {
        mounts.isolation = true;
    }
    mounts.len += 1;
});

/// `spec.volumes`, as execd's decisions read it.
#[derive(Debug, Default)]
pub struct Volumes<'a> {
    /// The first volume named like the binary volume.
    pub bin: Option<VolumeAt>,
    /// The first volume named like the isolated sessions' volume.
    pub isolation: Option<VolumeAt>,
    /// The first volume named like the upstream proxy's CA volume.
    pub upstream_ca: Option<VolumeAt>,
    /// The first projected `kube-api-access-*` volume: the service-account
    /// token the apiserver mounted. Its index and name.
    pub token: Option<(usize, Cow<'a, str>)>,
    /// How many volumes there are.
    pub len: usize,
    /// Some `downwardAPI` volume or projected source reads the pod's
    /// annotations or labels, where the egress token lives.
    pub reads_metadata_maps: bool,
}

/// A volume under a name the webhook owns: where it is and whether it is
/// an emptyDir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VolumeAt {
    pub index: usize,
    pub empty_dir: bool,
}

summary_of_list!(Volumes<'a>, 'a; VolumeView<'de>, |volumes, v| {
    let at = VolumeAt { index: volumes.len, empty_dir: v.empty_dir.is_some() };
    if v.name == BIN_VOLUME {
        volumes.bin = volumes.bin.or(Some(at));
    } else if v.name == ISOLATION_VOLUME {
        volumes.isolation = volumes.isolation.or(Some(at));
    } else if v.name == UPSTREAM_CA_VOLUME {
        volumes.upstream_ca = volumes.upstream_ca.or(Some(at));
    } else if volumes.token.is_none() && v.projected.is_some() && v.name.starts_with(TOKEN_VOLUME_PREFIX) {
        volumes.token = Some((volumes.len, v.name));
    }
    volumes.reads_metadata_maps |= v.downward_api.as_ref().is_some_and(DownwardView::reads_metadata_maps)
        || v.projected.as_ref().is_some_and(ProjectedView::reads_metadata_maps);
    volumes.len += 1;
});

#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct SecurityContextView {
    pub privileged: Option<bool>,
    pub capabilities: Option<CapabilitiesView>,
    pub seccomp_profile: Option<ProfileView>,
    pub app_armor_profile: Option<ProfileView>,
}

/// A `seccompProfile` or `appArmorProfile`: only whether it is
/// `Unconfined` matters (isolated sessions need it so).
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self", rename_all = "camelCase")]
pub struct ProfileView {
    #[serde(rename = "type")]
    pub kind: Option<String>,
}

objects_only! {
    impl<'de> for ProfileView;
}

impl ProfileView {
    pub fn unconfined(&self) -> bool {
        self.kind.as_deref() == Some("Unconfined")
    }
}

objects_only! {
    impl<'de> for SecurityContextView;
}

#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self")]
pub struct CapabilitiesView {
    pub add: Option<Capabilities>,
    pub drop: Option<Dropped>,
}

objects_only! {
    impl<'de> for CapabilitiesView;
}

/// A `capabilities.add` list, as the egress decisions read it: each item as
/// any runtime could read it ([`RuntimeName`]). A few bytes: every
/// container of every review may hold one (docs/performance.md).
#[derive(Debug, Default)]
pub struct Capabilities {
    /// The first item that is `NET_ADMIN`, `NET_RAW` or `ALL`, named by the
    /// first of them it matches.
    pub first_net: Option<Named>,
    /// The first item that is `SYS_PTRACE`.
    pub sys_ptrace: Option<Named>,
    /// Some item is `SYS_ADMIN` (any case, with or without `CAP_`).
    pub sys_admin: bool,
}

/// A `capabilities.drop` list, as every runtime reads it
/// ([`runtime_drops`]): only what it takes away is read, so its items (on
/// nearly every container: `drop: [ALL]`) are never read as `add` items.
#[derive(Debug, Default)]
pub struct Dropped {
    /// Some item takes `NET_ADMIN` away (`NET_ADMIN` or `ALL`).
    pub drops_net_admin: bool,
    /// Some item takes `NET_RAW` away (`NET_RAW` or `ALL`).
    pub drops_net_raw: bool,
}

/// A capability an item names, and whether the item is written otherwise
/// than the capability's name in ASCII of any case, with or without
/// `CAP_` (`net_admın` or ` NET_ADMIN` for `NET_ADMIN`): a sentence then
/// cannot name the item by the capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    index: u8,
    pub unusual: bool,
}

/// The capabilities [`Named`] names: first the three that let a container
/// rewrite the egress sidecar's rules (`NET_ADMIN`, `ALL`) or read and forge
/// the pod's traffic (`NET_RAW`), then `SYS_PTRACE`.
const NAMED: [&str; 4] = ["NET_ADMIN", "NET_RAW", "ALL", "SYS_PTRACE"];

impl Named {
    /// `NAMED[index]`, as `item` wrote it.
    fn of(index: u8, item: &str) -> Self {
        let name = NAMED[usize::from(index)];
        let bare = item
            .get(..4)
            .filter(|p| p.eq_ignore_ascii_case("CAP_"))
            .map_or(item, |_| &item[4..]);
        Named {
            index,
            unusual: !bare.eq_ignore_ascii_case(name),
        }
    }

    #[must_use]
    pub fn capability(self) -> &'static str {
        NAMED[usize::from(self.index)]
    }
}

summary_of_list!(Capabilities; Text<'de>, |caps, cap| {
    let read = RuntimeName::of(&cap);
    if caps.first_net.is_none()
        && let Some(net) = (0..3u8).find(|&i| read.is(NAMED[usize::from(i)]))
    {
        caps.first_net = Some(Named::of(net, &cap));
    }
    if caps.sys_ptrace.is_none() && read.is(NAMED[3]) {
        caps.sys_ptrace = Some(Named::of(3, &cap));
    }
    caps.sys_admin |= same_capability(&cap, "SYS_ADMIN");
});

summary_of_list!(Dropped; Text<'de>, |dropped, cap| {
    dropped.drops_net_admin |= runtime_drops(&cap, "NET_ADMIN");
    dropped.drops_net_raw |= runtime_drops(&cap, "NET_RAW");
});
