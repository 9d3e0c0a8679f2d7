//! The sandbox (main) container's changes (contract: execd.command-wrap,
//! execd.isolation): its command wrapped by bootstrap.sh, its env, its mounts,
//! and its securityContext (`NET_ADMIN` and `NET_RAW` dropped with a network policy;
//! `SYS_ADMIN` and unconfined seccomp and AppArmor for isolated sessions). Each
//! is decided from what the container already has, so a second pass over the
//! webhook's own output plans nothing.

use serde::Serialize;
use serde_json::{Value, json};
use smallvec::SmallVec;

use crate::config::Config;

use super::drops::NetDrops;
use crate::mutate::denial::Denial;
use crate::mutate::intent::Intent;
use crate::mutate::patch::PatchBuilder;
use crate::mutate::read::k8s::{
    BIN, BOOTSTRAP, EnvVar, ISOLATION, KnownEnv, Mount, same_capability,
};
use crate::mutate::read::lists::{CapabilitiesView, Command, ProfileView};
use crate::mutate::read::pod::{ContainerView, PodView};

pub(crate) const EXECD_PATH: &str = "/opt/opensandbox/execd";
const SYS_ADMIN: &str = "SYS_ADMIN";
const UNCONFINED: Profile = Profile { kind: "Unconfined" };

/// An item for a list the container may not have yet.
struct ListAdd<T> {
    items: T,
    list_exists: bool,
}

/// The main container's changes.
pub(crate) struct SandboxChanges<'a> {
    command: CommandChange<'a>,
    env: ListAdd<SmallVec<[EnvVar<'a>; 5]>>,
    /// An `OPENSANDBOX_ID` entry whose value is not the sandbox's id: its
    /// index, and the id it gets.
    id: Option<(usize, &'a str)>,
    mounts: ListAdd<SmallVec<[Mount; 2]>>,
    security: Security,
}

enum CommandChange<'a> {
    /// Already wrapped by bootstrap.sh.
    Keep,
    /// `bootstrap.sh` goes in front of the existing command.
    Prepend,
    /// No command: the entrypoint annotation's, wrapped.
    Set(Vec<&'a str>),
}

/// The securityContext changes, and what of it the container has.
#[derive(Default)]
struct Security {
    drops: NetDrops,
    add_sys_admin: Option<AddList>,
    seccomp: bool,
    app_armor: bool,
    /// The container has a `securityContext`, `capabilities`, a `drop`
    /// list.
    has: (bool, bool, bool),
}

/// How `SYS_ADMIN` joins `capabilities.add`.
enum AddList {
    /// There is no list yet.
    New,
    /// The sorted union with the list there (upstream's `sorted(set(...))`).
    Replace(Vec<String>),
}

#[derive(Serialize)]
struct Profile {
    #[serde(rename = "type")]
    kind: &'static str,
}

/// What the main container (`spec.containers[main]`) still needs.
pub(crate) fn plan<'a>(
    pod: &PodView<'_>,
    main: usize,
    intent: &'a Intent,
    config: &'a Config,
) -> Result<SandboxChanges<'a>, Denial> {
    let c = &pod.spec().containers()[main];
    let id = c
        .env
        .and_then(|e| e.id_at)
        .filter(|at| !sets_id(pod, main, *at, &intent.sandbox_id))
        .map(|at| (at, intent.sandbox_id.as_str()));
    let mut mounts = SmallVec::new();
    if !c.mounts_bin() {
        mounts.push(BIN);
    }
    if intent.isolation && !c.volume_mounts.as_ref().is_some_and(|m| m.isolation) {
        mounts.push(ISOLATION);
    }
    Ok(SandboxChanges {
        command: command_change(c, intent, &config.keys().entrypoint)?,
        env: ListAdd {
            items: env(c, intent, config),
            list_exists: c.env.is_some(),
        },
        id,
        mounts: ListAdd {
            items: mounts,
            list_exists: c.volume_mounts.is_some(),
        },
        security: security(pod, main, c, intent),
    })
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

