//! What the decisions read of a pod spec's lists (a container's `command`,
//! `env`, `volumeMounts` and capabilities, the spec's `volumes`): each list
//! is read item by item into the few facts the decisions ask of it, and its
//! items are not kept. Strings are borrowed from the request ([`Text`]).

use std::borrow::Cow;
use std::ops::Deref;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, SeqAccess};

use super::k8s::{
    BIN_MOUNT, BIN_VOLUME, BOOTSTRAP, ISOLATION_MOUNT, ISOLATION_VOLUME, KnownEnv,
    TOKEN_VOLUME_PREFIX, UPSTREAM_CA_VOLUME, same_capability, same_dir,
};

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

/// An `env` item. Only names matter: a variable the webhook would add is
/// never overwritten. (The value of `OPENSANDBOX_ID`, which the webhook
/// sets, is read from the pod's text when an entry of that name is there,
/// `sandbox`: reading every item's value cost 12k instructions of a 10 KB
/// review, and keeping each as raw text 5k.)
#[derive(Debug, Default, Deserialize)]
#[serde(remote = "Self")]
struct EnvView<'a> {
    #[serde(default, borrow)]
    name: Cow<'a, str>,
}

objects_only! {
    impl<'de, 'a> for EnvView<'a> where ['de: 'a];
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
    projected: Option<IgnoredAny>,
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
    pub drop: Option<Capabilities>,
}

objects_only! {
    impl<'de> for CapabilitiesView;
}

/// A capability list, as the egress decisions read it. Names match without
/// case and with or without `CAP_` ([`same_capability`]).
#[derive(Debug, Default)]
pub struct Capabilities {
    /// The first item that is one of [`NET_CAPABILITIES`], named by the
    /// first of them it matches.
    pub first_net: Option<&'static str>,
    /// Some item is `NET_ADMIN` or `ALL`: dropping either takes
    /// `NET_ADMIN` away.
    pub net_admin_or_all: bool,
    /// Some item is `SYS_ADMIN`.
    pub sys_admin: bool,
}

/// The capabilities that let a container rewrite the egress sidecar's rules.
pub const NET_CAPABILITIES: [&str; 3] = ["NET_ADMIN", "NET_RAW", "ALL"];

summary_of_list!(Capabilities; Text<'de>, |caps, cap| {
    let net = NET_CAPABILITIES
        .into_iter()
        .find(|w| same_capability(&cap, w));
    caps.first_net = caps.first_net.or(net);
    caps.net_admin_or_all |= same_capability(&cap, "NET_ADMIN") || same_capability(&cap, "ALL");
    caps.sys_admin |= same_capability(&cap, "SYS_ADMIN");
});
