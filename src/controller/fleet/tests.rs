//! The leader's decisions over time, without an apiserver: events in,
//! timers and writes out.

use chrono::{SecondsFormat, TimeDelta};
use serde_json::{Value, json};

use super::*;
use crate::lifecycle::Removal;

fn fleet() -> Fleet {
    Fleet::new(Arc::new(Rules::new(Config::default(), None)))
}

fn key(name: &str) -> PodKey {
    PodKey {
        namespace: Arc::from("team"),
        name: Arc::from(name),
    }
}

fn in_seconds(s: i64) -> String {
    (Utc::now() + TimeDelta::seconds(s)).to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A sandbox pod that expires `s` seconds from now.
fn expiring_in(s: i64, name: &str, uid: &str, owner: Option<&str>) -> SandboxPod {
    pod(name, uid, Some(&in_seconds(s)), owner)
}

/// A sandbox pod the webhook injected with the default configuration;
/// `owner` is the UID of its controller `Job`.
fn pod(name: &str, uid: &str, expires_at: Option<&str>, owner: Option<&str>) -> SandboxPod {
    let record = crate::mutate::inject::record::make(&Config::default(), true, None).value;
    let mut annotations = json!({"opensandbox.io/injected": record});
    if let Some(at) = expires_at {
        annotations["opensandbox.io/expires-at"] = json!(at);
    }
    let owners = owner.map(|uid| {
        json!([{"apiVersion": "batch/v1", "kind": "Job", "name": format!("job-{uid}"), "uid": uid, "controller": true}])
    });
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "team", "uid": uid, "resourceVersion": "1",
                     "labels": {"opensandbox.io/id": name}, "annotations": annotations,
                     "ownerReferences": owners},
        "spec": {"initContainers": [{"name": "execd-installer", "image": "opensandbox/execd:v1.0.22"}],
                 "containers": [{"name": "sandbox", "image": "python"}]},
        "status": {"phase": "Running"},
    }))
    .unwrap()
}

fn with(mut pod: SandboxPod, patch: &Value) -> SandboxPod {
    let mut value = json!({
        "metadata": serde_json::to_value(&pod.metadata).unwrap(),
    });
    json_patch::merge(&mut value, patch);
    pod.metadata = serde_json::from_value(value["metadata"].take()).unwrap();
    pod
}

fn started(fleet: &mut Fleet) -> Vec<(String, String)> {
    fleet
        .take_started()
        .into_iter()
        .map(|s| (s.key.name.to_string(), format!("{:?}", s.write)))
        .collect()
}

fn done(start: &Start, ok: bool) -> Done {
    Done {
        key: start.key.clone(),
        uid: start.pod.uid.clone(),
        mark: start.write.mark(),
        ok,
        version: start.pod.resource_version.clone(),
    }
}

#[tokio::test]
async fn a_due_pod_is_removed_once_and_a_future_one_waits() {
    let mut f = fleet();
    let past = in_seconds(-1);
    f.on_event(Event::Apply(pod("due", "u1", Some(&past), None)));
    f.on_event(Event::Apply(expiring_in(3600, "later", "u2", None)));
    f.on_event(Event::Apply(pod("never", "u3", None, None)));
    let mut starts = f.take_started();
    assert_eq!(starts.len(), 1, "only the due pod");
    let start = starts.remove(0);
    assert_eq!(&*start.key.name, "due");
    assert!(
        matches!(&start.write, Write::Expire { removal: Removal::DeletePod, at, .. } if *at == past)
    );
    assert_eq!(start.pod.uid.to_string(), "u1");
    assert_eq!(
        (f.cached(), f.timers()),
        (3, 1),
        "a timer for the later one"
    );
    // An update while the delete is in flight starts nothing more.
    f.on_event(Event::Apply(pod("due", "u1", Some(&past), None)));
    assert!(started(&mut f).is_empty());
    // Done: not again for the same value, even when the pod is seen again.
    f.finished(done(&start, true));
    f.on_event(Event::Apply(pod("due", "u1", Some(&past), None)));
    assert!(started(&mut f).is_empty());
    // Being deleted: nothing, and a deleted pod leaves the cache.
    let deleting = with(
        expiring_in(3600, "later", "u2", None),
        &json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
    );
    f.on_event(Event::Apply(deleting));
    assert_eq!(f.timers(), 0, "its timer is cancelled");
    f.on_event(Event::Delete(pod("later", "u2", None, None)));
    assert_eq!(f.cached(), 2);
}

#[tokio::test]
async fn a_failed_write_is_retried_later_unless_the_pod_changed() {
    let mut f = fleet();
    f.on_event(Event::Apply(expiring_in(-1, "p", "u1", None)));
    let start = f.take_started().remove(0);
    f.finished(done(&start, false));
    assert!(started(&mut f).is_empty(), "not at once");
    assert_eq!(f.timers(), 1, "a retry is armed");
    let key = tokio::time::timeout(Duration::from_secs(5), f.next_due())
        .await
        .expect("the retry fires within its backoff");
    assert_eq!(key, self::key("p"));
    f.on_timer(&key);
    let again = f.take_started();
    assert_eq!(again.len(), 1, "retried");
    // The cache saw a newer version in the meantime: decided on it at once.
    f.on_event(Event::Apply(with(
        expiring_in(3600, "p", "u1", None),
        &json!({"metadata": {"resourceVersion": "2"}}),
    )));
    f.finished(done(&again[0], false));
    assert!(started(&mut f).is_empty(), "renewed: nothing to do now");
    assert_eq!(f.timers(), 1, "the new expiry is armed");
}

