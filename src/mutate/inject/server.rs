//! Pods that OpenSandbox's own server already completed (contract:
//! coexist.recognised, coexist.risks; SPEC section 12). The server builds
//! its sandbox pods with execd and, for a policy, the egress sidecar inside,
//! labels them `<prefix>/id`, and keeps its intent in the workload it
//! creates, not in the pod's annotations. Such a pod is recognised by what
//! only an OpenSandbox installer writes: the install script of an
//! `execd-installer` init container, and for Linux a main container already
//! wrapped by bootstrap.sh.
//!
//! Invariant: recognition changes nothing where the pod asks this webhook
//! for a policy (`<prefix>/network-policy`): the webhook's own rules apply
//! then, spoof checks included, so a pod cannot escape them by imitating
//! the server. Without that annotation a pod asked the webhook for no
//! policy, so nothing it could imitate the server to get is the webhook's
//! to guard; a sidecar it carries is the server's policy, kept as built.

use super::egress;
use super::execd::{INSTALL_SCRIPT, IPV6_GUARD};
use super::owned::{At, EGRESS, INSTALLER, List, Owned};
use crate::mutate::denial::Denial;
use crate::mutate::quote::fit;
use crate::mutate::read::k8s::KnownEnv;
use crate::mutate::read::lists::Command;
use crate::mutate::read::pod::{ContainerView, PodView, SpecView};
use serde::Deserialize;

/// The Windows VM profile's installer (upstream's `windows_profile.py`): it
/// copies execd and its installer to `/oem`, where the VM picks them up.
const WINDOWS_SCRIPT: &str = "cp ./install.bat /oem/install.bat && cp ./execd.exe /oem/execd.exe && chmod 0644 /oem/install.bat /oem/execd.exe";

/// What OpenSandbox's server built (contract: coexist.recognised).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerCompleted {
    /// A Linux sandbox: execd installed, the main container wrapped by
    /// bootstrap.sh, and with a policy the server's sidecar.
    Linux,
    /// The Windows VM profile: a privileged main container that runs the VM,
    /// which installs execd from `/oem` itself.
    WindowsVm,
}

impl ServerCompleted {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            ServerCompleted::Linux => "linux",
            ServerCompleted::WindowsVm => "windows-vm",
        }
    }
}

/// Whether OpenSandbox's server completed the pod whose main container is
/// `main`: an `execd-installer` init container that mounts the binary
/// volume and runs one of the server's scripts (section 3's, or the Windows
/// VM profile's, each with or without the IPv6 guard in front), and for
/// the Linux script a main container whose command starts with
/// bootstrap.sh. Every pod opensandbox-server 1.1.1 builds has both (its
/// templates can add fields, never replace its init containers or its main
/// container's command).
///
/// The pod view keeps no `args`, so the installer's are read from the
/// pod's text: only a pod that holds an installer comes so far, never a
/// new sandbox.
pub(crate) fn recognise(pod: &PodView<'_>, main: &ContainerView<'_>) -> Option<ServerCompleted> {
    let index = pod
        .spec()
        .init_containers()
        .iter()
        .position(|c| c.name == INSTALLER && c.mounts_bin())?;
    let lists = pod.source.lists()?;
    let installer: ArgsOnly = serde_json::from_str(lists.init_containers.get(index)?.get()).ok()?;
    let [script] = installer.args.as_deref()? else {
        return None;
    };
    let script = script.strip_prefix(IPV6_GUARD).unwrap_or(script);
    if script == INSTALL_SCRIPT {
        (main.command == Some(Command::Wrapped)).then_some(ServerCompleted::Linux)
    } else if script == WINDOWS_SCRIPT {
        Some(ServerCompleted::WindowsVm)
    } else {
        None
    }
}

/// A container's `args`, all the recognition reads of the installer.
#[derive(Deserialize)]
struct ArgsOnly {
    args: Option<Vec<String>>,
}

/// A shape of a server-completed pod that could undo the policy its sidecar
/// holds (contract: coexist.risks): warned about and counted, never denied
/// or changed (section 4.2's rules are the webhook's, for the policies it
/// is asked for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    HostNetwork,
    Privileged,
    /// A capability that lets a container rewrite the sidecar's rules.
    Capability,
}

impl Risk {
    pub const ALL: [Risk; 3] = [Risk::HostNetwork, Risk::Privileged, Risk::Capability];

    /// The metric label.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::HostNetwork => "host-network",
            Risk::Privileged => "privileged",
            Risk::Capability => "capability",
        }
    }
}

