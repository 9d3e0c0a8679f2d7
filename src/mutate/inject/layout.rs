//! Where the injected containers and the binary volume go, and what a pod
//! that already holds them under the webhook's names still needs (issue
//! 31: verify, don't trust, what looks injected).
//!
//! Invariant: after the patch, the init containers start with the installer
//! and, for a native sidecar, the sidecar right after it; a classic sidecar
//! is among the containers; the binary volume is there; and each of these
//! is exactly what the webhook injects now (`same`). So a second pass over
//! the webhook's own output plans nothing, and a pod cannot keep a stale
//! or spoofed copy under those names:
//! - one that differs (a busybox `egress`, rules the policy annotation no
//!   longer says, an installer that does not switch IPv6 off) is replaced
//!   by the webhook's, with a warning;
//! - one in the wrong place (an init container that runs before the
//!   installer, or before the sidecar, runs unfiltered) is moved;
//! - a sidecar the pod no longer asks for (no policy) is removed.
//!
//! `kept` says what a held sidecar may differ in and still be kept. The
//! common cases are single insertions at fixed places (a new pod: the
//! installer and sidecar at the front). Anything else rebuilds the init
//! container list in one operation: the webhook's containers first, then
//! the pod's own, each written back as the exact text the pod had.

use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use smallvec::SmallVec;

use super::egress::Sidecar;
use super::execd::Installer;
use super::kept::{Volume, classic_kept, expected_against, injected_volumes};
use super::owned::{At, EGRESS, INSTALLER, List, Owned};
use super::same::{self, Difference};
use crate::json::error::quoted;
use crate::mutate::denial::Denial;
use crate::mutate::patch::PatchBuilder;
use crate::mutate::quote::{clip, fit};
use crate::mutate::read::pod::{PodView, SpecView};

/// What the pod's lists still need.
#[derive(Debug)]
pub(crate) struct Layout<'a> {
    init: InitPlan<'a>,
    main: MainPlan,
    /// Where the sidecar is, when there is one: among the init containers
    /// (native) or the containers (classic).
    native: bool,
    /// The binary volume's, with isolated sessions the isolation volume's,
    /// and with the upstream proxy's CA bundle its Secret volume's.
    volumes: SmallVec<[(Volume<'a>, VolumePlan); 3]>,
    /// The pod has `spec.volumes`.
    volumes_exist: bool,
    /// One per container or volume fixed, for `kubectl` users.
    pub warnings: Vec<String>,
}

#[derive(Debug)]
enum InitPlan<'a> {
    Keep,
    /// The installer and/or the native sidecar, inserted at `at`.
    Insert {
        at: usize,
        installer: bool,
        sidecar: bool,
    },
    /// The whole list: the installer, the native sidecar (`front` of the
    /// webhook's in all), then `others` (the pod's own init containers, in
    /// order, as the pod has them).
    Rebuild {
        others: Vec<&'a RawValue>,
        front: usize,
    },
}

