//! The drift audit (contract: drift.states): how each sandbox stands
//! against what this release's webhook injects now, read from the pod as
//! it is. A sandbox is one of:
//!
//! - `current`: it carries the webhook's record (`<prefix>/injected`), with
//!   the containers that record names, and the record is what the webhook
//!   would write for it now;
//! - `stale`: likewise, but the record differs in the configuration, the
//!   images, the policy or the revision (the release alone does not count:
//!   a new build that injects the same is not drift);
//! - `opted-out`: no record, and `<prefix>/inject: "false"`;
//! - `server-completed`: no record, and OpenSandbox's own server built it
//!   (SPEC 12), which the webhook leaves as built;
//! - `not-injected`: none of these: created while the webhook was down
//!   under `failurePolicy: Ignore`, before it was installed, or in a
//!   namespace labelled with a revision no release serves.
//!
//! A record is not trusted alone: one whose containers are missing (written
//! by hand, or kept by a pod that escaped) is no injection.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::pod::SandboxPod;
use crate::config::Config;
use crate::mutate::Injected;
use crate::mutate::inject::owned::{EGRESS, INSTALLER};
use crate::mutate::inject::record;
use crate::mutate::intent::platform::{Os, Platform};
use crate::mutate::intent::{parse_bool, policy};
use crate::mutate::read::pod::PodView;

/// Where a sandbox stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum DriftState {
    #[default]
    Current,
    Stale,
    NotInjected,
    ServerCompleted,
    OptedOut,
}

impl DriftState {
    pub const ALL: [DriftState; 5] = [
        DriftState::Current,
        DriftState::Stale,
        DriftState::NotInjected,
        DriftState::ServerCompleted,
        DriftState::OptedOut,
    ];

    /// The metric label and `diagnose`'s word.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            DriftState::Current => "current",
            DriftState::Stale => "stale",
            DriftState::NotInjected => "not-injected",
            DriftState::ServerCompleted => "server-completed",
            DriftState::OptedOut => "opted-out",
        }
    }

    /// Its place in [`DriftState::ALL`].
    #[must_use]
    pub fn index(self) -> usize {
        self as usize
    }

    /// A pod in this state gets one warning Event (contract: drift.events).
    #[must_use]
    pub fn warns(self) -> bool {
        matches!(self, DriftState::Stale | DriftState::NotInjected)
    }
}

/// What differs between a stale pod's record and the one the webhook
/// would write now, one bit each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Differs(u8);

impl Differs {
    const NAMES: [&'static str; 5] = ["config", "images", "policy", "revision", "record"];
    const CONFIG: u8 = 1;
    const IMAGES: u8 = 2;
    const POLICY: u8 = 4;
    const REVISION: u8 = 8;
    /// The record is no JSON object of the webhook's fields.
    const UNREADABLE: u8 = 16;

    /// The parts that differ, by their record field (`record` for a record
    /// that cannot be read).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Self::NAMES
            .into_iter()
            .enumerate()
            .filter(move |(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| n)
    }

    #[must_use]
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// A sandbox's state, and for a stale one what differs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drift {
    pub state: DriftState,
    pub differs: Differs,
}

impl Drift {
    fn state(state: DriftState) -> Self {
        Drift {
            state,
            differs: Differs::default(),
        }
    }
}

/// The fields of a record, as both the pod's and the expected one are
/// read to compare them.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct RecordFields {
    pub release: Option<String>,
    pub revision: Option<String>,
    pub config: Option<String>,
    #[serde(default)]
    pub images: BTreeMap<String, String>,
    pub policy: Option<String>,
}

/// Where `pod` stands against what `config` injects.
#[must_use]
pub fn classify(pod: &SandboxPod, config: &Config) -> Drift {
    let keys = config.keys();
    let containers = containers_json(pod);
    let view = PodView::parse(&containers).ok();
    if let Some(recorded) = pod.annotation(&keys.injected) {
        let fields = serde_json::from_str::<RecordFields>(recorded).ok();
        if carries(view.as_ref(), fields.as_ref()) {
            let differs = fields.map_or(Differs(Differs::UNREADABLE), |fields| {
                compare(&fields, &expected_fields(pod, config))
            });
            let state = if differs.is_empty() {
                DriftState::Current
            } else {
                DriftState::Stale
            };
            return Drift { state, differs };
        }
    }
    if pod
        .annotation(&keys.inject)
        .and_then(parse_bool)
        .is_some_and(|inject| !inject)
    {
        return Drift::state(DriftState::OptedOut);
    }
    // The webhook's own test (contract: coexist.recognised), on the pod's
    // annotations and containers: what it admits as built is no escape.
    if crate::mutate::server_completed(&containers, config).is_some() {
        return Drift::state(DriftState::ServerCompleted);
    }
    Drift::state(DriftState::NotInjected)
}

