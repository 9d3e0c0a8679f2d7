//! `spec.automountServiceAccountToken` (contract: execd.service-account-token):
//! a sandbox runs untrusted code, so a pod that does not set the field gets
//! `false` (`pod.automountServiceAccountToken: false`, the default).
//!
//! The field alone is not enough at admission: the apiserver's
//! `ServiceAccount` admission runs before mutating webhooks, and has already
//! added the token's projected volume (`kube-api-access-xxxxx`) and a
//! read-only mount of it to every container and init container. So when the
//! webhook sets `false`, it also takes that volume and its mounts out again,
//! and the stored pod holds no token, as a pod created with `false` would.
//! If the mounts are not exactly the apiserver's (a container that mounts a
//! `kube-api-access-*` volume twice, or another one), they are left alone:
//! removing a volume that something still mounts would make the pod
//! invalid.

use crate::config::Config;

use super::layout::Layout;
use super::owned::{List, Owned};
use crate::mutate::patch::PatchBuilder;
use crate::mutate::read::pod::SpecView;

/// What the pod's token setting still needs.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Automount {
    /// `spec.automountServiceAccountToken: false` is added.
    set_false: bool,
    removal: Option<Removal>,
    /// For a pod that mounts the token on purpose.
    pub warning: Option<&'static str>,
}

/// The token volume's index, and each mount of it: the list, the
/// container's index there and the mount's index in the container.
#[derive(Debug, PartialEq, Eq)]
struct Removal {
    volume: usize,
    mounts: Vec<(List, usize, usize)>,
}

const TRUE_WARNING: &str = "spec.automountServiceAccountToken is true: the sandbox's code can call the API server as its service account";

pub(crate) fn plan(spec: &SpecView<'_>, config: &Config) -> Automount {
    // `null`: every pod is left as it is (the reader allows only false or
    // null).
    if config.pod.automount_service_account_token != Some(false) {
        return Automount::default();
    }
    match spec.automount_service_account_token {
        Some(true) => Automount {
            warning: Some(TRUE_WARNING),
            ..Automount::default()
        },
        Some(false) => Automount::default(),
        None => Automount {
            set_false: true,
            removal: removal(spec),
            warning: None,
        },
    }
}

/// The apiserver's token volume and its one mount per container, if that
/// is what the pod holds.
fn removal(spec: &SpecView<'_>) -> Option<Removal> {
    let (volume, name) = spec.volumes.as_ref()?.token.as_ref()?;
    let mut mounts = Vec::new();
    for (list, containers) in [
        (List::Init, spec.init_containers()),
        (List::Main, spec.containers()),
    ] {
        for (index, c) in containers.iter().enumerate() {
            let Some(m) = c.volume_mounts.as_ref().filter(|m| m.token_count > 0) else {
                continue;
            };
            match &m.token {
                Some((at, mounted)) if m.token_count == 1 && mounted == name => {
                    mounts.push((list, index, *at));
                }
                _ => return None,
            }
        }
    }
    Some(Removal {
        volume: *volume,
        mounts,
    })
}

impl Automount {
    /// The field, then the removals, which come last: every other
    /// operation was planned with the pod's indices, and these follow the
    /// containers to where the layout put them (a container the layout
    /// writes anew has no token mount).
    pub fn write(&self, layout: Option<&Layout<'_>>, owned: Owned, patch: &mut PatchBuilder) {
        if self.set_false {
            patch.add(&["spec", "automountServiceAccountToken"], &false);
        }
        let Some(removal) = &self.removal else {
            return;
        };
        for &(list, index, mount) in &removal.mounts {
            let after = match (layout, list) {
                (None, _) => Some(index),
                (Some(l), List::Init) => l.init_index_after(index, owned),
                (Some(l), List::Main) => l.main_index_after(index),
            };
            if let Some(at) = after {
                patch.remove(&[
                    "spec",
                    list.field(),
                    &at.to_string(),
                    "volumeMounts",
                    &mount.to_string(),
                ]);
            }
        }
        patch.remove(&["spec", "volumes", &removal.volume.to_string()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::read::pod::PodView;

    fn plan_for(spec: &str, config: &Config) -> Automount {
        let raw = format!(r#"{{"spec":{spec}}}"#);
        plan(PodView::parse(&raw).unwrap().spec(), config)
    }

    const TOKEN: &str = r#"{"name":"kube-api-access-x7k2p","projected":{"sources":[{"serviceAccountToken":{"path":"token"}}]}}"#;
    const MOUNT: &str = r#"{"name":"kube-api-access-x7k2p","readOnly":true,"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount"}"#;

    #[test]
    fn false_where_unset_with_the_apiservers_token_taken_out() {
        let config = Config::default();
        let spec = format!(
            r#"{{"volumes":[{{"name":"data","emptyDir":{{}}}},{TOKEN}],
                "initContainers":[{{"name":"i","volumeMounts":[{MOUNT}]}}],
                "containers":[{{"name":"a","volumeMounts":[{{"name":"data","mountPath":"/d"}},{MOUNT}]}},{{"name":"b"}}]}}"#
        );
        let a = plan_for(&spec, &config);
        assert!(a.set_false && a.warning.is_none());
        assert_eq!(
            a.removal,
            Some(Removal {
                volume: 1,
                mounts: vec![(List::Init, 0, 0), (List::Main, 0, 1)],
            })
        );
        // No token volume: only the field.
        let plain = plan_for(r#"{"containers":[{"name":"a"}]}"#, &config);
        assert!(plain.set_false && plain.removal.is_none());
    }

    #[test]
    fn the_pods_own_choice_and_null_are_kept() {
        let config = Config::default();
        let spec = format!(r#"{{"automountServiceAccountToken":true,"volumes":[{TOKEN}]}}"#);
        let on = plan_for(&spec, &config);
        assert!(!on.set_false && on.removal.is_none());
        assert!(on.warning.unwrap().chars().count() <= 120);
        assert_eq!(
            plan_for(r#"{"automountServiceAccountToken":false}"#, &config),
            Automount::default()
        );
        let leave = Config::from_yaml("pod: {automountServiceAccountToken: null}").unwrap();
        assert_eq!(
            plan_for(&format!(r#"{{"volumes":[{TOKEN}]}}"#), &leave),
            Automount::default()
        );
    }

    #[test]
    fn mounts_that_are_not_the_apiservers_keep_the_volume() {
        let config = Config::default();
        let other = MOUNT.replace("x7k2p", "other");
        for containers in [
            format!(r#"[{{"name":"a","volumeMounts":[{MOUNT},{MOUNT}]}}]"#),
            format!(r#"[{{"name":"a","volumeMounts":[{other}]}}]"#),
        ] {
            let spec = format!(r#"{{"volumes":[{TOKEN}],"containers":{containers}}}"#);
            let a = plan_for(&spec, &config);
            assert!(a.set_false && a.removal.is_none(), "{containers}");
        }
        // A kube-api-access volume that is not projected is someone else's.
        let secret = r#"{"volumes":[{"name":"kube-api-access-mine","secret":{"secretName":"s"}}]}"#;
        assert!(plan_for(secret, &config).removal.is_none());
    }
}
