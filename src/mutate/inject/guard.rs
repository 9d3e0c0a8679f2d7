//! Beside a network policy, what no container but the webhook's egress
//! sidecar may hold while the pod runs (contract: egress.drop-net-raw,
//! egress.ptrace, egress.token-exposure, egress.nameservers): every
//! container shares the sidecar's network namespace, so each one's
//! capabilities, process view and inputs decide whether the sandbox's code
//! can undo its own policy.
//!
//! - Capabilities: `egress::check_privileges` refuses what a pod adds;
//!   this drops what the runtime grants by default (`NET_RAW`) from every
//!   container but the main one (`sandbox` drops it there) and the
//!   sidecar, and refuses `SYS_PTRACE` where the pod shares processes.
//! - The token: the sidecar's API takes any policy from whoever holds it,
//!   so no container but the sidecar may read it. It sits in the pod's
//!   annotations, so a downward API reference that reads them is refused;
//!   a token the pod chose itself must appear in no other container. (The
//!   kubelet's probe carries it too; without `NET_RAW` no container can
//!   capture that.)
//! - DNS: in `dns+nft` mode the sidecar lets the pod's nameservers through
//!   on every port, so the pod may not choose them.

use serde_json::Value;
use serde_json::value::RawValue;

use super::drops::{self, Levels, NetDrops};
use super::egress::check_container;
use super::layout::Layout;
use super::owned::{At, EGRESS, List, Owned};
use super::sandbox::EXECD_PATH;
use crate::config::{Config, EgressMode, Keys};
use crate::mutate::denial::Denial;
use crate::mutate::intent::{Intent, decode_string};
use crate::mutate::patch::PatchBuilder;
use crate::mutate::read::k8s::{
    BIN_MOUNT, BIN_VOLUME, BOOTSTRAP, ISOLATION_MOUNT, ISOLATION_VOLUME, KnownEnv,
};
use crate::mutate::read::lists::reads_metadata_maps;
use crate::mutate::read::pod::{ContainerView, PodView, SpecView};
use crate::mutate::read::raw::Named;

/// Every init container and container that is not the webhook's (which
/// `layout` makes exactly its own): its list, its index, the container.
fn others<'p, 'a>(
    spec: &'p SpecView<'a>,
    owned: Owned,
) -> impl Iterator<Item = (List, usize, &'p ContainerView<'a>)> {
    [
        (List::Init, spec.init_containers()),
        (List::Main, spec.containers()),
    ]
    .into_iter()
    .flat_map(|(list, cs)| {
        cs.iter()
            .enumerate()
            .map(move |(index, c)| (list, index, c))
    })
    .filter(move |&(list, index, _)| !owned.holds(At { list, index }))
}

/// What a pod with a network policy may not hold, checked in a fixed
/// order (after `egress::check_privileges`).
pub(crate) fn check(
    pod: &PodView<'_>,
    owned: Owned,
    intent: &Intent,
    config: &Config,
) -> Result<(), Denial> {
    let spec = pod.spec();
    let keys = config.keys();
    let key = &keys.network_policy;
    for c in spec.ephemeral_containers() {
        check_container(c, EPHEMERAL, key)?;
    }
    check_shared_processes(spec, owned, key)?;
    if !spec.ephemeral_containers().is_empty() {
        let lists = pod.source.lists().ok_or_else(unreadable)?;
        for (c, raw) in spec
            .ephemeral_containers()
            .iter()
            .zip(&lists.ephemeral_containers)
        {
            let named = Named::of(raw);
            check_ephemeral_target(c, named.target_container_name.as_deref(), key)?;
        }
    }
    if intent.mode(config) == EgressMode::DnsNft
        && spec
            .dns_config
            .as_ref()
            .is_some_and(super::super::read::pod::DnsConfigView::has_nameservers)
    {
        return Err(Denial::NameserversWithNft { key: key.clone() });
    }
    if let Some(token) = intent.egress_token.as_deref()
        && let Some(written) = written_by_webhook(intent, config, token)
    {
        return Err(Denial::TokenWritten {
            written: written.to_owned(),
            token_key: keys.egress_auth_token.clone(),
        });
    }
    check_token(pod, owned, intent.egress_token.as_deref(), keys)
}

/// The first of the strings the webhook itself may write into the
/// sandbox's containers (the sidecar's and the installer's aside) that
/// holds `token`: its env entries, the bootstrap command, its mounts and
/// the capabilities it drops. Code in the sandbox reads them; and a token
/// held by one would be found in the admitted pod when it is admitted
/// again, so it is refused at once, and both admissions agree. Runs for
/// every pod with a token (each reinvocation of one with a policy), so it
/// allocates nothing.
fn written_by_webhook<'a>(intent: &'a Intent, config: &Config, token: &str) -> Option<&'a str> {
    const FIXED: [&str; 8] = [
        EXECD_PATH,
        BOOTSTRAP,
        BIN_VOLUME,
        BIN_MOUNT,
        ISOLATION_VOLUME,
        ISOLATION_MOUNT,
        "NET_ADMIN",
        "NET_RAW",
    ];
    let init = config.execd.run_as_init.then_some("1");
    let from_pod = [
        Some(intent.sandbox_id.as_str()),
        intent.lifecycle.as_deref(),
        intent.mitm(),
    ];
    FIXED
        .into_iter()
        .chain(KnownEnv::ALL.map(KnownEnv::name))
        .chain(init)
        .find(|w| holds(w, token))
        .or_else(|| from_pod.into_iter().flatten().find(|w| holds(w, token)))
}