/// Whether a sandbox gets its one drift Event: it is audited
/// (`super::is_audited`), not being deleted, and not injected or stale.
#[must_use]
pub fn warns(drift: Drift, deleting: bool, audited: bool) -> bool {
    audited && !deleting && drift.state.warns()
}

/// The warning Event of a pod in `drift` (contract: drift.events): its
/// reason and note.
#[must_use]
pub fn event(drift: Drift, config: &Config) -> (&'static str, String) {
    let keys = config.keys();
    if drift.state == DriftState::Stale {
        let differs: Vec<&str> = drift.differs.names().collect();
        let note = format!(
            "Sandbox was injected with something other than what this release injects now: its {} record differs in {}. Recreate it to inject it with the current configuration (sandbox-webhook diagnose shows both records).",
            keys.injected,
            differs.join(", ")
        );
        return ("SandboxInjectionStale", note);
    }
    let note = format!(
        "Sandbox was not injected: it carries no {} record with the webhook's containers, did not opt out and was not built by OpenSandbox's server. It was created while the webhook was unreachable under failurePolicy Ignore, before the webhook was installed, or in a namespace labelled {} with a revision no release serves. Recreate it to inject it.",
        keys.injected, keys.rev
    );
    ("SandboxNotInjected", note)
}

/// The record the webhook would write for `pod` now (its images, policy
/// and configuration), as the webhook builds it.
#[must_use]
pub fn expected(pod: &SandboxPod, config: &Config) -> Injected {
    let keys = config.keys();
    let linux = pod
        .annotation(&keys.platform)
        .and_then(|p| Platform::parse(p).ok())
        .is_none_or(|p| p.os == Os::Linux);
    // A policy the webhook would refuse has no sidecar to record.
    let rules = pod
        .annotation(&keys.network_policy)
        .and_then(|raw| policy::parse(raw, config.egress.max_rules).ok())
        .map(|p| p.json);
    record::make(config, linux, rules.as_deref())
}

fn expected_fields(pod: &SandboxPod, config: &Config) -> RecordFields {
    serde_json::from_str(&expected(pod, config).value).unwrap_or_default()
}

/// What differs, the release aside.
fn compare(recorded: &RecordFields, expected: &RecordFields) -> Differs {
    let mut bits = 0;
    for (differs, bit) in [
        (recorded.config != expected.config, Differs::CONFIG),
        (recorded.images != expected.images, Differs::IMAGES),
        (recorded.policy != expected.policy, Differs::POLICY),
        (recorded.revision != expected.revision, Differs::REVISION),
    ] {
        if differs {
            bits |= bit;
        }
    }
    Differs(bits)
}

/// Whether the pod holds what its record says was injected: the installer
/// when it names execd, the sidecar when it names egress. An unreadable
/// record is trusted as far as the installer goes.
fn carries(view: Option<&PodView<'_>>, fields: Option<&RecordFields>) -> bool {
    let Some(view) = view else {
        return false;
    };
    let spec = view.spec();
    let has = |name: &str| spec.all_containers().any(|c| c.name == name);
    let images = fields.map(|f| &f.images);
    let wants = |key: &str| images.is_none_or(|i| i.contains_key(key));
    (!wants("execd") || spec.init_containers().iter().any(|c| c.name == INSTALLER))
        && (images.is_none() || !wants("egress") || has(EGRESS))
}

/// The pod's containers (and annotations, which the webhook's readers
/// consult) as a pod document the webhook's reader takes.
fn containers_json(pod: &SandboxPod) -> String {
    let spec = pod.spec.as_ref();
    let list = |raw: Option<&super::pod::RawJson>| raw.map_or("[]", |r| r.0.get()).to_owned();
    let annotations = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| serde_json::to_string(a).ok())
        .unwrap_or_else(|| "{}".to_owned());
    format!(
        r#"{{"metadata":{{"annotations":{annotations}}},"spec":{{"initContainers":{},"containers":{}}}}}"#,
        list(spec.and_then(|s| s.init_containers.as_ref())),
        list(spec.and_then(|s| s.containers.as_ref())),
    )
}

#[cfg(test)]
mod tests;
