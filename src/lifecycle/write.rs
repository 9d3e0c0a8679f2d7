//! The writes [`super::decide()`] starts, as data: what to write, what to
//! read again first, and the Event to record once it is done, every word of
//! it chosen here (contract: controller.expiry-events,
//! controller.expiry-left-owned, controller.expiry-invalid,
//! controller.platform-event, controller.platform-delete, drift.events).
//! The controller's runtime carries a write out and decides nothing: it
//! records the Event when the write happened, and picks between the two
//! notes a shutdown has by what the owner already held.

use chrono::{DateTime, SecondsFormat, Utc};

use super::drift::{self, Drift};
use super::expiry::{Removal, parse_expires_at};
use super::ids::Uid;
use super::pod::SandboxPod;
use crate::config::Config;

/// One write (or series of writes) for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// Remove the expired pod; `at` is the `expires-at` value carried out.
    Expire {
        removal: Removal,
        at: String,
        steps: Box<Steps>,
    },
    /// Set the platform condition (its message) and, when it was set now,
    /// record the warning Event.
    Report { message: String, event: Box<Event> },
    /// Remove a reported platform-unschedulable pod
    /// (`controller.platform.deleteUnschedulable`).
    RemoveUnschedulable { removal: Removal, steps: Box<Steps> },
    /// Record the warning Event for an `expires-at` that is no time.
    InvalidExpiry { value: String, event: Box<Event> },
    /// Record the warning Event for a sandbox that was not injected or is
    /// stale (contract: drift.events); the loop starts these apart from
    /// the others, a few at a time.
    DriftEvent { drift: Drift, event: Box<Event> },
}

/// What a write, once done, must not do again for the same pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    Expired(String),
    Reported,
    RemovedUnschedulable,
    Invalid(String),
    /// The drift Event is recorded; the loop keeps this mark itself.
    DriftReported,
}

/// How a removal is carried out beyond its [`Removal`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steps {
    /// Read the pod again first, and go on only if this holds.
    pub recheck: Option<Recheck>,
    /// The `spec.shutdownTime` a shutdown asks for.
    pub shutdown_at: DateTime<Utc>,
    /// The Event once the removal is done; `None`: the removal records
    /// none (contract: controller.platform-delete).
    pub event: Option<RemovalEvent>,
}

/// Acting on an owner has no precondition on the pod, so the pod is read
/// again just before: the write goes on only while it is the same pod (or
/// gone, when acting on its owner is what is left to do) and still
/// expired by the controller's clock (contract: controller.expiry-delete-owner).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recheck {
    /// The `expires-at` annotation's name.
    annotation: Box<str>,
}

impl Recheck {
    /// Whether the write goes on, given the pod `current` as the apiserver
    /// has it now (`None`: gone), the UID the write was decided for, and
    /// the time now.
    #[must_use]
    pub fn holds(&self, current: Option<&SandboxPod>, uid: &Uid, now: DateTime<Utc>) -> bool {
        let Some(current) = current else {
            return true;
        };
        if current
            .metadata
            .uid
            .as_deref()
            .is_none_or(|other| *uid != *other)
        {
            return true;
        }
        current
            .annotation(&self.annotation)
            .and_then(parse_expires_at)
            .is_some_and(|at| at <= now)
    }
}

/// Whether a pod's Event is a warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

/// An `events.k8s.io/v1` Event about the pod, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: &'static str,
    pub action: &'static str,
    pub note: String,
}

/// A removal's Event. A shutdown whose owner already shuts down at or
/// before the time asked keeps that time, and its note says so instead:
/// `kept` is that note, around the time kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovalEvent {
    pub event: Event,
    pub kept: Option<(String, String)>,
}

impl RemovalEvent {
    /// The Event to record, given the shutdown time the owner kept, if it
    /// kept one.
    #[must_use]
    pub fn recorded(self, kept: Option<&str>) -> Event {
        match (kept, self.kept) {
            (Some(time), Some((before, after))) => Event {
                note: format!("{before}{time}{after}"),
                ..self.event
            },
            _ => self.event,
        }
    }
}

impl Write {
    /// What this write, once done, must not do again for the same pod.
    #[must_use]
    pub fn mark(&self) -> Mark {
        match self {
            Write::Expire { at, .. } => Mark::Expired(at.clone()),
            Write::Report { .. } => Mark::Reported,
            Write::RemoveUnschedulable { .. } => Mark::RemovedUnschedulable,
            Write::InvalidExpiry { value, .. } => Mark::Invalid(value.clone()),
            Write::DriftEvent { .. } => Mark::DriftReported,
        }
    }

