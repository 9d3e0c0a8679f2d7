//! execd injection (SPEC 3): the shared binary volume, the installer init
//! container and the main container's wrapper command, env and mount.

use serde::Serialize;
use serde_json::{Value, json};

use crate::config::Config;

use super::denial::Denial;
use super::intent::Intent;
use super::k8s::{BIN, BIN_MOUNT, BIN_VOLUME, BOOTSTRAP, EnvVar, KnownEnv, MITM_ENV, Mount};
use super::lists::Command;
use super::owned;
use super::patch::PatchBuilder;
use super::pod::{ContainerView, SpecView};
use super::run_as::{PodUser, RunAs};

const EXECD_PATH: &str = "/opt/opensandbox/execd";

macro_rules! install_script {
    () => {
        concat!(
            "cp ./execd /opt/opensandbox/execd && ",
            "cp ./bootstrap.sh /opt/opensandbox/bootstrap.sh && ",
            "chmod +x /opt/opensandbox/execd && ",
            "chmod +x /opt/opensandbox/bootstrap.sh && ",
            // Isolated sessions: bwrap, the session gate and the launcher.
            // Each copy is skipped when the execd image does not ship the
            // file, so older execd images still install.
            "(cp /usr/local/bin/bwrap /opt/opensandbox/bwrap && chmod +x /opt/opensandbox/bwrap || true) && ",
            "(test ! -e /usr/local/libexec/opensandbox-session-gate || ",
            "(cp /usr/local/libexec/opensandbox-session-gate /opt/opensandbox/opensandbox-session-gate && ",
            "chmod 0555 /opt/opensandbox/opensandbox-session-gate)) && ",
            "(test ! -e /usr/local/libexec/opensandbox-launcher || ",
            "(cp /usr/local/libexec/opensandbox-launcher /opt/opensandbox/opensandbox-launcher && ",
            "chmod 0555 /opt/opensandbox/opensandbox-launcher))"
        )
    };
}
/// The install script (SPEC 3.2), as upstream OpenSandbox's current server
/// writes it.
const INSTALL_SCRIPT: &str = install_script!();
/// The sidecar filters IPv4 only; switching IPv6 off in the pod's network
/// namespace closes the bypass. A namespace without IPv6 has no such file
/// and still gets execd; a failed write stays fatal (`set -e`).
const HARDENED_INSTALL_SCRIPT: &str = concat!(
    "set -e; if [ -e /proc/sys/net/ipv6/conf/all/disable_ipv6 ]; then echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; fi; ",
    install_script!()
);

