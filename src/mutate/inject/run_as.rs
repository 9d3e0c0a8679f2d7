//! Who the injected containers run as. A container inherits the pod's
//! `spec.securityContext.runAsUser` and `runAsNonRoot` unless it sets its
//! own, and two of ours cannot run as the pod asks: the egress sidecar
//! (iptables needs root as well as `NET_ADMIN`) and the installer that
//! switches IPv6 off (it writes `/proc/sys`). With `runAsNonRoot: true` the
//! kubelet would refuse to start them, with a `runAsUser` they would start
//! and fail. So where the pod asks for a non-root user, each of them says
//! for itself that it runs as root, and the admission warns; a pod that asks
//! nothing gets exactly the securityContext the contract gives
//! (contract: execd.installer-run-as, egress.run-as).

use serde::Serialize;

use crate::mutate::read::pod::SpecView;

/// The user an installer that needs no privilege runs as when the pod asks
/// for a non-root user without naming one: the image's own user may be
/// root, which `runAsNonRoot` refuses. It only copies a file into an
/// emptyDir, which every user may write.
const NON_ROOT_INSTALLER_USER: i64 = 65532;

/// The fields an injected container adds to its securityContext; none when
/// the pod leaves the user alone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunAs {
    #[serde(skip_serializing_if = "Option::is_none")]
    run_as_user: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_as_non_root: Option<bool>,
}

/// What the pod-level securityContext asks of every container.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PodUser {
    non_root: bool,
    user: Option<i64>,
}

impl PodUser {
    pub fn of(spec: &SpecView<'_>) -> Self {
        let sc = spec.security_context.as_ref();
        Self {
            non_root: sc.and_then(|s| s.run_as_non_root) == Some(true),
            user: sc.and_then(|s| s.run_as_user),
        }
    }

    /// Whether a container that inherits would not run as root.
    pub fn asks_non_root(self) -> bool {
        self.non_root || self.user.is_some_and(|u| u != 0)
    }

    /// For a container that needs root: root, said explicitly, when the pod
    /// asks otherwise.
    pub fn for_root(self) -> RunAs {
        if self.asks_non_root() {
            RunAs {
                run_as_user: Some(0),
                run_as_non_root: Some(false),
            }
        } else {
            RunAs::default()
        }
    }

    /// For the installer without privilege: the pod's user is fine, but
    /// `runAsNonRoot` without a user would refuse an image that runs as root.
    pub fn for_unprivileged(self) -> RunAs {
        if self.non_root && self.user.is_none() {
            RunAs {
                run_as_user: Some(NON_ROOT_INSTALLER_USER),
                run_as_non_root: None,
            }
        } else {
            RunAs::default()
        }
    }
}

/// The warning for a pod that asks for a non-root user and gets containers
/// that run as root; `sidecar` and `installer` say which were added.
pub(crate) fn warning(sidecar: bool, installer: bool) -> Option<String> {
    let which = match (sidecar, installer) {
        (true, true) => "the egress sidecar and the IPv6 installer run",
        (true, false) => "the egress sidecar runs",
        (false, true) => "the IPv6 installer runs",
        (false, false) => return None,
    };
    Some(format!(
        "spec.securityContext asks for a non-root user; {which} as root (runAsUser: 0)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::read::pod::PodView;
    use serde_json::json;

    fn user(sc: &serde_json::Value) -> PodUser {
        let text = json!({"spec": {"securityContext": sc}}).to_string();
        let pod = PodView::parse(&text).unwrap();
        PodUser::of(pod.spec())
    }

    #[test]
    fn only_a_pod_that_asks_for_a_non_root_user_changes_anything() {
        for sc in [
            json!({}),
            json!({"runAsUser": 0}),
            json!({"runAsNonRoot": false}),
        ] {
            let u = user(&sc);
            assert_eq!(u.for_root(), RunAs::default(), "{sc}");
            assert_eq!(u.for_unprivileged(), RunAs::default(), "{sc}");
        }
        let root = json!({"runAsUser": 0, "runAsNonRoot": false});
        for sc in [json!({"runAsNonRoot": true}), json!({"runAsUser": 1000})] {
            assert_eq!(serde_json::to_value(user(&sc).for_root()).unwrap(), root);
        }
        assert_eq!(
            serde_json::to_value(user(&json!({"runAsNonRoot": true})).for_unprivileged()).unwrap(),
            json!({"runAsUser": 65532})
        );
        // The pod's own user is kept for the installer without privilege.
        let named = user(&json!({"runAsNonRoot": true, "runAsUser": 1000}));
        assert_eq!(named.for_unprivileged(), RunAs::default());
    }

    #[test]
    fn warnings_fit_and_name_what_runs_as_root() {
        assert_eq!(warning(false, false), None);
        for (s, i) in [(true, true), (true, false), (false, true)] {
            let w = warning(s, i).unwrap();
            assert!(w.chars().count() <= 120, "{w}");
            assert_eq!(w.contains("sidecar"), s);
            assert_eq!(w.contains("installer"), i);
        }
    }
}