#[tokio::test]
async fn a_recreated_pod_is_its_own() {
    let mut f = fleet();
    f.on_event(Event::Apply(expiring_in(60, "same", "old", None)));
    assert_eq!(f.timers(), 1);
    // Deleted and created again between two events: the old timer goes
    // with the old pod; the new one has no expiry.
    f.on_event(Event::Apply(pod("same", "new", None, None)));
    assert_eq!((f.cached(), f.timers()), (1, 0));
    // A write decided for the old UID ending does not mark the new pod,
    // which is decided on its own account.
    f.on_event(Event::Apply(expiring_in(-1, "x", "x1", None)));
    let old = f.take_started().remove(0);
    f.on_event(Event::Apply(expiring_in(-1, "x", "x2", None)));
    let new = f.take_started();
    assert_eq!(new.len(), 1);
    assert_eq!(new[0].pod.uid.to_string(), "x2");
    f.finished(done(&old, true));
    assert!(started(&mut f).is_empty(), "x2's own write is in flight");
    f.finished(done(&new[0], false));
    assert_eq!(f.timers(), 1, "x2's retry is its own");
}

#[tokio::test]
async fn an_owner_goes_with_its_last_pod() {
    let mut f = fleet();
    let config = Config::default();
    assert_eq!(
        config.controller.owner_action("Job.batch"),
        Some(crate::config::controller::OwnerAction::Delete)
    );
    f.on_event(Event::Apply(expiring_in(3600, "b", "ub", Some("j1"))));
    f.on_event(Event::Apply(expiring_in(-1, "a", "ua", Some("j1"))));
    assert!(
        started(&mut f).is_empty(),
        "a waits for b: deleting the Job deletes both"
    );
    assert_eq!(f.timers(), 2);
    // b goes (deleted by someone else): a's owner may go now.
    f.on_event(Event::Delete(pod("b", "ub", None, Some("j1"))));
    let starts = f.take_started();
    assert_eq!(starts.len(), 1);
    assert!(
        matches!(&starts[0].write, Write::Expire { removal: Removal::DeleteOwner(o), .. } if o.uid == *"j1")
    );
}

#[tokio::test]
async fn a_relist_forgets_the_pods_it_did_not_bring() {
    let mut f = fleet();
    f.on_event(Event::Apply(expiring_in(60, "kept", "u1", Some("j1"))));
    f.on_event(Event::Apply(expiring_in(60, "gone", "u2", Some("j1"))));
    f.on_event(Event::Init);
    f.on_event(Event::InitApply(expiring_in(60, "kept", "u1", Some("j1"))));
    f.on_event(Event::InitApply(pod("new", "u3", None, None)));
    assert_eq!(f.cached(), 3, "the cache keeps serving during the relist");
    f.on_event(Event::InitDone);
    assert_eq!((f.cached(), f.timers()), (2, 1));
    let mut names: Vec<String> = f.cache.iter().map(|(k, _)| k.name.to_string()).collect();
    names.sort();
    assert_eq!(names, ["kept", "new"]);
}

#[tokio::test]
async fn any_expiry_time_is_a_timer() {
    let mut f = fleet();
    // tokio-util's DelayQueue panicked beyond about two years.
    f.on_event(Event::Apply(pod(
        "far",
        "u1",
        Some("2100-01-01T00:00:00Z"),
        None,
    )));
    f.on_event(Event::Apply(pod("bad", "u2", Some("someday"), None)));
    assert_eq!(f.timers(), 1);
    let starts = started(&mut f);
    assert_eq!(starts.len(), 1);
    assert!(starts[0].1.contains("InvalidExpiry"), "{starts:?}");
}

#[tokio::test]
async fn an_unschedulable_pod_is_reported_once() {
    let mut f = fleet();
    let mut p = pod("p", "u1", None, None);
    p.spec =
        serde_json::from_value(json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}})).unwrap();
    p.status = serde_json::from_value(json!({"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
    }]}))
    .unwrap();
    f.on_event(Event::Apply(p.clone()));
    let start = f.take_started().remove(0);
    assert!(
        matches!(&start.write, Write::Report { message, .. } if message.starts_with("0/3 nodes"))
    );
    f.finished(done(&start, true));
    f.on_event(Event::Apply(p));
    assert!(started(&mut f).is_empty());
}

