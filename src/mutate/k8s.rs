//! Kubernetes shapes shared by the parts the webhook injects and the pod
//! view that reads what they look for: env and mount items, the binary
//! volume's name and path, the env var names, and capability names.

use serde::Serialize;

/// The emptyDir that carries execd and bootstrap.sh into the sandbox.
pub(crate) const BIN_VOLUME: &str = "opensandbox-bin";
pub(crate) const BIN_MOUNT: &str = "/opt/opensandbox";
/// Set in the main container and the sidecar when the credential proxy runs.
pub(crate) const MITM_ENV: &str = "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT";
/// The main container's command starts with it once execd is injected.
pub(crate) const BOOTSTRAP: &str = "/opt/opensandbox/bootstrap.sh";

/// The env vars whose presence a decision looks at. The pod view reads a
/// container's `env` into a set of these (`lists::EnvNames`) instead of a
/// list of every name: a decision asking for another name must add it here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KnownEnv {
    /// `EXECD`: where the main container finds execd.
    Execd,
    /// [`MITM_ENV`].
    Mitm,
    /// `OPENSANDBOX_EGRESS_RULES`: the egress sidecar's rules.
    EgressRules,
    /// `OPENSANDBOX_EGRESS_TOKEN`: the egress sidecar's API token.
    EgressToken,
}

impl KnownEnv {
    pub(crate) const ALL: [KnownEnv; 4] = [
        KnownEnv::Execd,
        KnownEnv::Mitm,
        KnownEnv::EgressRules,
        KnownEnv::EgressToken,
    ];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            KnownEnv::Execd => "EXECD",
            KnownEnv::Mitm => MITM_ENV,
            KnownEnv::EgressRules => "OPENSANDBOX_EGRESS_RULES",
            KnownEnv::EgressToken => "OPENSANDBOX_EGRESS_TOKEN",
        }
    }
}

/// A `volumeMounts` item.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Mount {
    pub name: &'static str,
    pub mount_path: &'static str,
}

/// The binary volume at the path execd and bootstrap.sh are expected at.
pub(crate) const BIN: Mount = Mount {
    name: BIN_VOLUME,
    mount_path: BIN_MOUNT,
};

/// An `env` item with a literal value.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct EnvVar<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

/// Capability names are matched without case and with or without `CAP_`.
pub(crate) fn same_capability(name: &str, wanted: &str) -> bool {
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
}