/// The first risk of a pod OpenSandbox's server completed, with its
/// warning; none when it holds no sidecar (there is no policy to undo).
/// Judged as section 4.2 judges a pod the webhook is asked to guard.
pub(crate) fn risk(spec: &SpecView<'_>) -> Option<(Risk, String)> {
    let owned = held(spec);
    owned.sidecar?;
    if spec.host_network == Some(true) {
        return Some((
            Risk::HostNetwork,
            fit("spec.hostNetwork is true: the egress sidecar OpenSandbox's server built cannot control this pod's egress".to_owned()),
        ));
    }
    let undo = "it could undo the rules of the egress sidecar OpenSandbox's server built";
    match egress::check_privileges(spec, owned, "") {
        Ok(()) => None,
        Err(Denial::PrivilegedWithPolicy {
            list, container, ..
        }) => Some((
            Risk::Privileged,
            fit(format!("{list} '{container}' is privileged: {undo}")),
        )),
        Err(Denial::NetCapabilityWithPolicy {
            list,
            container,
            capability,
            ..
        }) => Some((
            Risk::Capability,
            fit(format!("{list} '{container}' adds {capability}: {undo}")),
        )),
        Err(other) => Some((Risk::Capability, fit(format!("{other}")))),
    }
}

/// Where the server's installer and sidecar are, found as `owned` finds
/// the webhook's but without its denials: the server's own containers are
/// what section 4.2's checks leave out.
fn held(spec: &SpecView<'_>) -> Owned {
    let mut owned = Owned::default();
    for (list, containers) in [
        (List::Init, spec.init_containers()),
        (List::Main, spec.containers()),
    ] {
        for (index, c) in containers.iter().enumerate() {
            if list == List::Init && c.name == INSTALLER && owned.installer.is_none() {
                owned.installer = Some(index);
            }
            if c.name == EGRESS && c.has_env(KnownEnv::EgressRules) && owned.sidecar.is_none() {
                owned.sidecar = Some(At { list, index });
            }
        }
    }
    owned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::read::pod::PodView;
    use serde_json::{Value, json};

    fn server_pod(script: &str, command: &Value) -> Value {
        json!({"spec": {
            "initContainers": [{"name": "execd-installer", "image": "opensandbox/execd:v1.1.0",
                "command": ["/bin/sh", "-c"], "args": [script],
                "volumeMounts": [{"name": "opensandbox-bin", "mountPath": "/opt/opensandbox"}]}],
            "containers": [{"name": "sandbox", "image": "python", "command": command}]}})
    }

    fn recognised(pod: &Value) -> Option<ServerCompleted> {
        let text = pod.to_string();
        let view = PodView::parse(&text).unwrap();
        recognise(&view, &view.spec().containers()[0])
    }

    /// contract: coexist.recognised
    #[test]
    fn the_servers_installers_are_recognised_and_nothing_else() {
        let wrapped = json!(["/opt/opensandbox/bootstrap.sh", "python"]);
        let guarded = format!("{IPV6_GUARD}{INSTALL_SCRIPT}");
        for script in [INSTALL_SCRIPT, guarded.as_str()] {
            assert_eq!(
                recognised(&server_pod(script, &wrapped)),
                Some(ServerCompleted::Linux)
            );
            // Not wrapped: not what the server builds.
            assert_eq!(recognised(&server_pod(script, &json!(["python"]))), None);
        }
        let windows = format!("{IPV6_GUARD}{WINDOWS_SCRIPT}");
        for script in [WINDOWS_SCRIPT, windows.as_str()] {
            assert_eq!(
                recognised(&server_pod(script, &json!(null))),
                Some(ServerCompleted::WindowsVm)
            );
        }
        for other in [
            "cp ./execd /opt/opensandbox/execd".to_owned(),
            format!("{INSTALL_SCRIPT} && curl evil"),
            format!("{IPV6_GUARD}{IPV6_GUARD}{INSTALL_SCRIPT}"),
            String::new(),
        ] {
            assert_eq!(recognised(&server_pod(&other, &wrapped)), None, "{other}");
        }
        let mut two_args = server_pod(INSTALL_SCRIPT, &wrapped);
        two_args["spec"]["initContainers"][0]["args"] = json!([INSTALL_SCRIPT, "x"]);
        assert_eq!(recognised(&two_args), None);
        let mut unmounted = server_pod(INSTALL_SCRIPT, &wrapped);
        unmounted["spec"]["initContainers"][0]
            .as_object_mut()
            .unwrap()
            .remove("volumeMounts");
        assert_eq!(recognised(&unmounted), None);
    }
}
