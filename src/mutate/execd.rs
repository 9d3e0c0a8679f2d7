//! execd injection (SPEC 3): the shared binary volume, the installer init
//! container and the main container's wrapper command, env and mount.

use serde::Serialize;
use serde_json::{Value, json};

use super::pod::{ContainerView, SpecView};
use super::{Denial, PatchBuilder};

pub const BIN_VOLUME: &str = "opensandbox-bin";
pub const BIN_MOUNT: &str = "/opt/opensandbox";
pub const BOOTSTRAP: &str = "/opt/opensandbox/bootstrap.sh";
pub const EXECD_ENV: &str = "EXECD";
pub const EXECD_PATH: &str = "/opt/opensandbox/execd";
pub const INSTALLER: &str = "execd-installer";
pub const MITM_ENV: &str = "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT";

macro_rules! install_script {
    () => {
        "cp ./execd /opt/opensandbox/execd && cp ./bootstrap.sh /opt/opensandbox/bootstrap.sh && chmod +x /opt/opensandbox/execd && chmod +x /opt/opensandbox/bootstrap.sh"
    };
}
const INSTALL_SCRIPT: &str = install_script!();
/// The sidecar filters IPv4 only; switching IPv6 off in the pod's network
/// namespace closes the bypass.
const HARDENED_INSTALL_SCRIPT: &str = concat!(
    "set -e; echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && ",
    install_script!()
);

/// A `volumeMounts` item.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mount {
    pub name: &'static str,
    pub mount_path: &'static str,
}

pub fn bin_mount() -> Mount {
    Mount {
        name: BIN_VOLUME,
        mount_path: BIN_MOUNT,
    }
}

/// An `env` item with a literal value.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EnvVar<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

/// The installer init container.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Installer<'a> {
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
    },
    #[serde(rename_all = "camelCase")]
    Restricted {
        allow_privilege_escalation: bool,
        capabilities: DropAll,
    },
}

#[derive(Debug, Serialize)]
struct DropAll {
    drop: [&'static str; 1],
}

/// `{"name": "opensandbox-bin", "emptyDir": {}}`
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct EmptyDirVolume {
    name: &'static str,
    empty_dir: Empty,
}

#[derive(Debug, Serialize)]
struct Empty {}

fn mounts_bin(c: &ContainerView<'_>) -> bool {
    c.mounts()
        .iter()
        .any(|m| m.name == BIN_VOLUME && m.normalized_path() == BIN_MOUNT)
}

/// An `execd-installer` init container that mounts the binary volume where
/// execd expects it: ours from an earlier pass, or from an OpenSandbox pool
/// template or a resumed sandbox. Either way it is left alone.
pub fn existing_installer(spec: &SpecView<'_>) -> Option<usize> {
    spec.init_containers()
        .iter()
        .position(|c| c.name == INSTALLER && mounts_bin(c))
}

/// The names and paths this webhook owns must not be taken by something else.
pub fn check_conflicts(spec: &SpecView<'_>) -> Result<(), Denial> {
    if let Some(v) = spec.volumes().iter().find(|v| v.name == BIN_VOLUME)
        && v.empty_dir.is_none()
    {
        return Err(Denial::VolumeNotEmptyDir {
            volume: BIN_VOLUME.to_owned(),
        });
    }
    for c in spec.all_containers() {
        if let Some(m) = c
            .mounts()
            .iter()
            .find(|m| m.normalized_path() == BIN_MOUNT && m.name != BIN_VOLUME)
        {
            return Err(Denial::MountPathTaken {
                container: c.name.to_string(),
                volume: m.name.to_string(),
                path: BIN_MOUNT.to_owned(),
            });
        }
    }
    if let Some(c) = spec
        .init_containers()
        .iter()
        .find(|c| c.name == INSTALLER && !mounts_bin(c))
    {
        return Err(Denial::ReservedContainerName {
            list: "init container",
            name: c.name.to_string(),
        });
    }
    if spec.containers().iter().any(|c| c.name == INSTALLER) {
        return Err(Denial::ReservedContainerName {
            list: "container",
            name: INSTALLER.to_owned(),
        });
    }
    Ok(())
}

pub fn installer<'a>(
    image: &'a str,
    resources: Option<&'a Value>,
    disable_ipv6: bool,
) -> Installer<'a> {
    Installer {
        name: INSTALLER,
        image,
        command: ["/bin/sh", "-c"],
        args: [if disable_ipv6 {
            HARDENED_INSTALL_SCRIPT
        } else {
            INSTALL_SCRIPT
        }],
        volume_mounts: [bin_mount()],
        resources,
        security_context: if disable_ipv6 {
            InstallerSecurity::Privileged { privileged: true }
        } else {
            InstallerSecurity::Restricted {
                allow_privilege_escalation: false,
                capabilities: DropAll { drop: ["ALL"] },
            }
        },
    }
}

