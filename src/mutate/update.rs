//! A sandbox pod after admission (contract: select.pod-update,
//! egress.update-images, egress.ephemeral): what admission guaranteed
//! must hold for the pod's whole life, and a pod spec can still change in
//! two ways that matter to it.
//!
//! - An UPDATE may change a container's image (images are mutable). The
//!   webhook's own containers run with the privileges of egress control
//!   (the sidecar with `NET_ADMIN`, the installer privileged beside a
//!   policy), so their images are fixed at admission; the sandbox's own
//!   container may change its image, and keeps its securityContext.
//! - The `ephemeralcontainers` subresource adds containers to a running
//!   pod. Beside egress control each new one is held to the rules of any
//!   other container (not privileged, no `NET_ADMIN`, `NET_RAW` or `ALL`,
//!   no `SYS_PTRACE` where it sees the sidecar's processes, no way to the
//!   token) and gets `NET_ADMIN` and `NET_RAW` dropped.

use std::collections::HashSet;

use serde_json::value::RawValue;

use super::context::Context;
use super::denial::Denial;
use super::inject::drops::{self, Levels, NetDrops};
use super::inject::egress::check_container;
use super::inject::guard;
use super::inject::owned::{self, EGRESS, INSTALLER, List};
use super::intent::decode_string;
use super::patch::Patch;
use super::patch::PatchBuilder;
use super::read::pod::{ContainerView, PodView};
use super::read::raw::Named;
use super::select::{SkipReason, request_namespace};

/// The subresource that adds ephemeral containers.
pub(crate) const EPHEMERAL_CONTAINERS: &str = "ephemeralcontainers";

/// What a Pod UPDATE gets: `mod.rs` turns it into a `Decision` (`From`).
#[derive(Debug)]
pub(crate) enum Judged {
    Skip(SkipReason),
    /// Allowed with this patch (empty but for new ephemeral containers).
    Admit(Patch),
    Deny(Denial),
}

/// Judges a Pod UPDATE, of the pod itself (`sub_resource` `None`) or of
/// its ephemeral containers (contract: select.pod-update). `namespace` is
/// the request's.
#[must_use]
pub(crate) fn judge(
    new: &PodView<'_>,
    old: &PodView<'_>,
    sub_resource: Option<&str>,
    namespace: Option<&str>,
    ctx: &Context<'_>,
) -> Judged {
    let config = ctx.config;
    let keys = config.keys();
    let namespace = request_namespace(namespace, new);
    if ctx.own_namespace == Some(namespace)
        || config.excluded_namespaces.iter().any(|n| n == namespace)
    {
        return Judged::Skip(SkipReason::ExcludedNamespace);
    }
    // The apiserver sends an UPDATE when either object carries the label:
    // one that takes it away in the same request is still judged.
    if old.label(&keys.id).is_none() && new.label(&keys.id).is_none() {
        return Judged::Skip(SkipReason::NotASandbox);
    }
    // A pod that opted out at admission has nothing of the webhook's.
    if annotation(old, &keys.inject).is_some_and(|v| v.trim().eq_ignore_ascii_case("false")) {
        return Judged::Skip(SkipReason::OptOut);
    }
    let decided = match sub_resource.filter(|s| !s.is_empty()) {
        None => images(new, old).map(|()| Patch::default()),
        Some(EPHEMERAL_CONTAINERS) => ephemeral(new, old, ctx),
        Some(_) => return Judged::Skip(SkipReason::NotPodCreate),
    };
    match decided {
        Ok(patch) => Judged::Admit(patch),
        Err(denial) => Judged::Deny(denial),
    }
}

fn annotation(pod: &PodView<'_>, key: &str) -> Option<String> {
    pod.annotation(key)
        .and_then(|raw| decode_string(raw).ok().flatten())
        .map(std::borrow::Cow::into_owned)
}

/// The images of `execd-installer` and `egress`, in either list, as they
/// were. Read from the pods' text: the view keeps no images.
fn images(new: &PodView<'_>, old: &PodView<'_>) -> Result<(), Denial> {
    let (Some(was), Some(now)) = (old.source.lists(), new.source.lists()) else {
        return Err(unreadable());
    };
    for (list, before, after) in [
        (List::Init, &was.init_containers, &now.init_containers),
        (List::Main, &was.containers, &now.containers),
    ] {
        for name in [INSTALLER, EGRESS] {
            let image = |raws: &[&RawValue]| {
                raws.iter().map(|raw| Named::of(raw)).find_map(|c| {
                    (c.name.as_deref() == Some(name))
                        .then(|| c.image.as_deref().unwrap_or_default().to_owned())
                })
            };
            if let (Some(from), Some(to)) = (image(before), image(after))
                && from != to
            {
                return Err(Denial::InjectedImageChanged {
                    list: list.noun(),
                    container: name,
                    from,
                    to,
                });
            }
        }
    }
    Ok(())
}

fn unreadable() -> Denial {
    Denial::PatchEncoding("the pod's containers could not be read again".to_owned())
}

/// The ephemeral containers this request adds (by name: the apiserver
/// allows no change to one already there), each checked and given the
/// drops, when the pod runs egress control: it has the webhook's policy
/// annotation, or an egress sidecar.
fn ephemeral(new: &PodView<'_>, old: &PodView<'_>, ctx: &Context<'_>) -> Result<Patch, Denial> {
    let keys = ctx.config.keys();
    let owned = owned::find(new.spec()).unwrap_or_default();
    let policed = old.annotation(&keys.network_policy).is_some()
        || owned::find(old.spec()).is_ok_and(|o| o.sidecar.is_some());
    if !policed {
        return Ok(Patch::default());
    }
    let before: HashSet<&str> = old
        .spec()
        .ephemeral_containers()
        .iter()
        .map(|c| c.name.as_ref())
        .collect();
    let added: Vec<(usize, &ContainerView<'_>)> = new
        .spec()
        .ephemeral_containers()
        .iter()
        .enumerate()
        .filter(|(_, c)| !before.contains(c.name.as_ref()))
        .collect();
    if added.is_empty() {
        return Ok(Patch::default());
    }
    let key = &keys.network_policy;
    let spec = new.spec();
    for &(_, c) in &added {
        check_container(c, "ephemeral container", key)?;
    }
    guard::check_shared_processes(spec, owned, key)?;
    let lists = new.source.lists().ok_or_else(unreadable)?;
    for &(index, c) in &added {
        let target = lists
            .ephemeral_containers
            .get(index)
            .map(|raw| Named::of(raw));
        let target = target
            .as_ref()
            .and_then(|n| n.target_container_name.as_deref());
        guard::check_ephemeral_target(c, target, key)?;
    }
    let token = annotation(old, &keys.egress_auth_token);
    guard::check_token(new, owned, token.as_deref(), keys)?;
    let mut patch = PatchBuilder::default();
    for (index, c) in added {
        let missing = NetDrops::missing(c);
        drops::write(
            missing,
            Levels::of(c),
            ["spec", "ephemeralContainers", &index.to_string()],
            &mut patch,
        );
    }
    patch.finish().map_err(Denial::PatchEncoding)
}

#[cfg(test)]
mod tests;