/// The installer init container.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Installer<'a> {
    name: &'static str,
    image: &'a str,
    command: [&'static str; 2],
    args: [&'static str; 1],
    volume_mounts: [Mount; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<&'a Value>,
    security_context: InstallerSecurity,
}

/// The installer's `securityContext` (SPEC 3): privileged only to switch
/// IPv6 off; otherwise as locked down as Pod Security `restricted` asks, so
/// a restricted-compliant sandbox stays compliant after injection.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum InstallerSecurity {
    Privileged {
        privileged: bool,
        #[serde(flatten)]
        run_as: RunAs,
    },
    #[serde(rename_all = "camelCase")]
    Restricted {
        allow_privilege_escalation: bool,
        capabilities: DropAll,
        #[serde(flatten)]
        run_as: RunAs,
    },
}

#[derive(Debug, Serialize)]
struct DropAll {
    drop: [&'static str; 1],
}

/// An emptyDir volume: `{"name": ..., "emptyDir": {}}`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct EmptyDirVolume {
    name: &'static str,
    empty_dir: Empty,
}

#[derive(Debug, Serialize)]
struct Empty {}

impl EmptyDirVolume {
    /// The volume that carries execd and bootstrap.sh into the sandbox.
    pub(crate) const BIN: EmptyDirVolume = EmptyDirVolume {
        name: BIN_VOLUME,
        empty_dir: Empty {},
    };
}

/// The volume name and the path this webhook owns must not be taken by
/// something else (the container names are `owned`'s).
pub(crate) fn check_conflicts(spec: &SpecView<'_>) -> Result<(), Denial> {
    if spec
        .volumes
        .as_ref()
        .and_then(|v| v.bin)
        .is_some_and(|v| !v.empty_dir)
    {
        return Err(Denial::VolumeNotEmptyDir {
            volume: BIN_VOLUME.to_owned(),
        });
    }
    for c in spec.all_containers() {
        if let Some(volume) = c
            .volume_mounts
            .as_ref()
            .and_then(|m| m.bin_path_taken_by.as_deref())
        {
            return Err(Denial::MountPathTaken {
                container: c.name.to_string(),
                volume: volume.to_owned(),
                path: BIN_MOUNT.to_owned(),
            });
        }
    }
    Ok(())
}

fn installer<'a>(
    image: &'a str,
    resources: Option<&'a Value>,
    disable_ipv6: bool,
    user: PodUser,
) -> Installer<'a> {
    Installer {
        name: owned::INSTALLER,
        image,
        command: ["/bin/sh", "-c"],
        args: [if disable_ipv6 {
            HARDENED_INSTALL_SCRIPT
        } else {
            INSTALL_SCRIPT
        }],
        volume_mounts: [BIN],
        resources,
        security_context: if disable_ipv6 {
            InstallerSecurity::Privileged {
                privileged: true,
                run_as: user.for_root(),
            }
        } else {
            InstallerSecurity::Restricted {
                allow_privilege_escalation: false,
                capabilities: DropAll { drop: ["ALL"] },
                run_as: user.for_unprivileged(),
            }
        },
    }
}

impl Installer<'_> {
    /// Whether it runs privileged (to switch IPv6 off), and so as root.
    pub fn privileged(&self) -> bool {
        matches!(self.security_context, InstallerSecurity::Privileged { .. })
    }
}

/// What execd needs in a pod: the installer (where it goes, and whether
/// the pod's own copy is kept, is `layout`'s) and the main container's
/// changes, each decided from what the container already has, so that a
/// second pass over the webhook's own output plans nothing.
pub(crate) struct Execd<'a> {
    pub installer: Installer<'a>,
    main: MainChanges<'a>,
}

/// An item for a list the pod may not have yet.
struct ListAdd<T> {
    item: T,
    list_exists: bool,
}

/// The main container's changes (SPEC 3.3).
struct MainChanges<'a> {
    command: CommandChange<'a>,
    env: ListAdd<Vec<EnvVar<'static>>>,
    mount: Option<ListAdd<Mount>>,
    drop_net_admin: Option<DropAt>,
}

enum CommandChange<'a> {
    /// Already wrapped by bootstrap.sh.
    Keep,
    /// `bootstrap.sh` goes in front of the existing command.
    Prepend,
    /// No command: the entrypoint annotation's, wrapped.
    Set(Vec<&'a str>),
}

/// The deepest part of `securityContext.capabilities.drop` the container
/// already has, where `NET_ADMIN` is added.
enum DropAt {
    SecurityContext,
    Capabilities,
    DropList,
    DropItem,
}

/// What execd needs in the pod whose main container is `main`.
pub(crate) fn plan<'a>(
    spec: &SpecView<'_>,
    main: usize,
    intent: &'a Intent,
    config: &'a Config,
) -> Result<Execd<'a>, Denial> {
    let installer = installer(
        &config.execd.image,
        config.execd.resources.as_ref(),
        intent.policy.is_some() && config.egress.disable_ipv6,
        PodUser::of(spec),
    );
    let c = &spec.containers()[main];
    let main = MainChanges {
        command: command_change(c, intent, &config.keys().entrypoint)?,
        env: ListAdd {
            item: main_env(c, intent.credential_proxy),
            list_exists: c.env.is_some(),
        },
        mount: (!c.mounts_bin()).then(|| ListAdd {
            item: BIN,
            list_exists: c.volume_mounts.is_some(),
        }),
        drop_net_admin: intent.policy.as_ref().and_then(|_| drop_net_admin_at(c)),
    };
    Ok(Execd { installer, main })
}