/// What `spec.containers` needs: only a classic sidecar lives there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MainPlan {
    Keep,
    Append,
    Replace(usize),
    Remove(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum VolumePlan {
    Keep,
    Add,
    Replace(usize),
}

/// What the webhook injects into this pod now: the installer always, the
/// sidecar with a network policy.
pub(crate) struct Wanted<'w, 'a> {
    pub installer: &'w Installer<'a>,
    pub sidecar: Option<&'w Sidecar<'a>>,
    /// Isolated sessions: the pod gets their volume too.
    pub isolation: bool,
}

/// The layout `pod` needs, given what it holds (`owned`) and what the
/// webhook injects (`wanted`).
#[expect(
    clippy::too_many_lines,
    reason = "one decision over three lists whose warnings must come in pod order; split, each part would need all the others' findings"
)]
pub(crate) fn plan<'a>(
    pod: &PodView<'a>,
    owned: Owned,
    wanted: &Wanted<'_, 'a>,
) -> Result<Layout<'a>, Denial> {
    let spec = pod.spec();
    let volumes = spec.volumes.as_ref();
    let ca = wanted.sidecar.and_then(Sidecar::ca_volume);
    let held = injected_volumes(volumes, wanted.isolation, ca);
    let list_exists = volumes.is_some();
    if !owned.any() && held.iter().all(|(_, at)| at.is_none()) {
        // A new sandbox: nothing to verify, nothing read twice.
        let native = wanted.sidecar.is_some_and(|s| s.native);
        let classic = wanted.sidecar.is_some_and(|s| !s.native);
        return Ok(Layout {
            init: InitPlan::Insert {
                at: 0,
                installer: true,
                sidecar: native,
            },
            main: if classic {
                MainPlan::Append
            } else {
                MainPlan::Keep
            },
            native,
            volumes: held.iter().map(|(v, _)| (*v, VolumePlan::Add)).collect(),
            volumes_exist: list_exists,
            warnings: Vec::new(),
        });
    }
    let lists = pod.source.lists().ok_or_else(|| {
        Denial::PatchEncoding("the pod's containers could not be read again".to_owned())
    })?;
    let raw_at = |at: At| match at.list {
        List::Init => lists.init_containers.get(at.index).copied(),
        List::Main => lists.containers.get(at.index).copied(),
    };
    let mut warnings = Vec::new();
    let mut check = |at: At, name: &str, expected: &Value, tokenless: Option<&Value>| {
        let Some(raw) = raw_at(at) else {
            return false;
        };
        match same::container(raw, expected) {
            Ok(()) => true,
            // A sidecar from an injected template lacks only its token,
            // which each pod gets at admission: no warning for that.
            Err(_) if tokenless.is_some_and(|t| same::container(raw, t).is_ok()) => false,
            Err(Difference(field)) => {
                // The key is the pod's: a field of the container spec is
                // named as it is, anything else quoted in JSON's notation,
                // and the whole cut to what kubectl shows.
                let field = if field.len() <= 40 && field.bytes().all(|b| b.is_ascii_alphanumeric())
                {
                    field
                } else {
                    quoted(&clip(&field))
                };
                warnings.push(fit(format!(
                    "replaced {} '{name}': its {field} differed from what the webhook injects",
                    at.list.noun()
                )));
                false
            }
        }
    };

    let installer_at = owned.installer.map(|index| At {
        list: List::Init,
        index,
    });
    let installer_exact =
        installer_at.is_some_and(|at| check(at, INSTALLER, &to_value(wanted.installer), None));
    let mut native = wanted.sidecar.filter(|s| s.native);
    let mut classic = wanted.sidecar.filter(|s| !s.native);
    let sidecar_exact = match (owned.sidecar, wanted.sidecar) {
        (Some(at), Some(sidecar)) => {
            let expected = expected_against(sidecar, raw_at(at));
            if native.is_some() && classic_kept(spec, owned, at, &expected, raw_at(at)) {
                // Kept where the pod has it: as the webhook's classic sidecar.
                (native, classic) = (None, native);
                true
            } else {
                let tokenless = sidecar.tokenless(&expected);
                check(at, EGRESS, &expected, Some(&tokenless))
            }
        }
        _ => false,
    };

    let installer_first = owned.installer == Some(0) && installer_exact;
    let sidecar_in_init = owned.sidecar.filter(|at| at.list == List::Init);
    let init = match (owned.installer, sidecar_in_init, native) {
        (None, None, _) => InitPlan::Insert {
            at: 0,
            installer: true,
            sidecar: native.is_some(),
        },
        (Some(_), None, None) if installer_first => InitPlan::Keep,
        (Some(_), None, Some(_)) if installer_first => InitPlan::Insert {
            at: 1,
            installer: false,
            sidecar: true,
        },
        (Some(_), Some(at), Some(_)) if installer_first && at.index == 1 && sidecar_exact => {
            InitPlan::Keep
        }
        _ => InitPlan::Rebuild {
            others: lists
                .init_containers
                .iter()
                .enumerate()
                .filter(|(index, _)| {
                    !owned.holds(At {
                        list: List::Init,
                        index: *index,
                    })
                })
                .map(|(_, raw)| *raw)
                .collect(),
            front: 1 + usize::from(native.is_some()),
        },
    };
    if let InitPlan::Rebuild { .. } = init {
        // The pod's own init containers go into the patch as they were
        // sent. A hand-made review can hold what Go's JSON writer never
        // emits (a lone `\ud800` escape in a field the reader skips): it is
        // read now, and refused with its path, rather than echoed into a
        // patch that a strict JSON reader rejects.
        for (index, raw) in lists.init_containers.iter().enumerate() {
            crate::json::error::from_str::<Value>(raw.get(), "").map_err(|e| {
                let at = format!("request.object.spec.initContainers[{index}]");
                Denial::MalformedPod(if e.path.is_empty() {
                    format!("{at}: {}", e.problem)
                } else {
                    format!("{at}.{}: {}", e.path, e.problem)
                })
            })?;
        }
    }
    if let (Some(at), true) = (installer_at, installer_exact && !installer_first) {
        warnings.push(moved(at, INSTALLER));
    }

    let main = match (owned.sidecar, classic) {
        (
            Some(At {
                list: List::Main, ..
            }),
            Some(_),
        ) if sidecar_exact => MainPlan::Keep,
        (
            Some(At {
                list: List::Main,
                index,
            }),
            Some(_),
        ) => MainPlan::Replace(index),
        (
            Some(At {
                list: List::Main,
                index,
            }),
            None,
        ) => MainPlan::Remove(index),
        (_, Some(_)) => MainPlan::Append,
        (_, None) => MainPlan::Keep,
    };
    if let Some(at) = owned.sidecar {
        if wanted.sidecar.is_none() {
            warnings.push(format!(
                "removed {} '{EGRESS}': the pod asks for no network policy",
                at.list.noun()
            ));
        } else if sidecar_exact && moves(at, &init, main) {
            warnings.push(moved(at, EGRESS));
        }
    }

    let mut planned = SmallVec::new();
    for (volume, at) in held {
        let plan = match at {
            None => VolumePlan::Add,
            Some(v) => {
                let exact = lists
                    .volumes
                    .get(v.index)
                    .is_some_and(|raw| same::volume(raw, &volume));
                if exact {
                    VolumePlan::Keep
                } else {
                    warnings.push(format!(
                        "replaced volume '{}': it differed from what the webhook injects",
                        volume.name()
                    ));
                    VolumePlan::Replace(v.index)
                }
            }
        };
        planned.push((volume, plan));
    }
    Ok(Layout {
        init,
        main,
        native: native.is_some(),
        volumes: planned,
        volumes_exist: list_exists,
        warnings,
    })
}

