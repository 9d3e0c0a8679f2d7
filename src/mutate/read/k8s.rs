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
/// The emptyDir under execd's isolated sessions (contract: execd.isolation).
pub(crate) const ISOLATION_VOLUME: &str = "isolation-upper";
pub(crate) const ISOLATION_MOUNT: &str = "/var/lib/execd/isolation";
/// The Secret volume of the upstream proxy's CA bundle, mounted into the
/// egress sidecar only (contract: egress.upstream-proxy-ca); its path is
/// upstream's `EGRESS_UPSTREAM_EXTRA_CA_PATH`.
pub(crate) const UPSTREAM_CA_VOLUME: &str = "opensandbox-egress-upstream-extra-ca";
pub(crate) const UPSTREAM_CA_PATH: &str = "/etc/ssl/certs/opensandbox-upstream-extra-ca.pem";
/// The Secret's key that holds the bundle (upstream fixes it).
pub(crate) const UPSTREAM_CA_KEY: &str = "ca.crt";
/// The service-account token volume the apiserver's `ServiceAccount`
/// admission adds to a pod that mounts its token (`kube-api-access-` and
/// five random characters).
pub(crate) const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

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
    /// `OPENSANDBOX_LIFECYCLE`: execd's lifecycle hooks.
    Lifecycle,
    /// `OPENSANDBOX_ID`: the sandbox's id, for execd's telemetry.
    Id,
    /// `EXECD_INIT`: bootstrap.sh runs execd as PID 1.
    ExecdInit,
}

impl KnownEnv {
    pub(crate) const ALL: [KnownEnv; 7] = [
        KnownEnv::Execd,
        KnownEnv::Mitm,
        KnownEnv::EgressRules,
        KnownEnv::EgressToken,
        KnownEnv::Lifecycle,
        KnownEnv::Id,
        KnownEnv::ExecdInit,
    ];

    pub(crate) const fn name(self) -> &'static str {
        match self {
            KnownEnv::Execd => "EXECD",
            KnownEnv::Mitm => MITM_ENV,
            KnownEnv::EgressRules => "OPENSANDBOX_EGRESS_RULES",
            KnownEnv::EgressToken => "OPENSANDBOX_EGRESS_TOKEN",
            KnownEnv::Lifecycle => "OPENSANDBOX_LIFECYCLE",
            KnownEnv::Id => "OPENSANDBOX_ID",
            KnownEnv::ExecdInit => "EXECD_INIT",
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

/// The isolated sessions' volume where execd expects it.
pub(crate) const ISOLATION: Mount = Mount {
    name: ISOLATION_VOLUME,
    mount_path: ISOLATION_MOUNT,
};

/// An `env` item with a literal value.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct EnvVar<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

/// Whether mount path `path` names the directory `dir` (a clean absolute
/// path): compared cleaned, as the runtime resolves it, so
/// `/opt//opensandbox`, `/opt/opensandbox/`, `/opt/./opensandbox` and
/// `/opt/x/../opensandbox` are all `/opt/opensandbox`. Cleaning is Go's
/// `path.Clean` (what the kubelet's path handling is built on), with a
/// relative path taken as rooted: a mount destination is inside the
/// container's root either way. No allocation: this runs for every mount
/// of every container.
pub(crate) fn same_dir(path: &str, dir: &str) -> bool {
    if is_clean(path) {
        return path == dir;
    }
    cleaned_is(path, dir)
}

/// A rooted path that cleaning leaves as it is: no `//`, no segment that
/// starts with `.` (so no `.` or `..`), no trailing `/`. Nearly every mount
/// path is one, and is then compared as it is, in one pass over its bytes
/// (a cleaning pass cost 12k instructions of a 10 KB review before).
fn is_clean(path: &str) -> bool {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') || (bytes.len() > 1 && bytes.last() == Some(&b'/')) {
        return false;
    }
    !bytes
        .windows(2)
        .any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'))
}

/// [`same_dir`] for a path that needs cleaning.
fn cleaned_is(path: &str, dir: &str) -> bool {
    /// Deep enough for any real mount path; a deeper one is compared by
    /// its last segments only after `..` pops, which cannot make a longer
    /// path equal a two-segment one.
    const DEPTH: usize = 32;
    let mut stack: [&str; DEPTH] = [""; DEPTH];
    let mut depth: usize = 0;
    let mut overflow = 0usize;
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if overflow > 0 {
                    overflow -= 1;
                } else {
                    depth = depth.saturating_sub(1);
                }
            }
            s if depth < DEPTH && overflow == 0 => {
                stack[depth] = s;
                depth += 1;
            }
            _ => overflow += 1,
        }
    }
    overflow == 0
        && stack[..depth]
            .iter()
            .copied()
            .eq(dir.split('/').filter(|s| !s.is_empty()))
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

