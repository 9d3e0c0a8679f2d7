//! The decisions the loop carries out: the platform report and the
//! removal it may lead to, and an owner that waits for its last due pod.

use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};

use super::*;
use crate::lifecycle::{PodFacts, SandboxPod};

const SCHEDULER_MESSAGE: &str =
    "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.";

fn now() -> DateTime<Utc> {
    expiry::parse_expires_at("2026-01-02T03:04:05Z").unwrap()
}

fn at(seconds: i64) -> String {
    (now() + TimeDelta::seconds(seconds)).to_rfc3339()
}

/// A sandbox pod expiring `expires_at`, owned by the Job `job` when given,
/// with `extra` merged in.
fn facts(expires_at: Option<&str>, job: Option<&str>, extra: &Value, config: &Config) -> PodFacts {
    let mut pod = json!({"metadata": {
        "name": "s", "namespace": "team", "uid": "u1",
        "labels": {"opensandbox.io/id": "s"},
        "annotations": expires_at.map(|at| json!({"opensandbox.io/expires-at": at})),
        "ownerReferences": job.map(|uid| json!([{"apiVersion": "batch/v1", "kind": "Job",
            "name": "j", "uid": uid, "controller": true}])),
    }, "status": {"phase": "Running"}});
    json_patch::merge(&mut pod, extra);
    let pod: SandboxPod = serde_json::from_value(pod).unwrap();
    PodFacts::of(&pod, config)
}

fn unschedulable() -> Value {
    json!({"spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"}},
           "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
               "status": "False", "reason": "Unschedulable", "message": SCHEDULER_MESSAGE}]}})
}

/// [`decide`] at [`now`], with `siblings` the other pods of its owner.
fn decide_among(
    pod: &PodFacts,
    config: &Config,
    history: &History,
    siblings: &[&PodFacts],
) -> Decision {
    decide(pod, config, None, history, siblings.iter().copied(), now())
}

fn decide_alone(pod: &PodFacts, config: &Config, history: &History) -> Decision {
    decide_among(pod, config, history, &[])
}

#[test]
fn an_unschedulable_pod_is_reported_once_then_left() {
    let config = Config::default();
    let pod = facts(None, None, &unschedulable(), &config);
    let d = decide_alone(&pod, &config, &History::default());
    assert_eq!(
        d.action,
        Action::Start(Write::report(SCHEDULER_MESSAGE.into()))
    );
    let mut history = History::default();
    history.record(Write::report(String::new()).mark());
    let d = decide_alone(&pod, &config, &history);
    assert_eq!((d.action, d.reported), (Action::Idle, true));
}

#[test]
fn a_condition_already_set_counts_as_reported() {
    let config = Config::default();
    let mut extra = unschedulable();
    extra["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": "opensandbox.io/PlatformUnschedulable", "status": "True"}));
    let pod = facts(None, None, &extra, &config);
    let d = decide_alone(&pod, &config, &History::default());
    assert_eq!((d.action, d.reported), (Action::Idle, true));
}

#[test]
fn delete_unschedulable_removes_once_after_the_report() {
    let mut config = Config::default();
    config.controller.platform.delete_unschedulable = true;
    let pod = facts(None, None, &unschedulable(), &config);
    let mut history = History::default();
    assert!(matches!(
        decide_alone(&pod, &config, &history).action,
        Action::Start(Write::Report { .. })
    ));
    history.record(Mark::Reported);
    assert_eq!(
        decide_alone(&pod, &config, &history).action,
        Action::Start(Write::remove_unschedulable(Removal::DeletePod, now()))
    );
    history.record(Mark::RemovedUnschedulable);
    assert_eq!(decide_alone(&pod, &config, &history).action, Action::Idle);
    // The plan says the same, for `diagnose`.
    let plan = plan(&pod, &config, None, now());
    assert_eq!(
        plan.on_unschedulable,
        PlatformAction::ReportAndRemove(Removal::DeletePod)
    );
}