fn to_value<T: Serialize + ?Sized>(value: &T) -> Value {
    // Only a broken `Serialize` impl of the webhook's own containers
    // could fail; an unequal `Null` then replaces the held one.
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn moved(at: At, name: &str) -> String {
    format!(
        "moved {} '{name}' to where the webhook injects it",
        at.list.noun()
    )
}

/// Whether a sidecar that is exact where it is still moves: a rebuilt
/// list puts it right after the installer.
fn moves(at: At, init: &InitPlan<'_>, main: MainPlan) -> bool {
    match at.list {
        List::Init => matches!(init, InitPlan::Rebuild { .. }) && at.index != 1,
        List::Main => main == MainPlan::Remove(at.index),
    }
}

impl Layout<'_> {
    /// Where the main container at `index` is once the sidecar before it,
    /// if any, is removed.
    pub fn main_index(&self, index: usize) -> usize {
        match self.main {
            MainPlan::Remove(at) if at < index => index - 1,
            _ => index,
        }
    }

    /// Where the pod's init container at `index` is after the layout's
    /// operations; `None` for one of the webhook's that is written anew.
    pub fn init_index_after(&self, index: usize, owned: Owned) -> Option<usize> {
        match &self.init {
            InitPlan::Keep => Some(index),
            InitPlan::Insert {
                at,
                installer,
                sidecar,
            } => Some(if index >= *at {
                index + usize::from(*installer) + usize::from(*sidecar)
            } else {
                index
            }),
            InitPlan::Rebuild { front, .. } => {
                let held = |i: usize| {
                    owned.holds(At {
                        list: List::Init,
                        index: i,
                    })
                };
                if held(index) {
                    return None;
                }
                Some(front + (0..index).filter(|i| !held(*i)).count())
            }
        }
    }

    /// Where the pod's container at `index` is after the layout's
    /// operations; `None` for the sidecar, written anew or removed.
    pub fn main_index_after(&self, index: usize) -> Option<usize> {
        match self.main {
            MainPlan::Remove(at) | MainPlan::Replace(at) if at == index => None,
            MainPlan::Remove(at) if at < index => Some(index - 1),
            _ => Some(index),
        }
    }

    /// Whether the patch writes the installer, and the sidecar.
    pub fn writes(&self, wanted: &Wanted<'_, '_>) -> (bool, bool) {
        let main = matches!(self.main, MainPlan::Append | MainPlan::Replace(_));
        match &self.init {
            InitPlan::Keep => (false, main),
            InitPlan::Insert {
                installer, sidecar, ..
            } => (*installer, *sidecar || main),
            InitPlan::Rebuild { .. } => (true, main || (wanted.sidecar.is_some() && self.native)),
        }
    }

    /// The volume's operation and any removal from `spec.containers`: they
    /// come before the init containers and the main container's
    /// operations, which then use [`Layout::main_index`].
    pub fn write_first(&self, patch: &mut PatchBuilder) {
        // At most three volumes (binary, isolation, CA): on the stack.
        let added: SmallVec<[Volume<'_>; 3]> = self
            .volumes
            .iter()
            .filter(|(_, plan)| *plan == VolumePlan::Add)
            .map(|(v, _)| *v)
            .collect();
        patch.append(&["spec", "volumes"], self.volumes_exist, &added);
        for (volume, plan) in &self.volumes {
            if let VolumePlan::Replace(at) = plan {
                patch.replace(&["spec", "volumes", &at.to_string()], volume);
            }
        }
        if let MainPlan::Remove(at) = self.main {
            patch.remove(&["spec", List::Main.field(), &at.to_string()]);
        }
    }

    /// The init containers' operations.
    pub fn write_init(
        &self,
        spec: &SpecView<'_>,
        wanted: &Wanted<'_, '_>,
        patch: &mut PatchBuilder,
    ) {
        let native = wanted.sidecar.filter(|_| self.native);
        match &self.init {
            InitPlan::Keep => {}
            InitPlan::Insert {
                at,
                installer,
                sidecar,
            } => {
                let new: SmallVec<[Item<'_, '_>; 2]> = installer
                    .then_some(Item::Installer(wanted.installer))
                    .into_iter()
                    .chain(native.filter(|_| *sidecar).map(Item::Sidecar))
                    .collect();
                if spec.init_containers.is_none() {
                    patch.append(&["spec", "initContainers"], false, &new);
                } else {
                    let mut index = itoa::Buffer::new();
                    for (at, c) in (*at..).zip(&new) {
                        patch.add(&["spec", "initContainers", index.format(at)], c);
                    }
                }
            }
            InitPlan::Rebuild { others, .. } => {
                let list: Vec<Item<'_, '_>> = std::iter::once(Item::Installer(wanted.installer))
                    .chain(native.map(Item::Sidecar))
                    .chain(others.iter().map(|raw| Item::Raw(raw)))
                    .collect();
                let field = ["spec", "initContainers"];
                if spec.init_containers.is_some() {
                    patch.replace(&field, &list);
                } else {
                    patch.add(&field, &list);
                }
            }
        }
    }

    /// The classic sidecar's operation; it comes after the main
    /// container's (an append does not move it).
    pub fn write_last(&self, wanted: &Wanted<'_, '_>, patch: &mut PatchBuilder) {
        let Some(sidecar) = wanted.sidecar.filter(|_| !self.native) else {
            return;
        };
        match self.main {
            MainPlan::Append => patch.append(&["spec", "containers"], true, &[sidecar]),
            MainPlan::Replace(at) => {
                patch.replace(&["spec", List::Main.field(), &at.to_string()], sidecar);
            }
            MainPlan::Keep | MainPlan::Remove(_) => {}
        }
    }
}

/// An item of a list the patch writes: one of the webhook's containers,
/// or one of the pod's own, as its text was.
#[derive(Serialize)]
#[serde(untagged)]
enum Item<'w, 'a> {
    Installer(&'w Installer<'a>),
    Sidecar(&'w Sidecar<'a>),
    Raw(&'w RawValue),
}
