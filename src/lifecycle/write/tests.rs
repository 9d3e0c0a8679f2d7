//! The writes as data: what is read again first, the Event each records
//! and when it records none, worded as the contract says.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::*;
use crate::lifecycle::Owner;

const EXPIRES_AT: &str = "2026-01-01T00:00:00Z";

fn time(s: &str) -> DateTime<Utc> {
    parse_expires_at(s).unwrap()
}

fn owner(kind: &str) -> Arc<Owner> {
    Arc::new(Owner {
        api_version: "agents.x-k8s.io/v1beta1".into(),
        kind: kind.into(),
        name: "o".into(),
        uid: "ou".into(),
    })
}

fn steps(write: &Write) -> &Steps {
    match write {
        Write::Expire { steps, .. } | Write::RemoveUnschedulable { steps, .. } => steps,
        other => panic!("not a removal: {other:?}"),
    }
}

/// The pod `p` of UID `u1`, expiring `expires_at`.
fn current(expires_at: &str) -> SandboxPod {
    serde_json::from_value(json!({"metadata": {"name": "p", "uid": "u1",
        "annotations": {"opensandbox.io/expires-at": expires_at}}}))
    .unwrap()
}

/// Acting on an owner reads the pod again first, and goes on only while
/// it is the same pod and still expired, or gone; deleting the pod itself
/// has its preconditions instead.
/// contract: controller.expiry-delete-owner, controller.expiry-renewal
#[test]
fn an_owner_is_acted_on_only_after_the_pod_read_again_is_still_expired() {
    let config = Config::default();
    let now = time("2026-01-01T00:00:10Z");
    let write = Write::expire(Removal::DeletePod, EXPIRES_AT.into(), &config, now);
    assert_eq!(steps(&write).recheck, None);
    let write = Write::expire(
        Removal::DeleteOwner(owner("Job")),
        EXPIRES_AT.into(),
        &config,
        now,
    );
    let recheck = steps(&write).recheck.clone().expect("read again");
    let uid = Uid::new("u1");
    assert!(recheck.holds(Some(&current(EXPIRES_AT)), &uid, now));
    assert!(recheck.holds(None, &uid, now), "gone: the owner is left");
    assert!(
        recheck.holds(Some(&current(EXPIRES_AT)), &Uid::new("u0"), now),
        "another pod of the name: the one decided for is gone"
    );
    assert!(
        !recheck.holds(Some(&current("2026-01-01T01:00:00Z")), &uid, now),
        "renewed"
    );
    assert!(!recheck.holds(Some(&current("tomorrow")), &uid, now));
}

/// Each removal's Event, and a shutdown's when the owner kept an earlier
/// time; a pod removed as unschedulable records `SandboxRemoved`, and one
/// its owner leaves records nothing.
/// contract: controller.expiry-events, controller.expiry-left-owned, controller.platform-delete
#[test]
fn each_removal_carries_its_event() {
    let config = Config::default();
    let now = time("2026-01-01T00:00:10Z");
    let note = |write: &Write, kept: Option<&str>| {
        let event = steps(write).event.clone().expect("an Event");
        let event = event.recorded(kept);
        (event.type_, event.reason, event.note)
    };
    let delete = Write::expire(Removal::DeletePod, EXPIRES_AT.into(), &config, now);
    assert_eq!(
        note(&delete, None),
        (
            EventType::Normal,
            "SandboxExpired",
            format!("Sandbox expired at {EXPIRES_AT}; deleted the pod.")
        )
    );
    let shutdown = Write::expire(
        Removal::ShutdownOwner(owner("Sandbox")),
        "2026-01-01T00:00:00.5Z".into(),
        &config,
        now,
    );
    assert_eq!(steps(&shutdown).shutdown_at, time("2026-01-01T00:00:00.5Z"));
    assert!(note(&shutdown, None).2.ends_with(
        "set spec.shutdownTime of its owner Sandbox o to 2026-01-01T00:00:01Z: agent-sandbox removes the pod and applies the Sandbox's shutdownPolicy."
    ));
    assert_eq!(
        note(&shutdown, Some("2025-12-31T00:00:00Z")).2,
        "Sandbox expired at 2026-01-01T00:00:00.5Z; its owner Sandbox o already shuts down at 2025-12-31T00:00:00Z (spec.shutdownTime), which agent-sandbox carries out."
    );
    let left = Write::expire(
        Removal::LeaveOwned(owner("Pool")),
        EXPIRES_AT.into(),
        &config,
        now,
    );
    let (type_, reason, text) = note(&left, None);
    assert_eq!((type_, reason), (EventType::Warning, "SandboxExpired"));
    assert!(
        text.contains("is not a kind the controller acts on"),
        "{text}"
    );

    let removed = Write::remove_unschedulable(Removal::DeletePod, now);
    assert_eq!(steps(&removed).shutdown_at, now);
    assert_eq!(steps(&removed).recheck, None);
    assert_eq!(
        note(&removed, None),
        (
            EventType::Normal,
            "SandboxRemoved",
            "Sandbox cannot be scheduled on its platform (controller.platform.deleteUnschedulable); deleted the pod.".to_owned()
        )
    );
    let left = Write::remove_unschedulable(Removal::LeaveOwned(owner("Pool")), now);
    assert_eq!(steps(&left).event, None);
}

/// The warnings' Events, worded as the contract has them.
/// contract: controller.expiry-invalid, controller.platform-event
#[test]
fn the_warnings_carry_their_events() {
    let config = Config::default();
    let Write::InvalidExpiry { event, .. } = Write::invalid_expiry("soon".into(), &config) else {
        panic!("an InvalidExpiry write");
    };
    assert_eq!(
        (event.type_, event.reason),
        (EventType::Warning, "InvalidExpiry")
    );
    assert_eq!(
        event.note,
        "annotation opensandbox.io/expires-at is 'soon', which is not an RFC 3339 time, so the sandbox never expires; set it to a time such as 2026-01-02T03:04:05Z"
    );
    let Write::Report { message, event } = Write::report("0/3 nodes".into()) else {
        panic!("a Report write");
    };
    assert_eq!(message, "0/3 nodes");
    assert_eq!(
        *event,
        Event {
            type_: EventType::Warning,
            reason: "PlatformUnschedulable",
            action: "Report",
            note: "0/3 nodes".into(),
        }
    );
}