/// The variables the main container lacks, in the contract's order
/// (contract: execd.env-order); one it
/// already has is never overwritten (but `OPENSANDBOX_ID`, see `plan`).
fn env<'a>(
    c: &ContainerView<'_>,
    intent: &'a Intent,
    config: &Config,
) -> SmallVec<[EnvVar<'a>; 5]> {
    let mut env = SmallVec::new();
    let mut push = |known: KnownEnv, value: &'a str| {
        if !c.has_env(known) {
            env.push(EnvVar {
                name: known.name(),
                value,
            });
        }
    };
    if let Some(lifecycle) = &intent.lifecycle {
        push(KnownEnv::Lifecycle, lifecycle);
    }
    push(KnownEnv::Id, &intent.sandbox_id);
    if config.execd.run_as_init {
        push(KnownEnv::ExecdInit, "1");
    }
    if let Some(value) = intent.mitm() {
        push(KnownEnv::Mitm, value);
    }
    push(KnownEnv::Execd, EXECD_PATH);
    env
}

/// With a network policy the main container loses `NET_ADMIN` and
/// `NET_RAW` (`drops`); the drop list is merged, never replaced. Isolated
/// sessions add `SYS_ADMIN` and unconfine seccomp and AppArmor.
fn security(pod: &PodView<'_>, main: usize, c: &ContainerView<'_>, intent: &Intent) -> Security {
    let sc = c.security_context.as_ref();
    let caps = sc.and_then(|s| s.capabilities.as_ref());
    let add = caps.and_then(|caps| caps.add.as_ref());
    let isolation = intent.isolation;
    Security {
        drops: if intent.policy.is_some() {
            NetDrops::missing(c)
        } else {
            NetDrops::default()
        },
        add_sys_admin: match add {
            _ if !isolation => None,
            None => Some(AddList::New),
            Some(add) if add.sys_admin => None,
            Some(_) => Some(AddList::Replace(sorted_union(pod, main))),
        },
        seccomp: isolation
            && !sc
                .and_then(|s| s.seccomp_profile.as_ref())
                .is_some_and(ProfileView::unconfined),
        app_armor: isolation
            && !sc
                .and_then(|s| s.app_armor_profile.as_ref())
                .is_some_and(ProfileView::unconfined),
        has: (
            sc.is_some(),
            caps.is_some(),
            caps.is_some_and(|caps: &CapabilitiesView| caps.drop.is_some()),
        ),
    }
}

/// Whether the main container's env entry at `at` (an `OPENSANDBOX_ID`) is
/// exactly `{name: OPENSANDBOX_ID, value: id}`. The view keeps no values,
/// so the entry is read from the pod's text: only a pod that sets
/// `OPENSANDBOX_ID` itself (or the webhook's own output, read again anyway)
/// comes here.
fn sets_id(pod: &PodView<'_>, main: usize, at: usize, id: &str) -> bool {
    let entry = pod
        .source
        .lists()
        .and_then(|l| l.containers.get(main).copied())
        .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        .and_then(|c| c.get("env").and_then(|e| e.get(at)).cloned());
    entry == Some(json!({"name": KnownEnv::Id.name(), "value": id}))
}

/// The main container's `capabilities.add` with `SYS_ADMIN`, sorted and
/// without repeats. The view keeps no names, so the list is read from the
/// pod's text: only an isolated sandbox whose main container adds other
/// capabilities comes here.
fn sorted_union(pod: &PodView<'_>, main: usize) -> Vec<String> {
    let listed = pod
        .source
        .lists()
        .and_then(|l| l.containers.get(main).copied())
        .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
        .and_then(|c| c.pointer("/securityContext/capabilities/add").cloned());
    let mut caps: Vec<String> = listed
        .as_ref()
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|c| !same_capability(c, SYS_ADMIN))
        .map(str::to_owned)
        .chain([SYS_ADMIN.to_owned()])
        .collect();
    caps.sort();
    caps.dedup();
    caps
}