pub fn volume_ops(spec: &SpecView<'_>, patch: &mut PatchBuilder) {
    if spec.volumes().iter().any(|v| v.name == BIN_VOLUME) {
        return;
    }
    patch.append(
        &["spec", "volumes"],
        spec.volumes.is_some(),
        &[EmptyDirVolume {
            name: BIN_VOLUME,
            empty_dir: Empty {},
        }],
    );
}

/// What the main container needs beyond execd itself.
pub struct MainNeeds<'a> {
    pub entrypoint: Option<&'a [String]>,
    pub entrypoint_key: &'a str,
    pub credential_proxy: bool,
    pub drop_net_admin: bool,
}

pub fn main_container_ops(
    c: &ContainerView<'_>,
    index: usize,
    needs: &MainNeeds<'_>,
    patch: &mut PatchBuilder,
) -> Result<(), Denial> {
    let idx = index.to_string();
    let base = ["spec", "containers", idx.as_str()];
    let at = |field: &'static str| [base[0], base[1], base[2], field];

    match c.command.as_deref() {
        Some([first, ..]) if first == BOOTSTRAP => {}
        Some([_, ..]) => {
            patch.add(&[base[0], base[1], base[2], "command", "0"], BOOTSTRAP);
        }
        _ => {
            let Some(entrypoint) = needs.entrypoint else {
                return Err(Denial::MissingEntrypoint {
                    container: c.name.to_string(),
                    key: needs.entrypoint_key.to_owned(),
                });
            };
            let mut command: Vec<&str> = Vec::with_capacity(entrypoint.len() + 1);
            if entrypoint.first().map(String::as_str) != Some(BOOTSTRAP) {
                command.push(BOOTSTRAP);
            }
            command.extend(entrypoint.iter().map(String::as_str));
            patch.add(&at("command"), &command);
        }
    }

    let mut env = Vec::with_capacity(2);
    if !c.has_env(EXECD_ENV) {
        env.push(EnvVar {
            name: EXECD_ENV,
            value: EXECD_PATH,
        });
    }
    if needs.credential_proxy && !c.has_env(MITM_ENV) {
        env.push(EnvVar {
            name: MITM_ENV,
            value: "true",
        });
    }
    patch.append(&at("env"), c.env.is_some(), &env);

    if !mounts_bin(c) {
        patch.append(
            &at("volumeMounts"),
            c.volume_mounts.is_some(),
            &[bin_mount()],
        );
    }

    if needs.drop_net_admin {
        drop_net_admin(c, &base, patch);
    }
    Ok(())
}

/// The main container loses NET_ADMIN so it cannot rewrite the sidecar's
/// rules; the drop list is merged, never replaced.
fn drop_net_admin(c: &ContainerView<'_>, base: &[&str; 3], patch: &mut PatchBuilder) {
    let cap = json!("NET_ADMIN");
    let path = |rest: &[&'static str]| {
        let mut p: Vec<&str> = base.to_vec();
        p.extend_from_slice(rest);
        p
    };
    let Some(sc) = &c.security_context else {
        patch.add(
            &path(&["securityContext"]),
            &json!({"capabilities": {"drop": [cap]}}),
        );
        return;
    };
    let Some(caps) = &sc.capabilities else {
        patch.add(
            &path(&["securityContext", "capabilities"]),
            &json!({"drop": [cap]}),
        );
        return;
    };
    match &caps.drop {
        None => patch.add(
            &path(&["securityContext", "capabilities", "drop"]),
            &json!([cap]),
        ),
        Some(drop) if !drop.iter().any(|d| same_capability(d, "NET_ADMIN")) => patch.add(
            &path(&["securityContext", "capabilities", "drop", "-"]),
            &cap,
        ),
        Some(_) => {}
    }
}

/// Capability names are matched without case and with or without `CAP_`.
pub fn same_capability(name: &str, wanted: &str) -> bool {
    let n = name.trim();
    let n = n
        .get(..4)
        .filter(|p| p.eq_ignore_ascii_case("CAP_"))
        .map_or(n, |_| &n[4..]);
    n.eq_ignore_ascii_case(wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_names() {
        assert!(same_capability("NET_ADMIN", "NET_ADMIN"));
        assert!(same_capability("cap_net_admin", "NET_ADMIN"));
        assert!(same_capability(" net_admin ", "NET_ADMIN"));
        assert!(!same_capability("NET_RAW", "NET_ADMIN"));
        assert!(!same_capability("CAP", "NET_ADMIN"));
    }

    #[test]
    fn installer_shapes() {
        let plain = serde_json::to_value(installer("img", None, false)).unwrap();
        assert_eq!(plain["args"][0], INSTALL_SCRIPT);
        assert_eq!(
            plain["securityContext"],
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})
        );
        assert!(plain.get("resources").is_none());
        let resources = json!({"limits": {"cpu": "1"}});
        let hardened = serde_json::to_value(installer("img", Some(&resources), true)).unwrap();
        assert_eq!(
            hardened["args"][0],
            format!(
                "set -e; echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && {INSTALL_SCRIPT}"
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