/// A failed write is retried after a delay that doubles each time, up to
/// its cap.
/// contract: controller.api-errors
#[tokio::test]
async fn each_retry_waits_twice_as_long_up_to_the_cap() {
    let mut f = fleet();
    f.on_event(Event::Apply(pod("p", "u1", Some(&in_seconds(-1)), None)));
    let mut start = f.take_started().remove(0);
    let mut delays = Vec::new();
    for _ in 0..8 {
        f.finished(done(&start, false));
        let at = f.timers.next_at().expect("a retry is armed");
        delays.push(at - Utc::now().timestamp_millis());
        let key = f.timers.pop_due(i64::MAX).expect("armed");
        f.on_timer(&key);
        start = f.take_started().remove(0);
    }
    // Give or take the milliseconds the loop itself takes.
    let want = [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000];
    for (got, want) in delays.iter().zip(want) {
        assert!((want - 200..=want).contains(got), "{delays:?}");
    }
}

/// A sandbox that escaped injection: no record, no webhook container.
fn escaped(name: &str, uid: &str) -> SandboxPod {
    let mut p = pod(name, uid, None, None);
    p.metadata.annotations = None;
    p.spec = None;
    p
}

fn drift_events(starts: &[Start]) -> usize {
    starts
        .iter()
        .filter(|s| matches!(s.write, Write::DriftEvent { .. }))
        .count()
}

/// contract: drift.metrics, drift.events
///
/// The watched sandboxes are counted by state through updates, deletions
/// and relists; each one not injected gets one warning Event, a few at a
/// time, and one whose Event failed gets another at its next change.
#[tokio::test]
async fn drift_is_counted_and_warned_of_once() {
    let mut f = fleet();
    f.on_event(Event::Init);
    f.on_event(Event::InitApply(pod("current", "u", None, None)));
    for i in 0..5 {
        f.on_event(Event::InitApply(escaped(
            &format!("e{i}"),
            &format!("ue{i}"),
        )));
    }
    let opted = with(
        escaped("o", "uo"),
        &json!({"metadata": {"annotations": {"opensandbox.io/inject": "false"}}}),
    );
    f.on_event(Event::InitApply(opted));
    // Another release's sandbox is not this release's to count; but one
    // that escaped injection is reported by the default release, whatever
    // revision its label names (contract: revision.controller).
    let revision = |p, rev| {
        with(
            p,
            &json!({"metadata": {"labels": {"opensandbox.io/rev": rev}}}),
        )
    };
    f.on_event(Event::InitApply(revision(
        pod("x", "ux", None, None),
        "canary",
    )));
    f.on_event(Event::InitApply(revision(escaped("u", "uu"), "nobody")));
    f.on_event(Event::InitDone);
    assert_eq!(f.drift_counts(), [1, 0, 6, 0, 1]);

    let first = f.take_started();
    assert_eq!(
        (first.len(), drift_events(&first)),
        (4, 4),
        "four at a time"
    );
    f.finished(done(&first[0], true));
    let second = f.take_started();
    assert_eq!(drift_events(&second), 1);
    f.finished(done(&first[1], false));
    let third = f.take_started();
    assert_eq!(drift_events(&third), 1, "the sixth");
    assert!(f.take_started().is_empty(), "each pod once");
    for s in first[2..].iter().chain(&second).chain(&third) {
        f.finished(done(s, true));
    }
    // A reported pod's next change records nothing; the failed one's does.
    let reported = first[0].key.name.to_string();
    let failed = first[1].key.name.to_string();
    for (name, events) in [(reported, 0), (failed, 1)] {
        let mut p = escaped(&name, &format!("u{name}"));
        p.metadata.resource_version = Some("2".into());
        f.on_event(Event::Apply(p));
        assert_eq!(drift_events(&f.take_started()), events, "{name}");
    }
    // The counts follow deletions and relists.
    f.on_event(Event::Delete(escaped("e4", "ue4")));
    assert_eq!(f.drift_counts(), [1, 0, 5, 0, 1]);
    f.on_event(Event::Init);
    f.on_event(Event::InitApply(pod("current", "u", None, None)));
    f.on_event(Event::InitDone);
    assert_eq!(f.drift_counts(), [1, 0, 0, 0, 0]);
}

/// A release with a revision counts its own sandboxes and leaves escapes,
/// its own included, to the default release's controller, so each is
/// reported once (contract: revision.controller).
#[tokio::test]
async fn a_revision_leaves_escapes_to_the_default_release() {
    let canary = Config::from_yaml("revision: canary").unwrap();
    let mut f = Fleet::new(Arc::new(Rules::new(canary.clone(), None)));
    let label = |p| {
        with(
            p,
            &json!({"metadata": {"labels": {"opensandbox.io/rev": "canary"}}}),
        )
    };
    let mut injected = label(pod("mine", "u1", None, None));
    let record = crate::mutate::injection_record(&canary, true, None).value;
    injected
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("opensandbox.io/injected".into(), record);
    f.on_event(Event::Apply(injected));
    f.on_event(Event::Apply(label(escaped("escaped", "u2"))));
    f.on_event(Event::Apply(pod("default", "u3", None, None)));
    assert_eq!(f.drift_counts(), [1, 0, 0, 0, 0]);
    assert_eq!(drift_events(&f.take_started()), 0);
}