/// A name written in a `capabilities.add` list as some container runtime
/// could read it: the reading to deny on, so it errs towards a match. The
/// kubelet passes the names on as written; containerd grants
/// `"CAP_" + strings.ToUpper(name)`, CRI-O keeps a `cap_` prefix of any case
/// and upper-cases the rest. Go's `ToUpper` maps by Unicode, so `net_admın`
/// (dotless ı) is `NET_ADMIN` and `ſys_ptrace` (long s) is `SYS_PTRACE`; a
/// runtime that compares with `EqualFold` also takes the Kelvin sign for
/// `K`. Surrounding blanks are forgiven too. So: trimmed, upper-cased,
/// without a `CAP_` prefix, on the stack. Read once per item and compared
/// with each capability a decision asks about: this runs for every item of
/// every container's lists.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RuntimeName {
    buf: [u8; RuntimeName::MAX],
    /// `None` for a name no runtime reads as a capability (a letter that
    /// no upper-casing makes ASCII, or longer than any capability).
    len: Option<u8>,
}

impl RuntimeName {
    /// Longer than any capability's name (`CHECKPOINT_RESTORE` is 18).
    const MAX: usize = 32;

    pub(crate) fn of(name: &str) -> Self {
        let mut out = RuntimeName {
            buf: [0; Self::MAX],
            len: None,
        };
        let mut len = 0;
        for c in name.trim().chars() {
            let (Some(upper), true) = (runtime_upper(c), len < Self::MAX) else {
                return out;
            };
            // `runtime_upper` yields ASCII only.
            out.buf[len] = upper as u8;
            len += 1;
        }
        let start = if out.buf[..len].starts_with(b"CAP_") {
            4
        } else {
            0
        };
        out.buf.copy_within(start..len, 0);
        out.len = u8::try_from(len - start).ok();
        out
    }

    /// Whether this is capability `wanted` (upper-case, without `CAP_`).
    pub(crate) fn is(&self, wanted: &str) -> bool {
        self.len
            .is_some_and(|len| &self.buf[..usize::from(len)] == wanted.as_bytes())
    }
}

/// Whether `name`, written in a `capabilities.drop` list, takes capability
/// `wanted` away in every runtime: the reading to rely on, so it errs
/// towards no match. `ALL` drops everything everywhere; otherwise only the
/// bare name in ASCII of any case (containerd reads `cap_net_raw` as
/// `CAP_CAP_NET_RAW`, which it ignores, and blanks are kept).
pub(crate) fn runtime_drops(name: &str, wanted: &str) -> bool {
    name.eq_ignore_ascii_case("ALL") || name.eq_ignore_ascii_case(wanted)
}