impl SandboxChanges<'_> {
    /// The main container's operations; it is at `index` by then (the
    /// layout may have removed a sidecar before it).
    pub fn write(&self, index: usize, patch: &mut PatchBuilder) {
        // Paths are arrays on the stack, the index's text too: this runs
        // on every admission.
        let mut idx = itoa::Buffer::new();
        let c = ["spec", "containers", idx.format(index)];
        match &self.command {
            CommandChange::Keep => {}
            CommandChange::Prepend => patch.add(&[c[0], c[1], c[2], "command", "0"], BOOTSTRAP),
            CommandChange::Set(command) => patch.add(&[c[0], c[1], c[2], "command"], command),
        }
        if let Some((at, id)) = self.id {
            let entry = EnvVar {
                name: KnownEnv::Id.name(),
                value: id,
            };
            patch.replace(&[c[0], c[1], c[2], "env", &at.to_string()], &entry);
        }
        patch.append(
            &[c[0], c[1], c[2], "env"],
            self.env.list_exists,
            &self.env.items,
        );
        patch.append(
            &[c[0], c[1], c[2], "volumeMounts"],
            self.mounts.list_exists,
            &self.mounts.items,
        );
        self.security.write(&c, patch);
    }
}

impl Security {
    fn any(&self) -> bool {
        self.drops.any() || self.add_sys_admin.is_some() || self.seccomp || self.app_armor
    }

    /// The fewest operations: the deepest part the container has is added
    /// into; a missing parent is added whole.
    fn write(&self, c: &[&str; 3], patch: &mut PatchBuilder) {
        let (has_sc, has_caps, has_drop) = self.has;
        let drop = self
            .drops
            .any()
            .then(|| json!(self.drops.names().collect::<Vec<_>>()));
        let add = self.add_sys_admin.as_ref().map(|a| match a {
            AddList::New => json!([SYS_ADMIN]),
            AddList::Replace(caps) => json!(caps),
        });
        let sc = "securityContext";
        if !has_sc {
            if self.any() {
                patch.add(&[c[0], c[1], c[2], sc], &self.whole(drop, add));
            }
            return;
        }
        if drop.is_some() || add.is_some() {
            let caps = [c[0], c[1], c[2], sc, "capabilities"];
            if has_caps {
                if has_drop {
                    for name in self.drops.names() {
                        patch.add(
                            &[caps[0], caps[1], caps[2], caps[3], caps[4], "drop", "-"],
                            name,
                        );
                    }
                } else if let Some(drop) = &drop {
                    patch.add(&[caps[0], caps[1], caps[2], caps[3], caps[4], "drop"], drop);
                }
                if let Some(add) = &add {
                    patch.add(&[caps[0], caps[1], caps[2], caps[3], caps[4], "add"], add);
                }
            } else {
                patch.add(&caps, &capabilities(drop, add));
            }
        }
        if self.seccomp {
            patch.add(&[c[0], c[1], c[2], sc, "seccompProfile"], &UNCONFINED);
        }
        if self.app_armor {
            patch.add(&[c[0], c[1], c[2], sc, "appArmorProfile"], &UNCONFINED);
        }
    }

    /// A whole `securityContext`.
    fn whole(&self, drop: Option<Value>, add: Option<Value>) -> Value {
        let mut sc = serde_json::Map::new();
        if drop.is_some() || add.is_some() {
            sc.insert("capabilities".into(), capabilities(drop, add));
        }
        if self.seccomp {
            sc.insert("seccompProfile".into(), json!(UNCONFINED));
        }
        if self.app_armor {
            sc.insert("appArmorProfile".into(), json!(UNCONFINED));
        }
        Value::Object(sc)
    }
}

fn capabilities(drop: Option<Value>, add: Option<Value>) -> Value {
    let mut caps = serde_json::Map::new();
    if let Some(add) = add {
        caps.insert("add".into(), add);
    }
    if let Some(drop) = drop {
        caps.insert("drop".into(), drop);
    }
    Value::Object(caps)
}

#[cfg(test)]
mod tests;
