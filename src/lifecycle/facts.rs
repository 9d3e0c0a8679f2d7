//! What the decisions read of a pod, digested once from the decoded object.
//!
//! The controller keeps a [`PodFacts`] per sandbox (100,000 of them in a
//! large fleet) instead of the object, so it holds only values a decision
//! reads, in their smallest form: flags instead of labels, the platform
//! reading instead of the spec and status it is made from, shared strings
//! for namespaces and owner kinds (the caller interns them). `diagnose`
//! digests the pods it reads the same way, so both decide on the same
//! facts.

use std::sync::Arc;

use super::drift::{self, Drift};
use super::ids::{ExpiresAt, Uid};
use super::platform::{self, PlatformReading};
use super::pod::SandboxPod;
use crate::config::Config;

/// Gives the shared copy of a string that many pods repeat (namespace,
/// owner apiVersion and kind); `Arc::from` when nothing is shared.
pub type Intern<'a> = &'a mut dyn FnMut(&str) -> Arc<str>;

/// A pod's controller owner, as its owner reference names it. Every pod
/// of one owner shares one (the controller's cache interns it), and the
/// apiVersion and kind are shared by every owner of that kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub api_version: Arc<str>,
    pub kind: Arc<str>,
    pub name: Box<str>,
    pub uid: Uid,
}

impl Owner {
    /// The API group: `batch` for `batch/v1`, empty for the core `v1`.
    #[must_use]
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// `Kind.group` as `controller.expiry.deleteOwnerKinds` spells it
    /// (`Kind` alone for the core group).
    #[must_use]
    pub fn kind_group(&self) -> String {
        match self.group() {
            "" => self.kind.to_string(),
            group => format!("{}.{group}", self.kind),
        }
    }
}

/// What the decisions read of one pod.
#[derive(Debug, Clone, PartialEq)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "each flag is one label or field the decisions read"
)]
pub struct PodFacts {
    /// The pod's namespace; `default` for a manifest that names none.
    pub namespace: Arc<str>,
    /// It carries `<prefix>/id`.
    pub sandbox: bool,
    /// `<prefix>/manual-cleanup` is `true` (any case, blanks around).
    pub manual_cleanup: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Phase `Pending`, or no phase (a manifest not yet applied).
    pub pending: bool,
    /// It carries the controller's own condition with status `True`.
    pub reported: bool,
    /// `kubernetes.io/os` or `kubernetes.io/arch` in its nodeSelector or
    /// required node affinity ([`PlatformReading::has_platform`]).
    pub has_platform: bool,
    /// Any other key there.
    pub has_non_platform: bool,
    /// `<prefix>/expires-at` as written.
    pub expires_at: Option<ExpiresAt>,
    /// Its controller owner (the owner reference with `controller: true`).
    pub owner: Option<Arc<Owner>>,
    /// The scheduler's message when the pod is Pending and no node takes
    /// its platform ([`platform::read`]).
    pub unschedulable: Option<Box<str>>,
    /// Its `<prefix>/rev` label is not this release's revision (none for
    /// the default release): another release's controller looks after it.
    pub other_revision: bool,
    /// Where it stands against what this release injects ([`drift`]).
    pub drift: Drift,
}

impl PodFacts {
    /// `condition_type` is the controller's own condition
    /// (`super::condition_type`).
    #[must_use]
    pub fn read(
        pod: &SandboxPod,
        config: &Config,
        condition_type: &str,
        intern: Intern<'_>,
    ) -> Self {
        let keys = config.keys();
        let owner = pod.controller_reference().map(|r| {
            Arc::new(Owner {
                api_version: intern(&r.api_version),
                kind: intern(&r.kind),
                name: r.name.as_str().into(),
                uid: Uid::new(&r.uid),
            })
        });
        let reading = platform::read(pod);
        PodFacts {
            namespace: intern(pod.namespace()),
            sandbox: pod.label(&keys.id).is_some(),
            manual_cleanup: pod
                .label(&keys.manual_cleanup)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            deleting: pod.metadata.deletion_timestamp.is_some(),
            pending: platform::pending(pod),
            reported: platform::already_reported(pod, condition_type),
            has_platform: reading.has_platform,
            has_non_platform: reading.has_non_platform,
            expires_at: pod.annotation(&keys.expires_at).map(ExpiresAt::new),
            owner,
            unschedulable: reading.message.map(Into::into),
            other_revision: pod.label(&keys.rev) != config.revision.as_deref(),
            drift: drift::classify(pod, config),
        }
    }

    /// The platform reading the facts were made from.
    #[must_use]
    pub fn platform(&self) -> PlatformReading {
        PlatformReading {
            has_platform: self.has_platform,
            has_non_platform: self.has_non_platform,
            unschedulable: self.unschedulable.is_some(),
            message: self.unschedulable.as_deref().map(str::to_owned),
        }
    }

    /// [`PodFacts::read`] with nothing shared: one pod on its own
    /// (`diagnose`, a test).
    #[must_use]
    pub fn of(pod: &SandboxPod, config: &Config) -> Self {
        let condition_type = platform::condition_type(config);
        Self::read(pod, config, &condition_type, &mut |s| Arc::from(s))
    }
}