/// The ASCII letter a runtime reads `c` as, if any: ASCII upper-cased, and
/// the only non-ASCII letters that Go's `unicode.ToUpper` maps into ASCII
/// (`ı` U+0131 to `I`, `ſ` U+017F to `S`) or that `strings.EqualFold`
/// folds onto one (the Kelvin sign U+212A onto `K`).
fn runtime_upper(c: char) -> Option<char> {
    match c {
        '\u{131}' => Some('I'),
        '\u{17F}' => Some('S'),
        '\u{212A}' => Some('K'),
        c if c.is_ascii() => Some(c.to_ascii_uppercase()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_paths_are_recognised() {
        for clean in [
            "/",
            "/opt/opensandbox",
            "/var/run/secrets/kubernetes.io/serviceaccount",
            "/a/b.c",
        ] {
            assert!(is_clean(clean), "{clean}");
        }
        for unclean in [
            "",
            "opt",
            "/opt/",
            "//opt",
            "/opt/./x",
            "/opt/../x",
            "/opt/.hidden",
            "/.",
        ] {
            assert!(!is_clean(unclean), "{unclean}");
        }
    }

    #[test]
    fn mount_paths_are_compared_cleaned() {
        for same in [
            "/opt/opensandbox",
            "/opt/opensandbox/",
            "/opt//opensandbox",
            "//opt///opensandbox//",
            "/opt/./opensandbox",
            "/./opt/opensandbox/.",
            "/opt/x/../opensandbox",
            "/../opt/opensandbox",
            "opt/opensandbox",
            "/a/b/c/../../../opt/opensandbox",
        ] {
            assert!(same_dir(same, BIN_MOUNT), "{same}");
        }
        for other in [
            "/opt/opensandbox/x",
            "/opt/opensandbox/..",
            "/opt",
            "/opt/opensandboxx",
            "/opt/open sandbox",
            "/",
            "",
            "/opt/opensandbox/x/..y",
        ] {
            assert!(!same_dir(other, BIN_MOUNT), "{other}");
        }
        let deep = format!("{}/opt/opensandbox", "/a".repeat(40));
        assert!(!same_dir(&deep, BIN_MOUNT));
        let back = format!("{}{}/opt/opensandbox", "/a".repeat(40), "/..".repeat(40));
        assert!(same_dir(&back, BIN_MOUNT));
    }

    #[test]
    fn capability_names() {
        assert!(same_capability("NET_ADMIN", "NET_ADMIN"));
        assert!(same_capability("cap_net_admin", "NET_ADMIN"));
        assert!(same_capability(" net_admin ", "NET_ADMIN"));
        assert!(!same_capability("NET_RAW", "NET_ADMIN"));
        assert!(!same_capability("CAP", "NET_ADMIN"));
    }

    #[test]
    fn capabilities_as_runtimes_read_them() {
        for (name, cap) in [
            ("NET_ADMIN", "NET_ADMIN"),
            ("net_admin", "NET_ADMIN"),
            ("cap_net_admin", "NET_ADMIN"),
            ("CAP_NET_ADMIN", "NET_ADMIN"),
            ("net_adm\u{131}n", "NET_ADMIN"),
            ("cap_\u{17f}ys_ptrace", "SYS_PTRACE"),
            (" Net_Raw ", "NET_RAW"),
            ("\u{17f}ys_ptrace", "SYS_PTRACE"),
            ("all", "ALL"),
            ("cap_all", "ALL"),
            ("\u{212a}ILL", "KILL"),
        ] {
            assert!(RuntimeName::of(name).is(cap), "{name:?} reads as {cap}");
        }
        for (name, cap) in [
            ("NET_ADMINS", "NET_ADMIN"),
            ("NET_ADM\u{130}N", "NET_ADMIN"),
            ("NET-ADMIN", "NET_ADMIN"),
            ("CAP", "NET_ADMIN"),
            ("", "ALL"),
            ("NET_R\u{430}W", "NET_RAW"),
        ] {
            assert!(!RuntimeName::of(name).is(cap), "{name:?} is not {cap}");
        }
        assert!(runtime_drops("NET_RAW", "NET_RAW"));
        assert!(runtime_drops("net_raw", "NET_RAW"));
        assert!(runtime_drops("all", "NET_RAW"));
        for not_everywhere in ["cap_net_raw", "CAP_NET_RAW", " NET_RAW", "net_r\u{430}w"] {
            assert!(
                !runtime_drops(not_everywhere, "NET_RAW"),
                "{not_everywhere:?}"
            );
        }
    }
}
