//! execd injection (contract: execd.volume, execd.installer): the shared binary
//! volume and the installer init container (the main container's changes are
//! `sandbox`'s).

use std::sync::LazyLock;

use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::config::Config;

use super::owned;
use super::run_as::{PodUser, RunAs};
use crate::mutate::denial::Denial;
use crate::mutate::intent::Intent;
use crate::mutate::read::k8s::{BIN, BIN_MOUNT, BIN_VOLUME, ISOLATION_VOLUME, Mount};
use crate::mutate::read::pod::SpecView;

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
macro_rules! ipv6_guard {
    () => {
        "set -e; if [ -e /proc/sys/net/ipv6/conf/all/disable_ipv6 ]; then echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; fi; "
    };
}
/// The install script (contract: execd.install-script), as upstream
/// OpenSandbox's current server writes it.
pub(crate) const INSTALL_SCRIPT: &str = install_script!();
/// The sidecar filters IPv4 only; switching IPv6 off in the pod's network
/// namespace closes the bypass. A namespace without IPv6 has no such file
/// and still gets execd; a failed write stays fatal (`set -e`).
pub(crate) const IPV6_GUARD: &str = ipv6_guard!();
const HARDENED_INSTALL_SCRIPT: &str = concat!(ipv6_guard!(), install_script!());

/// The installer's `args`: one of the two scripts.
#[derive(Debug, Clone, Copy)]
struct Args {
    hardened: bool,
}

/// Each `args` list as JSON text, read once and written into every patch
/// as it is. serde's string writer checks each byte of a string for
/// escapes, and the script is about 800 bytes on every admission; the
/// scripts hold nothing to escape (a unit test checks the texts).
static ARGS_JSON: LazyLock<[Option<&'static RawValue>; 2]> = LazyLock::new(|| {
    [INSTALL_SCRIPT, HARDENED_INSTALL_SCRIPT].map(|script| {
        let text: &'static str = Box::leak(format!("[\"{script}\"]").into_boxed_str());
        serde_json::from_str::<&RawValue>(text).ok()
    })
});

impl Args {
    fn script(self) -> &'static str {
        if self.hardened {
            HARDENED_INSTALL_SCRIPT
        } else {
            INSTALL_SCRIPT
        }
    }
}

impl Serialize for Args {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match ARGS_JSON[usize::from(self.hardened)] {
            Some(raw) => raw.serialize(s),
            // Unreachable while the scripts need no escapes (tested).
            None => [self.script()].serialize(s),
        }
    }
}

/// The installer init container.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Installer<'a> {
    name: &'static str,
    image: &'a str,
    command: [&'static str; 2],
    args: Args,
    volume_mounts: [Mount; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<&'a Value>,
    security_context: InstallerSecurity,
}

/// The installer's `securityContext` (contract: execd.ipv6-guard,
/// execd.installer-security): privileged only to switch IPv6 off; otherwise as
/// locked down as Pod Security `restricted` asks, so a restricted-compliant
/// sandbox stays compliant after injection.
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
    /// The upper layer of execd's isolated sessions.
    pub(crate) const ISOLATION: EmptyDirVolume = EmptyDirVolume {
        name: ISOLATION_VOLUME,
        empty_dir: Empty {},
    };

    pub(crate) fn name(&self) -> &'static str {
        self.name
    }
}

/// The volume names and the path this webhook owns must not be taken by
/// something else (the container names are `owned`'s): `opensandbox-bin`,
/// and with isolated sessions `isolation-upper`, must be emptyDirs.
pub(crate) fn check_conflicts(spec: &SpecView<'_>, isolation: bool) -> Result<(), Denial> {
    let volumes = spec.volumes.as_ref();
    for (name, at) in [
        (BIN_VOLUME, volumes.and_then(|v| v.bin)),
        (
            ISOLATION_VOLUME,
            volumes.and_then(|v| v.isolation).filter(|_| isolation),
        ),
    ] {
        if at.is_some_and(|v| !v.empty_dir) {
            return Err(Denial::VolumeNotEmptyDir {
                volume: name.to_owned(),
            });
        }
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
        args: Args {
            hardened: disable_ipv6,
        },
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

/// The installer the pod gets (where it goes, and whether the pod's own
/// copy is kept, is `layout`'s).
pub(crate) fn plan<'a>(spec: &SpecView<'_>, intent: &Intent, config: &'a Config) -> Installer<'a> {
    installer(
        &config.execd.image,
        config.execd.resources.as_ref(),
        intent.policy.is_some() && config.egress.disable_ipv6,
        PodUser::of(spec),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The scripts go into the patch as ready JSON text, which is only
    /// right while they hold nothing JSON escapes.
    #[test]
    fn the_scripts_json_text_is_the_scripts() {
        for hardened in [false, true] {
            let args = Args { hardened };
            let raw = ARGS_JSON[usize::from(hardened)].expect("valid JSON");
            let read: Vec<String> = serde_json::from_str(raw.get()).unwrap();
            assert_eq!(read, [args.script()]);
            assert_eq!(
                serde_json::to_string(&args).unwrap(),
                serde_json::to_string(&[args.script()]).unwrap()
            );
            assert_eq!(serde_json::to_value(args).unwrap(), json!([args.script()]));
        }
    }

    /// The contract's script, verbatim (contract: execd.install-script).
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
