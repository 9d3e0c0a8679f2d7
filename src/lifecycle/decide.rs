//! The controller's whole decision for one pod at one moment, as a value
//! the loop carries out (as kube-rs's `reconcile` returns an `Action`):
//! start one write, wake at a time, or nothing until the pod changes. The
//! loop (`crate::controller`) keeps what was done ([`History`]) and which
//! pods share an owner; every rule is here.

use chrono::{DateTime, Utc};

use super::expiry::{self, ExpiryAction, ExpiryPlan, Removal};
use super::facts::PodFacts;
use super::plan::{PlatformAction, plan};
use super::write::{Mark, Write};
use crate::config::Config;

/// What the controller has done for one pod already.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct History {
    /// The `expires-at` value the expiry was carried out for.
    pub expired: Option<String>,
    /// The invalid `expires-at` value the warning was recorded for.
    pub invalid: Option<String>,
    pub reported: bool,
    pub removed_unschedulable: bool,
}

impl History {
    /// Remembers a write done.
    pub fn record(&mut self, mark: Mark) {
        match mark {
            Mark::Expired(v) => self.expired = Some(v),
            Mark::Invalid(v) => self.invalid = Some(v),
            Mark::Reported => self.reported = true,
            Mark::RemovedUnschedulable => self.removed_unschedulable = true,
            Mark::DriftReported => {}
        }
    }
}

/// What the loop does now for the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Start this write; the pod is decided again when it ends.
    Start(Write),
    /// Decide again at this time (wall clock).
    WakeAt(DateTime<Utc>),
    /// Nothing until the pod, or one of its owner's pods, changes.
    Idle,
}

/// [`Action`], and whether the pod's own condition showed it reported
/// already (the loop remembers it, as if it had reported it itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub reported: bool,
}

impl Decision {
    fn now(action: Action) -> Self {
        Decision {
            action,
            reported: false,
        }
    }
}

/// Decides for `pod` at `now`, given what was done for it (`history`)
/// and the other cached pods of its controller owner (`siblings`, read
/// only when the owner is to be deleted).
///
/// A pod being deleted is left alone. A platform-unschedulable pod is
/// reported once, then removed once when the configuration says so; its
/// expiry is decided besides. Deleting an owner deletes all its pods, so
/// it waits for the last of them that will expire (never early; contract:
/// controller.expiry-delete-owner); pods being deleted and pods that never
/// expire do not hold it.
#[must_use]
pub fn decide<'a>(
    pod: &PodFacts,
    config: &Config,
    own_namespace: Option<&str>,
    history: &History,
    siblings: impl Iterator<Item = &'a PodFacts>,
    now: DateTime<Utc>,
) -> Decision {
    if pod.deleting {
        return Decision::now(Action::Idle);
    }
    let plan = plan(pod, config, own_namespace, now);
    let mut reported = false;
    if let PlatformAction::Report | PlatformAction::ReportAndRemove(_) = &plan.on_unschedulable {
        if !(history.reported || pod.reported) {
            let message = plan.platform.message.unwrap_or_default();
            return Decision::now(Action::Start(Write::report(message)));
        }
        reported = true;
        if let PlatformAction::ReportAndRemove(removal) = plan.on_unschedulable
            && !history.removed_unschedulable
        {
            return Decision {
                action: Action::Start(Write::remove_unschedulable(removal, now)),
                reported,
            };
        }
    }
    let action = match due_of(plan.expiry, config, siblings) {
        Due::Never => Action::Idle,
        Due::Invalid { value } => {
            if history.invalid.as_ref() == Some(&value) {
                Action::Idle
            } else {
                Action::Start(Write::invalid_expiry(value, config))
            }
        }
        Due::At {
            removal, value, at, ..
        } => {
            if at > now {
                Action::WakeAt(at)
            } else if history.expired.as_ref() == Some(&value) {
                Action::Idle
            } else {
                Action::Start(Write::expire(removal, value, config, now))
            }
        }
    };
    Decision { action, reported }
}

/// When and how the controller carries out a pod's expiry, the other pods
/// of its owner considered: what [`decide`] acts on once the platform is
/// seen to, and what `diagnose` prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Due {
    /// Never removed: no `expires-at`, manual cleanup, not a watched pod,
    /// or being deleted already.
    Never,
    /// `expires-at` is no time: a warning Event, nothing removed.
    Invalid { value: String },
    /// Removed by `removal` at `at`: its own `expires-at` (`value`), or,
    /// when the removal acts on the owner (which reaches all its pods), the
    /// later expiry of another pod of it, the `held_by`-th of the
    /// siblings given.
    At {
        removal: Removal,
        value: String,
        at: DateTime<Utc>,
        held_by: Option<usize>,
    },
}

/// [`Due`] for `pod` at `now`, given the other cached pods of its
/// controller owner (`siblings`).
#[must_use]
pub fn due<'a>(
    pod: &PodFacts,
    config: &Config,
    own_namespace: Option<&str>,
    siblings: impl Iterator<Item = &'a PodFacts>,
    now: DateTime<Utc>,
) -> Due {
    if pod.deleting {
        return Due::Never;
    }
    due_of(
        plan(pod, config, own_namespace, now).expiry,
        config,
        siblings,
    )
}

fn due_of<'a>(
    expiry: ExpiryPlan,
    config: &Config,
    siblings: impl Iterator<Item = &'a PodFacts>,
) -> Due {
    match (expiry.action, expiry.removal, expiry.at) {
        (ExpiryAction::Invalid, _, _) => Due::Invalid {
            value: expiry.expires_at.unwrap_or_default(),
        },
        (_, Some(removal), Some(at)) => {
            let (at, held_by) = if removal.acted_on_owner().is_some() {
                last_expiry(siblings, config, at)
            } else {
                (at, None)
            };
            Due::At {
                removal,
                value: expiry.expires_at.unwrap_or_default(),
                at,
                held_by,
            }
        }
        _ => Due::Never,
    }
}

/// The latest of `at` and the expiries of `siblings` that will be removed
/// at an expiry of their own, and which sibling's it is when not `at`.
fn last_expiry<'a>(
    siblings: impl Iterator<Item = &'a PodFacts>,
    config: &Config,
    at: DateTime<Utc>,
) -> (DateTime<Utc>, Option<usize>) {
    siblings
        .enumerate()
        .filter(|(_, s)| !s.deleting)
        .filter_map(|(i, s)| {
            // `now` plays no part in when a pod is due.
            let plan = expiry::plan(s, config, at);
            Some((plan.removal.and(plan.at)?, i))
        })
        .fold((at, None), |(latest, held_by), (t, i)| {
            if t > latest {
                (t, Some(i))
            } else {
                (latest, held_by)
            }
        })
}

#[cfg(test)]
mod tests;