    /// Removes the expired pod, whose `expires-at` is `value`, by
    /// `removal`; an owner is told to shut down at that time.
    #[must_use]
    pub fn expire(removal: Removal, value: String, config: &Config, now: DateTime<Utc>) -> Self {
        let shutdown_at = parse_expires_at(&value).unwrap_or(now);
        let recheck = removal.acted_on_owner().map(|_| Recheck {
            annotation: config.keys().expires_at.as_str().into(),
        });
        let cause = format!("Sandbox expired at {value}");
        let event = removal_event(&removal, "SandboxExpired", &cause, shutdown_at);
        Write::Expire {
            removal,
            at: value,
            steps: Box::new(Steps {
                recheck,
                shutdown_at,
                event: Some(event),
            }),
        }
    }

    /// Removes a reported platform-unschedulable pod by `removal`, now; a
    /// pod its owner leaves is not removed, and records nothing.
    #[must_use]
    pub fn remove_unschedulable(removal: Removal, now: DateTime<Utc>) -> Self {
        let cause =
            "Sandbox cannot be scheduled on its platform (controller.platform.deleteUnschedulable)";
        let event = match removal {
            Removal::LeaveOwned(_) => None,
            _ => Some(removal_event(&removal, "SandboxRemoved", cause, now)),
        };
        Write::RemoveUnschedulable {
            removal,
            steps: Box::new(Steps {
                recheck: None,
                shutdown_at: now,
                event,
            }),
        }
    }

    /// Sets the platform condition, with the scheduler's `message`.
    #[must_use]
    pub fn report(message: String) -> Self {
        let event = Box::new(Event {
            type_: EventType::Warning,
            reason: "PlatformUnschedulable",
            action: "Report",
            note: message.clone(),
        });
        Write::Report { message, event }
    }

    /// Warns of the `expires-at` `value` that is no time.
    #[must_use]
    pub fn invalid_expiry(value: String, config: &Config) -> Self {
        let key = &config.keys().expires_at;
        let event = Box::new(Event {
            type_: EventType::Warning,
            reason: "InvalidExpiry",
            action: "Expire",
            note: format!(
                "annotation {key} is '{value}', which is not an RFC 3339 time, so the sandbox never expires; set it to a time such as 2026-01-02T03:04:05Z"
            ),
        });
        Write::InvalidExpiry { value, event }
    }

    /// Warns of a sandbox that was not injected or is stale.
    #[must_use]
    pub fn drift(drift: Drift, config: &Config) -> Self {
        let (reason, note) = drift::event(drift, config);
        let event = Box::new(Event {
            type_: EventType::Warning,
            reason,
            action: "Audit",
            note,
        });
        Write::DriftEvent { drift, event }
    }
}

/// The Event `reason` once `removal` is done for `cause`; a shutdown asks
/// for `shutdown_at`.
fn removal_event(
    removal: &Removal,
    reason: &'static str,
    cause: &str,
    shutdown_at: DateTime<Utc>,
) -> RemovalEvent {
    let event = |type_, note| Event {
        type_,
        reason,
        action: "Delete",
        note,
    };
    let mut kept = None;
    let (type_, note) = match removal {
        Removal::DeletePod => (EventType::Normal, format!("{cause}; deleted the pod.")),
        Removal::DeleteOwner(o) => (
            EventType::Normal,
            format!(
                "{cause}; deleted its owner {} {} (propagation Background).",
                o.kind, o.name
            ),
        ),
        Removal::ShutdownOwner(o) => {
            kept = Some((
                format!(
                    "{cause}; its owner {} {} already shuts down at ",
                    o.kind, o.name
                ),
                " (spec.shutdownTime), which agent-sandbox carries out.".to_owned(),
            ));
            (
                EventType::Normal,
                format!(
                    "{cause}; set spec.shutdownTime of its owner {} {} to {}: agent-sandbox removes the pod and applies the Sandbox's shutdownPolicy.",
                    o.kind,
                    o.name,
                    whole_seconds_up(shutdown_at)
                ),
            )
        }
        Removal::SuspendOwner(o) => (
            EventType::Normal,
            format!(
                "{cause}; set spec.operatingMode of its owner {} {} to Suspended: agent-sandbox removes the pod and keeps the Sandbox and its volumes (set it to Running to resume).",
                o.kind, o.name
            ),
        ),
        Removal::LeaveOwned(o) => (
            EventType::Warning,
            format!(
                "{cause}, but its owner {} {} is not a kind the controller acts on, so the pod is left running: delete the {} yourself, or give {} an action in controller.expiry.ownerActions.",
                o.kind,
                o.name,
                o.kind,
                o.kind_group()
            ),
        ),
    };
    RemovalEvent {
        event: event(type_, note),
        kept,
    }
}

/// `at` as a `metav1.Time` (whole seconds), rounded up: a shutdown is
/// never asked for before the expiry.
#[must_use]
pub fn whole_seconds_up(at: DateTime<Utc>) -> String {
    let up = if at.timestamp_subsec_nanos() > 0 {
        at + chrono::TimeDelta::seconds(1)
    } else {
        at
    };
    DateTime::from_timestamp(up.timestamp(), 0)
        .unwrap_or(up)
        .to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests;