const EPHEMERAL: &str = "ephemeral container";

/// `SYS_PTRACE` in a container that sees the sidecar's processes: the pod
/// shares one process namespace, or the host's.
pub(crate) fn check_shared_processes(
    spec: &SpecView<'_>,
    owned: Owned,
    key: &str,
) -> Result<(), Denial> {
    let (via, undo) = if spec.share_process_namespace == Some(true) {
        (
            "spec.shareProcessNamespace is true",
            "set spec.shareProcessNamespace to false",
        )
    } else if spec.host_pid == Some(true) {
        ("spec.hostPID is true", "set spec.hostPID to false")
    } else {
        return Ok(());
    };
    for (list, _, c) in others(spec, owned) {
        ptrace(c, list.noun(), via, undo, key)?;
    }
    for c in spec.ephemeral_containers() {
        ptrace(c, EPHEMERAL, via, undo, key)?;
    }
    Ok(())
}

fn ptrace(
    c: &ContainerView<'_>,
    noun: &'static str,
    via: &'static str,
    undo: &'static str,
    key: &str,
) -> Result<(), Denial> {
    let added = c.capabilities().and_then(|caps| caps.add.as_ref());
    match added.and_then(|a| a.sys_ptrace) {
        Some(named) => Err(Denial::PtraceWithSharedProcesses {
            list: noun,
            container: c.name.to_string(),
            unusual: named.unusual,
            via,
            undo,
            key: key.to_owned(),
        }),
        None => Ok(()),
    }
}

/// An ephemeral container that joins the sidecar's own process namespace
/// (`targetContainerName: egress`) with `SYS_PTRACE`.
pub(crate) fn check_ephemeral_target(
    c: &ContainerView<'_>,
    target: Option<&str>,
    key: &str,
) -> Result<(), Denial> {
    if target == Some(EGRESS) {
        return ptrace(
            c,
            EPHEMERAL,
            "its targetContainerName is the egress sidecar",
            "target another container",
            key,
        );
    }
    Ok(())
}

/// The egress token where code in the sandbox could read it. `token` is
/// the pod's own (`<prefix>/egress-auth-token`); without one the webhook
/// makes it, and only the annotation can leak it. Only a pod that reads
/// its annotations or labels through the downward API, or that chose its
/// token, reads its containers and volumes again, whole.
pub(crate) fn check_token(
    pod: &PodView<'_>,
    owned: Owned,
    token: Option<&str>,
    keys: &Keys,
) -> Result<(), Denial> {
    let spec = pod.spec();
    let volumes = spec.volumes.as_ref().is_some_and(|v| v.reads_metadata_maps);
    let env = |c: &ContainerView<'_>| c.env.is_some_and(|e| e.reads_metadata_maps);
    let containers =
        others(spec, owned).any(|(_, _, c)| env(c)) || spec.ephemeral_containers().iter().any(env);
    if !volumes && !containers && token.is_none() {
        return Ok(());
    }
    let lists = pod.source.lists().ok_or_else(unreadable)?;
    let exposure = Exposure { pod, keys, token };
    for raw in &lists.volumes {
        let volume = parse(raw);
        let name = volume.get("name").and_then(Value::as_str).unwrap_or("");
        for path in volume_field_paths(&volume) {
            if exposure.exposes(path) {
                return Err(exposure.downward(format!("volume '{name}'"), path));
            }
        }
    }
    let raw_lists = [
        (List::Init, &lists.init_containers, false),
        (List::Main, &lists.containers, false),
        (List::Init, &lists.ephemeral_containers, true),
    ];
    for (list, raws, is_ephemeral) in raw_lists {
        for (index, raw) in raws.iter().enumerate() {
            if !is_ephemeral && owned.holds(At { list, index }) {
                continue;
            }
            let c = parse(raw);
            let noun = if is_ephemeral { EPHEMERAL } else { list.noun() };
            let name = c.get("name").and_then(Value::as_str).unwrap_or("");
            let entries = c.get("env").and_then(Value::as_array).into_iter().flatten();
            for (at, entry) in entries.enumerate() {
                let path = entry
                    .pointer("/valueFrom/fieldRef/fieldPath")
                    .and_then(Value::as_str);
                if let Some(path) = path.filter(|p| exposure.exposes(p)) {
                    let place = format!("{noun} '{name}' (env[{at}])");
                    return Err(exposure.downward(place, path));
                }
            }
            if let Some(token) = token
                && let Some(at) = find_token(&c, token, String::new())
            {
                return Err(Denial::TokenCopied {
                    place: format!("{noun} '{name}' ({at})"),
                    token_key: keys.egress_auth_token.clone(),
                });
            }
        }
    }
    Ok(())
}

