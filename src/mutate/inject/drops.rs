//! What every container but the egress sidecar drops beside a network
//! policy (contract: execd.drop-net-admin, egress.drop-net-raw):
//! `NET_ADMIN`, with which it could rewrite the sidecar's rules, and
//! `NET_RAW`, which the runtime grants by default and with which it could
//! capture the pod's traffic (the sidecar's token in the kubelet's probe
//! with it) and send frames that netfilter never sees.
//!
//! A drop the pod already has counts only when every runtime reads it as
//! that drop ([`runtime_drops`](crate::mutate::read::k8s::runtime_drops)):
//! `cap_net_raw` is no drop to containerd, so it gets `NET_RAW` beside it.

use serde_json::json;

use crate::mutate::patch::PatchBuilder;
use crate::mutate::read::pod::ContainerView;

const NET_ADMIN: &str = "NET_ADMIN";
const NET_RAW: &str = "NET_RAW";

/// The drops a container still lacks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NetDrops {
    admin: bool,
    raw: bool,
}

impl NetDrops {
    /// What `c` does not drop yet of `NET_ADMIN` and `NET_RAW`.
    pub(crate) fn missing(c: &ContainerView<'_>) -> Self {
        let drop = c.capabilities().and_then(|caps| caps.drop.as_ref());
        NetDrops {
            admin: !drop.is_some_and(|d| d.drops_net_admin),
            raw: !drop.is_some_and(|d| d.drops_net_raw),
        }
    }

    pub(crate) fn any(self) -> bool {
        self.admin || self.raw
    }

    /// The names to add, in this order.
    pub(crate) fn names(self) -> impl Iterator<Item = &'static str> {
        [(self.admin, NET_ADMIN), (self.raw, NET_RAW)]
            .into_iter()
            .filter_map(|(missing, name)| missing.then_some(name))
    }
}

/// Which levels of `securityContext.capabilities.drop` a container has.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Levels {
    pub security_context: bool,
    pub capabilities: bool,
    pub drop: bool,
}

impl Levels {
    pub(crate) fn of(c: &ContainerView<'_>) -> Self {
        let sc = c.security_context.as_ref();
        let caps = sc.and_then(|s| s.capabilities.as_ref());
        Levels {
            security_context: sc.is_some(),
            capabilities: caps.is_some(),
            drop: caps.is_some_and(|caps| caps.drop.is_some()),
        }
    }
}

/// Writes `drops` into the container at `at` (its list and index): into
/// the deepest level it has, a missing parent added whole.
pub(crate) fn write(drops: NetDrops, levels: Levels, at: [&str; 3], patch: &mut PatchBuilder) {
    if !drops.any() {
        return;
    }
    let [spec, list, index] = at;
    let names: Vec<&str> = drops.names().collect();
    if !levels.security_context {
        patch.add(
            &[spec, list, index, "securityContext"],
            &json!({"capabilities": {"drop": names}}),
        );
    } else if !levels.capabilities {
        patch.add(
            &[spec, list, index, "securityContext", "capabilities"],
            &json!({"drop": names}),
        );
    } else if !levels.drop {
        let at = [spec, list, index, "securityContext", "capabilities", "drop"];
        patch.add(&at, &names);
    } else {
        let at = [
            spec,
            list,
            index,
            "securityContext",
            "capabilities",
            "drop",
            "-",
        ];
        for name in names {
            patch.add(&at, name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::read::pod::PodView;

    fn missing(container: &str) -> NetDrops {
        let raw = format!(r#"{{"spec":{{"containers":[{container}]}}}}"#);
        let pod = PodView::parse(&raw).unwrap();
        NetDrops::missing(&pod.spec().containers()[0])
    }

    #[test]
    fn what_every_runtime_drops_counts() {
        let both = NetDrops {
            admin: true,
            raw: true,
        };
        assert_eq!(missing(r#"{"name":"a"}"#), both);
        for dropped in [r#"["ALL"]"#, r#"["all"]"#, r#"["NET_RAW","net_admin"]"#] {
            let c = format!(r#"{{"securityContext":{{"capabilities":{{"drop":{dropped}}}}}}}"#);
            assert!(!missing(&c).any(), "{dropped}");
        }
        for not_everywhere in [
            r#"["cap_net_admin","CAP_NET_RAW"]"#,
            r#"[" NET_ADMIN","NET_RAW "]"#,
        ] {
            let c =
                format!(r#"{{"securityContext":{{"capabilities":{{"drop":{not_everywhere}}}}}}}"#);
            assert_eq!(missing(&c), both, "{not_everywhere}");
        }
        let raw_only = missing(r#"{"securityContext":{"capabilities":{"drop":["NET_ADMIN"]}}}"#);
        assert_eq!(raw_only.names().collect::<Vec<_>>(), [NET_RAW]);
    }
}