#[test]
fn an_owner_waits_for_its_last_due_pod() {
    let config = Config::default();
    let due = facts(Some(&at(-10)), Some("j1"), &json!({}), &config);
    let later = facts(Some(&at(600)), Some("j1"), &json!({}), &config);
    let wait = decide_among(&due, &config, &History::default(), &[&later]);
    assert_eq!(
        wait.action,
        Action::WakeAt(later.expires_at.as_ref().unwrap().time().unwrap())
    );
    // A sibling being deleted, or one that never expires, holds nothing.
    let deleting = facts(
        Some(&at(600)),
        Some("j1"),
        &json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        &config,
    );
    let never = facts(None, Some("j1"), &json!({}), &config);
    let go = decide_among(&due, &config, &History::default(), &[&deleting, &never]);
    assert!(matches!(
        go.action,
        Action::Start(Write::Expire {
            removal: Removal::DeleteOwner(_),
            ..
        })
    ));
}

#[test]
fn a_pod_without_an_owner_does_not_wait() {
    let config = Config::default();
    let due = facts(Some(&at(-10)), None, &json!({}), &config);
    let other = facts(Some(&at(600)), None, &json!({}), &config);
    let d = decide_among(&due, &config, &History::default(), &[&other]);
    assert!(matches!(
        d.action,
        Action::Start(Write::Expire {
            removal: Removal::DeletePod,
            ..
        })
    ));
}

#[test]
fn done_and_deleting_pods_are_idle() {
    let config = Config::default();
    let value = at(-10);
    let due = facts(Some(&value), None, &json!({}), &config);
    let Action::Start(job) = decide_alone(&due, &config, &History::default()).action else {
        panic!("a due pod is removed");
    };
    let mut history = History::default();
    history.record(job.mark());
    assert_eq!(decide_alone(&due, &config, &history).action, Action::Idle);
    let deleting = facts(
        Some(&value),
        None,
        &json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        &config,
    );
    assert_eq!(
        decide_alone(&deleting, &config, &History::default()).action,
        Action::Idle
    );
    let future = facts(Some(&at(60)), None, &json!({}), &config);
    assert!(matches!(
        decide_alone(&future, &config, &History::default()).action,
        Action::WakeAt(_)
    ));
}

#[test]
fn an_invalid_expiry_is_warned_about_once() {
    let config = Config::default();
    let pod = facts(Some("tomorrow"), None, &json!({}), &config);
    let d = decide_alone(&pod, &config, &History::default());
    let Action::Start(job) = d.action else {
        panic!("a warning Event: {d:?}");
    };
    assert_eq!(job, Write::invalid_expiry("tomorrow".into(), &config));
    let mut history = History::default();
    history.record(job.mark());
    assert_eq!(decide_alone(&pod, &config, &history).action, Action::Idle);
}

/// contract: controller.watch
///
/// The watch keeps the excluded namespaces and the controller's own out;
/// a pod from them that reaches the decision anyway is never removed.
#[test]
fn an_expired_pod_outside_the_watched_namespaces_is_left() {
    let config = Config::default();
    let expired = Some(at(-60));
    let excluded = facts(
        expired.as_deref(),
        None,
        &json!({"metadata": {"namespace": "kube-system"}}),
        &config,
    );
    let d = decide_alone(&excluded, &config, &History::default());
    assert!(matches!(d.action, Action::Idle), "{:?}", d.action);
    let own = facts(
        expired.as_deref(),
        None,
        &json!({"metadata": {"namespace": "sandbox-webhook"}}),
        &config,
    );
    let d = decide(
        &own,
        &config,
        Some("sandbox-webhook"),
        &History::default(),
        std::iter::empty(),
        now(),
    );
    assert!(matches!(d.action, Action::Idle), "{:?}", d.action);
    // The same pod in a watched namespace is removed.
    let watched = facts(expired.as_deref(), None, &json!({}), &config);
    let d = decide_alone(&watched, &config, &History::default());
    assert!(matches!(d.action, Action::Start(_)), "{:?}", d.action);
}