fn command_change<'a>(
    c: &ContainerView<'_>,
    intent: &'a Intent,
    entrypoint_key: &str,
) -> Result<CommandChange<'a>, Denial> {
    match c.command {
        Some(Command::Wrapped) => Ok(CommandChange::Keep),
        Some(Command::Other) => Ok(CommandChange::Prepend),
        Some(Command::Empty) | None => {
            let Some(entrypoint) = intent.entrypoint.as_deref() else {
                return Err(Denial::MissingEntrypoint {
                    container: c.name.to_string(),
                    key: entrypoint_key.to_owned(),
                });
            };
            let mut command: Vec<&str> = Vec::with_capacity(entrypoint.len() + 1);
            if entrypoint.first().map(String::as_str) != Some(BOOTSTRAP) {
                command.push(BOOTSTRAP);
            }
            command.extend(entrypoint.iter().map(String::as_str));
            Ok(CommandChange::Set(command))
        }
    }
}

/// The variables the main container lacks; one it already has is never
/// overwritten.
fn main_env(c: &ContainerView<'_>, credential_proxy: bool) -> Vec<EnvVar<'static>> {
    let mut env = Vec::with_capacity(2);
    if !c.has_env(KnownEnv::Execd) {
        env.push(EnvVar {
            name: KnownEnv::Execd.name(),
            value: EXECD_PATH,
        });
    }
    if credential_proxy && !c.has_env(KnownEnv::Mitm) {
        env.push(EnvVar {
            name: MITM_ENV,
            value: "true",
        });
    }
    env
}

/// With a network policy the main container loses `NET_ADMIN` so it cannot
/// rewrite the sidecar's rules; the drop list is merged, never replaced.
/// `None` when it is already dropped, by name or by `ALL` (adding it beside
/// `ALL` would only be noise in the user's manifest).
fn drop_net_admin_at(c: &ContainerView<'_>) -> Option<DropAt> {
    let Some(sc) = &c.security_context else {
        return Some(DropAt::SecurityContext);
    };
    let Some(caps) = &sc.capabilities else {
        return Some(DropAt::Capabilities);
    };
    match &caps.drop {
        None => Some(DropAt::DropList),
        Some(drop) if !drop.net_admin_or_all => Some(DropAt::DropItem),
        Some(_) => None,
    }
}

const NET_ADMIN: &str = "NET_ADMIN";

impl Execd<'_> {
    /// The main container's operations; it is at `index` by then (the
    /// layout may have removed a sidecar before it).
    pub fn write_main(&self, index: usize, patch: &mut PatchBuilder) {
        let m = &self.main;
        let idx = index.to_string();
        // Paths are arrays on the stack: this runs on every admission.
        let c = ["spec", "containers", idx.as_str()];
        match &m.command {
            CommandChange::Keep => {}
            CommandChange::Prepend => patch.add(&[c[0], c[1], c[2], "command", "0"], BOOTSTRAP),
            CommandChange::Set(command) => patch.add(&[c[0], c[1], c[2], "command"], command),
        }
        patch.append(&[c[0], c[1], c[2], "env"], m.env.list_exists, &m.env.item);
        if let Some(mount) = &m.mount {
            patch.append(
                &[c[0], c[1], c[2], "volumeMounts"],
                mount.list_exists,
                std::slice::from_ref(&mount.item),
            );
        }
        let Some(at) = &m.drop_net_admin else {
            return;
        };
        let cap = json!(NET_ADMIN);
        let sc = "securityContext";
        match at {
            DropAt::SecurityContext => patch.add(
                &[c[0], c[1], c[2], sc],
                &json!({"capabilities": {"drop": [cap]}}),
            ),
            DropAt::Capabilities => patch.add(
                &[c[0], c[1], c[2], sc, "capabilities"],
                &json!({"drop": [cap]}),
            ),
            DropAt::DropList => patch.add(
                &[c[0], c[1], c[2], sc, "capabilities", "drop"],
                &json!([cap]),
            ),
            DropAt::DropItem => {
                patch.add(&[c[0], c[1], c[2], sc, "capabilities", "drop", "-"], &cap);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPEC 3.2's script, verbatim.
    #[test]
    fn the_install_script_is_specs() {
        assert_eq!(
            INSTALL_SCRIPT,
            "cp ./execd /opt/opensandbox/execd && cp ./bootstrap.sh /opt/opensandbox/bootstrap.sh && chmod +x /opt/opensandbox/execd && chmod +x /opt/opensandbox/bootstrap.sh && (cp /usr/local/bin/bwrap /opt/opensandbox/bwrap && chmod +x /opt/opensandbox/bwrap || true) && (test ! -e /usr/local/libexec/opensandbox-session-gate || (cp /usr/local/libexec/opensandbox-session-gate /opt/opensandbox/opensandbox-session-gate && chmod 0555 /opt/opensandbox/opensandbox-session-gate)) && (test ! -e /usr/local/libexec/opensandbox-launcher || (cp /usr/local/libexec/opensandbox-launcher /opt/opensandbox/opensandbox-launcher && chmod 0555 /opt/opensandbox/opensandbox-launcher))"
        );
    }

    /// The guarded prefix installs execd where the namespace has no IPv6,
    /// fails where the write fails, and switches IPv6 off where it can: run
    /// with `sh`, the file's path swapped for one the test controls.
    #[test]
    fn the_ipv6_prefix_runs_as_specified() {
        let dir = std::env::temp_dir().join(format!("ipv6-guard-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let flag = dir.join("disable_ipv6");
        let prefix = HARDENED_INSTALL_SCRIPT
            .strip_suffix(INSTALL_SCRIPT)
            .unwrap()
            .replace(
                "/proc/sys/net/ipv6/conf/all/disable_ipv6",
                flag.to_str().unwrap(),
            );
        let run = || {
            std::process::Command::new("/bin/sh")
                .arg("-c")
                .arg(format!("{prefix}echo installed"))
                .output()
                .unwrap()
        };
        // No IPv6: no file, execd is still installed.
        let out = run();
        assert!(
            out.status.success() && out.stdout == b"installed\n",
            "{out:?}"
        );
        assert!(!flag.exists());
        // IPv6: switched off.
        std::fs::write(&flag, "0\n").unwrap();
        assert!(run().status.success());
        assert_eq!(std::fs::read_to_string(&flag).unwrap(), "1\n");
        // A write that fails stops the script.
        std::fs::remove_file(&flag).unwrap();
        std::fs::create_dir(&flag).unwrap();
        let out = run();
        assert!(!out.status.success() && out.stdout.is_empty(), "{out:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn installer_shapes() {
        let plain =
            serde_json::to_value(installer("img", None, false, PodUser::default())).unwrap();
        assert_eq!(plain["args"][0], INSTALL_SCRIPT);
        assert_eq!(
            plain["securityContext"],
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})
        );
        assert!(plain.get("resources").is_none());
        let resources = json!({"limits": {"cpu": "1"}});
        let hardened =
            serde_json::to_value(installer("img", Some(&resources), true, PodUser::default()))
                .unwrap();
        assert_eq!(
            hardened["args"][0],
            format!(
                "set -e; if [ -e /proc/sys/net/ipv6/conf/all/disable_ipv6 ]; then echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; fi; {INSTALL_SCRIPT}"
            )
        );
        assert_eq!(hardened["securityContext"], json!({"privileged": true}));
        assert_eq!(hardened["resources"]["limits"]["cpu"], "1");
        assert_eq!(
            hardened["volumeMounts"],
            json!([{"name": BIN_VOLUME, "mountPath": BIN_MOUNT}])
        );
    }
}