/// The source of a view could not be read again: a bug, said as one.
fn unreadable() -> Denial {
    Denial::PatchEncoding("the pod's containers could not be read again".to_owned())
}

/// A list item read whole; one that does not read is a pod the view
/// refused already.
fn parse(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).unwrap_or(Value::Null)
}

/// The `fieldPath` of every downward API item of a volume, direct or
/// projected.
fn volume_field_paths(volume: &Value) -> impl Iterator<Item = &str> {
    let direct = volume.pointer("/downwardAPI/items");
    let projected = volume
        .pointer("/projected/sources")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.pointer("/downwardAPI/items"));
    direct
        .into_iter()
        .chain(projected)
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|item| item.pointer("/fieldRef/fieldPath").and_then(Value::as_str))
}

/// Whether a downward API path hands out the token.
struct Exposure<'p, 'a> {
    pod: &'p PodView<'a>,
    keys: &'p Keys,
    token: Option<&'p str>,
}

impl Exposure<'_, '_> {
    /// All annotations always hold the token (the webhook writes it there
    /// when the pod has none); one annotation or label does when it is the
    /// token's, or holds the pod's own token.
    fn exposes(&self, field_path: &str) -> bool {
        if !reads_metadata_maps(field_path) {
            return false;
        }
        let path = field_path.trim();
        let (annotations, rest) = match path.strip_prefix("metadata.annotations") {
            Some(rest) => (true, rest),
            None => (false, path.strip_prefix("metadata.labels").unwrap_or("")),
        };
        let Some(key) = rest.strip_prefix("['").and_then(|r| r.strip_suffix("']")) else {
            // The whole map, or a form the apiserver refuses: read as the
            // whole map.
            return annotations || self.any_label_holds_token();
        };
        if annotations && key == self.keys.egress_auth_token {
            return true;
        }
        let value = if annotations {
            self.pod.annotation(key)
        } else {
            self.pod.label(key)
        };
        value
            .and_then(|v| decode_string(v).ok().flatten())
            .is_some_and(|v| self.token.is_some_and(|t| holds(&v, t)))
    }

    fn any_label_holds_token(&self) -> bool {
        let Some(token) = self.token else {
            return false;
        };
        let labels = self.pod.metadata.as_ref().and_then(|m| m.labels.as_ref());
        labels.is_some_and(|l| {
            l.keys().any(|k| {
                l.get(k)
                    .and_then(|v| decode_string(v).ok().flatten())
                    .is_some_and(|v| holds(&v, token))
            })
        })
    }

    fn downward(&self, place: String, field_path: &str) -> Denial {
        Denial::TokenByDownwardApi {
            place,
            field_path: field_path.to_owned(),
            token_key: self.keys.egress_auth_token.clone(),
            key: self.keys.network_policy.clone(),
        }
    }
}

/// Whether `text` holds `token`: as a part of it when the token is long
/// enough never to occur by chance (a generated one is 32 characters),
/// else whole.
fn holds(text: &str, token: &str) -> bool {
    if token.len() >= 8 {
        text.contains(token)
    } else {
        text == token
    }
}

/// The path, in JSON's notation from the container, of the first string
/// value that holds `token`. Keys are not read: a container's keys are the
/// names its schema fixes, and those of its resource maps are resource
/// names, none of which code in the sandbox can read; and the webhook
/// writes keys of its own (`securityContext.capabilities`), which a token
/// may well be a part of.
fn find_token(value: &Value, token: &str, at: String) -> Option<String> {
    match value {
        Value::String(s) => holds(s, token).then_some(at),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| find_token(v, token, format!("{at}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            let at = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            find_token(v, token, at)
        }),
        _ => None,
    }
}

/// The drops every container but the sidecar and the main container
/// (whose securityContext `sandbox` writes) still needs.
#[derive(Debug, Default)]
pub(crate) struct Drops(Vec<(List, usize, NetDrops, Levels)>);

/// With a network policy: what the pod's other containers still drop.
pub(crate) fn plan_drops(spec: &SpecView<'_>, owned: Owned, main: usize) -> Drops {
    let mut out = Vec::new();
    for (list, index, c) in others(spec, owned) {
        if list == List::Main && index == main {
            continue;
        }
        let missing = NetDrops::missing(c);
        if missing.any() {
            out.push((list, index, missing, Levels::of(c)));
        }
    }
    Drops(out)
}

impl Drops {
    /// After the layout's operations, at the containers' places then.
    pub(crate) fn write(&self, layout: &Layout<'_>, owned: Owned, patch: &mut PatchBuilder) {
        for &(list, index, missing, levels) in &self.0 {
            let after = match list {
                List::Init => layout.init_index_after(index, owned),
                List::Main => layout.main_index_after(index),
            };
            if let Some(at) = after {
                drops::write(
                    missing,
                    levels,
                    ["spec", list.field(), &at.to_string()],
                    patch,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests;
