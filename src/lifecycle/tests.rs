//! Expiry plans, the per-pod platform reading and `diagnose`'s JSON.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::*;
use crate::config::Config;

const P: &str = "opensandbox.io";
const SCHEDULER_MESSAGE: &str = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";

fn now() -> DateTime<Utc> {
    expiry::parse_expires_at("2026-01-02T03:04:05Z").unwrap()
}

fn pod(v: Value) -> SandboxPod {
    serde_json::from_value(v).unwrap()
}

fn sandbox(annotations: &Value, labels: &Value) -> SandboxPod {
    let mut l = json!({format!("{P}/id"): "s1"});
    if let Some(extra) = labels.as_object() {
        for (k, v) in extra {
            l[k] = v.clone();
        }
    }
    pod(
        json!({"metadata": {"name": "s1", "namespace": "team", "uid": "u1", "labels": l, "annotations": annotations}}),
    )
}

fn expiring(at: &str) -> SandboxPod {
    sandbox(&json!({format!("{P}/expires-at"): at}), &json!({}))
}

fn with_owner(
    mut p: SandboxPod,
    api_version: &str,
    kind: &str,
    controller: Option<bool>,
) -> SandboxPod {
    p.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": api_version, "kind": kind, "name": "owner", "uid": "ou1", "controller": controller,
    }))
    .unwrap()]);
    p
}

/// What `plan` decides for `p` under `cfg`, now.
fn plan_with(p: &SandboxPod, cfg: &Config) -> Plan {
    plan(&PodFacts::of(p, cfg), cfg, None, now())
}

/// [`plan_with`] the default configuration.
fn planned(p: &SandboxPod) -> Plan {
    plan_with(p, &Config::default())
}

fn action(p: &SandboxPod) -> ExpiryAction {
    planned(p).expiry.action
}

fn action_with(p: &SandboxPod, cfg: &Config) -> ExpiryAction {
    plan_with(p, cfg).expiry.action
}

#[test]
fn expiry_time_and_due() {
    let cfg = Config::default();
    let past = expiry::plan(
        &PodFacts::of(&expiring("2026-01-02T03:04:05Z"), &cfg),
        &cfg,
        now(),
    );
    assert!(past.expired, "at or before now is expired");
    assert_eq!(past.action, ExpiryAction::DeletePod);
    assert_eq!(past.removal, Some(Removal::DeletePod));
    let future = expiry::plan(
        &PodFacts::of(&expiring("2026-01-02T05:04:06+02:00"), &cfg),
        &cfg,
        now(),
    );
    assert!(!future.expired);
    assert_eq!(future.at, expiry::parse_expires_at("2026-01-02T03:04:06Z"));
    assert_eq!(
        future.action,
        ExpiryAction::DeletePod,
        "the action at expiry"
    );
    assert_eq!(
        future.expires_at.as_deref(),
        Some("2026-01-02T05:04:06+02:00")
    );
}

#[test]
fn never_touched() {
    assert_eq!(action(&sandbox(&json!({}), &json!({}))), ExpiryAction::None);
    let manual = sandbox(
        &json!({format!("{P}/expires-at"): "2020-01-01T00:00:00Z"}),
        &json!({format!("{P}/manual-cleanup"): "true"}),
    );
    let p = planned(&manual);
    assert_eq!(p.expiry.action, ExpiryAction::None);
    assert!(
        p.expiry.expired,
        "expired says what the time is, not what is done"
    );
    // manual-cleanup also wins over an invalid value: no Event either.
    let manual_invalid = sandbox(
        &json!({format!("{P}/expires-at"): "soon"}),
        &json!({format!("{P}/manual-cleanup"): "True"}),
    );
    assert_eq!(action(&manual_invalid), ExpiryAction::None);
    // Another value of the label is not manual cleanup.
    let not_manual = sandbox(
        &json!({format!("{P}/expires-at"): "2020-01-01T00:00:00Z"}),
        &json!({format!("{P}/manual-cleanup"): "false"}),
    );
    assert_eq!(action(&not_manual), ExpiryAction::DeletePod);
}

#[test]
fn invalid_values() {
    for bad in [
        "",
        "soon",
        "2026-01-02",
        "2026-13-02T00:00:00Z",
        "1767322000",
    ] {
        let p = planned(&expiring(bad));
        assert_eq!(p.expiry.action, ExpiryAction::Invalid, "{bad:?}");
        assert!(!p.expiry.expired);
        assert_eq!(p.expiry.removal, None);
    }
}

/// contract: controller.expiry-owner-actions
#[test]
fn owner_rules() {
    let e = || expiring("2020-01-01T00:00:00Z");
    for (api, kind, expected) in [
        ("batch/v1", "Job", ExpiryAction::DeleteOwner),
        (
            "sandbox.opensandbox.io/v1alpha1",
            "BatchSandbox",
            ExpiryAction::DeleteOwner,
        ),
        // agent-sandbox's Sandbox has a lifecycle of its own: told, not deleted.
        (
            "agents.x-k8s.io/v1alpha1",
            "Sandbox",
            ExpiryAction::ShutdownOwner,
        ),
        (
            "agents.x-k8s.io/v1beta1",
            "Sandbox",
            ExpiryAction::ShutdownOwner,
        ),
    ] {
        let p = planned(&with_owner(e(), api, kind, Some(true)));
        assert_eq!(p.expiry.action, expected, "{kind}");
        let owner = match p.expiry.removal {
            Some(Removal::DeleteOwner(owner) | Removal::ShutdownOwner(owner)) => owner,
            other => panic!("{kind}: {other:?}"),
        };
        assert_eq!(
            (&*owner.kind, owner.uid.to_string().as_str()),
            (kind, "ou1")
        );
        // Deleted through the version the reference names.
        assert_eq!(&*owner.api_version, api);
    }
    assert_eq!(
        action(&with_owner(e(), "apps/v1", "ReplicaSet", Some(true))),
        ExpiryAction::LeaveOwned
    );
    // Same kind, other group: not the configured owner.
    assert_eq!(
        action(&with_owner(e(), "example.com/v1", "Job", Some(true))),
        ExpiryAction::LeaveOwned
    );
    // Only a controller owner counts.
    assert_eq!(
        action(&with_owner(e(), "batch/v1", "Job", None)),
        ExpiryAction::DeletePod
    );
    assert_eq!(
        action(&with_owner(e(), "apps/v1", "ReplicaSet", Some(false))),
        ExpiryAction::DeletePod
    );
    // The list is configuration.
    let cfg =
        Config::from_yaml("controller: {expiry: {deleteOwnerKinds: [ReplicaSet.apps]}}").unwrap();
    let rs = with_owner(e(), "apps/v1", "ReplicaSet", Some(true));
    assert_eq!(action_with(&rs, &cfg), ExpiryAction::DeleteOwner);
    let job = with_owner(e(), "batch/v1", "Job", Some(true));
    assert_eq!(action_with(&job, &cfg), ExpiryAction::LeaveOwned);
    let core = with_owner(e(), "v1", "ReplicationController", Some(true));
    let cfg =
        Config::from_yaml("controller: {expiry: {deleteOwnerKinds: [ReplicationController]}}")
            .unwrap();
    assert_eq!(action_with(&core, &cfg), ExpiryAction::DeleteOwner);
    // Each kind its own action.
    let sandbox = with_owner(e(), "agents.x-k8s.io/v1beta1", "Sandbox", Some(true));
    for (action, expected) in [
        ("suspend", ExpiryAction::SuspendOwner),
        ("shutdown", ExpiryAction::ShutdownOwner),
        ("delete", ExpiryAction::DeleteOwner),
    ] {
        let cfg = Config::from_yaml(&format!(
            "controller: {{expiry: {{ownerActions: {{Sandbox.agents.x-k8s.io: {action}}}}}}}"
        ))
        .unwrap();
        assert_eq!(action_with(&sandbox, &cfg), expected, "{action}");
        assert_eq!(
            action_with(&job, &cfg),
            ExpiryAction::LeaveOwned,
            "{action}"
        );
    }
}

#[test]
fn metric_labels() {
    let o = std::sync::Arc::new(Owner {
        api_version: "v1".into(),
        kind: "K".into(),
        name: "n".into(),
        uid: "u".into(),
    });
    assert_eq!(Removal::DeletePod.metric_label(), "deleted-pod");
    assert_eq!(
        Removal::DeleteOwner(o.clone()).metric_label(),
        "deleted-owner"
    );
    assert_eq!(
        Removal::ShutdownOwner(o.clone()).metric_label(),
        "shutdown-owner"
    );
    assert_eq!(
        Removal::SuspendOwner(o.clone()).metric_label(),
        "suspended-owner"
    );
    assert_eq!(Removal::LeaveOwned(o).metric_label(), "left-owned");
}

#[test]
fn unwatched_pods_get_no_action() {
    let cfg = Config::default();
    let mut p = expiring("2020-01-01T00:00:00Z");
    assert!(is_watched(&PodFacts::of(&p, &cfg), &cfg, None));
    assert!(
        !is_watched(&PodFacts::of(&p, &cfg), &cfg, Some("team")),
        "the controller's own namespace"
    );
    p.metadata.namespace = Some("kube-system".into());
    assert_eq!(action_with(&p, &cfg), ExpiryAction::None);
    let mut plain = expiring("2020-01-01T00:00:00Z");
    plain.metadata.labels = None;
    assert_eq!(action_with(&plain, &cfg), ExpiryAction::None);
    // A manifest without a namespace is in `default`.
    let mut bare = expiring("2020-01-01T00:00:00Z");
    bare.metadata.namespace = None;
    assert_eq!(bare.namespace(), "default");
}

fn pending(spec: Value, status: Value) -> SandboxPod {
    let mut p = sandbox(&json!({}), &json!({}));
    p.spec = serde_json::from_value(spec).unwrap();
    p.status = serde_json::from_value(status).unwrap();
    p
}

fn scheduled_false(reason: &str, message: &str) -> Value {
    json!({"phase": "Pending", "conditions": [
        {"type": "Initialized", "status": "True"},
        {"type": "PodScheduled", "status": "False", "reason": reason, "message": message},
    ]})
}

fn arm() -> Value {
    json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}})
}

#[test]
fn real_scheduler_message_is_a_hit_and_reported_whole() {
    let r = platform::read(&pending(
        arm(),
        scheduled_false("Unschedulable", SCHEDULER_MESSAGE),
    ));
    assert_eq!(
        r,
        PlatformReading {
            has_platform: true,
            has_non_platform: false,
            unschedulable: true,
            message: Some(SCHEDULER_MESSAGE.into()),
        }
    );
}

#[test]
fn capacity_is_not_a_hit() {
    let msg = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";
    let r = platform::read(&pending(arm(), scheduled_false("Unschedulable", msg)));
    assert!(!r.unschedulable);
    assert_eq!(r.message, None);
}

#[test]
fn reading_order() {
    // The condition is read first; status.reason/message only after.
    let both = json!({"phase": "Pending", "reason": "Unschedulable", "message": "from status kubernetes.io/os",
        "conditions": [{"type": "PodScheduled", "status": "false", "reason": "Unschedulable", "message": "from condition kubernetes.io/os"}]});
    let r = platform::read(&pending(arm(), both));
    assert_eq!(
        r.message.as_deref(),
        Some("from condition kubernetes.io/os")
    );
    // A condition the checker rejects falls through to the pod's status.
    let fallback = json!({"phase": "Pending", "reason": "Unschedulable", "message": "from status kubernetes.io/os",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "Insufficient memory"}]});
    assert_eq!(
        platform::read(&pending(arm(), fallback)).message.as_deref(),
        Some("from status kubernetes.io/os")
    );
    // A True or non-PodScheduled condition is not read.
    for cond in [
        json!({"type": "PodScheduled", "status": "True", "reason": "Unschedulable", "message": "kubernetes.io/os"}),
        json!({"type": "Ready", "status": "False", "reason": "Unschedulable", "message": "kubernetes.io/os"}),
        json!({"type": "PodScheduled", "reason": "Unschedulable", "message": "kubernetes.io/os"}),
        json!("PodScheduled"),
    ] {
        let st = json!({"phase": "Pending", "conditions": [cond]});
        assert!(!platform::read(&pending(arm(), st)).unschedulable, "{cond}");
    }
    // `str(status).lower()`: FALSE and the boolean false both read as false.
    for status in [json!("FALSE"), json!(false)] {
        let st = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": status, "reason": "Unschedulable", "message": "kubernetes.io/os"}]});
        assert!(platform::read(&pending(arm(), st)).unschedulable);
    }
    // conditions of other shapes match nothing.
    for conds in [json!(null), json!("x"), json!({"type": "PodScheduled"})] {
        let st = json!({"phase": "Pending", "conditions": conds});
        assert!(!platform::read(&pending(arm(), st)).unschedulable);
    }
}

#[test]
fn default_message() {
    let yes = |_: Option<&Value>, _: Option<&Value>, _: bool, _: bool| true;
    let st: StatusFields = serde_json::from_value(
        json!({"conditions": [{"type": "PodScheduled", "status": "False", "message": ""}]}),
    )
    .unwrap();
    assert_eq!(
        platform::extract_message(Some(&st), true, false, yes).as_deref(),
        Some(platform::DEFAULT_MESSAGE)
    );
    let st: StatusFields = serde_json::from_value(json!({"message": 3})).unwrap();
    assert_eq!(
        platform::extract_message(Some(&st), true, false, yes).as_deref(),
        Some(platform::DEFAULT_MESSAGE)
    );
    // No platform constraint or no status: nothing, whatever the checker says.
    assert_eq!(
        platform::extract_message(Some(&st), false, false, yes),
        None
    );
    assert_eq!(platform::extract_message(None, true, false, yes), None);
}

#[test]
fn only_pending_pods() {
    let mut st = scheduled_false("Unschedulable", SCHEDULER_MESSAGE);
    st["phase"] = json!("Running");
    assert!(!platform::read(&pending(arm(), st)).unschedulable);
    let mut st = scheduled_false("Unschedulable", SCHEDULER_MESSAGE);
    st.as_object_mut().unwrap().remove("phase");
    assert!(platform::read(&pending(arm(), st)).unschedulable);
}

#[test]
fn non_platform_constraints_need_a_key_in_the_text() {
    let spec = json!({"nodeSelector": {"kubernetes.io/arch": "arm64", "disk": "ssd"}});
    let r = platform::read(&pending(
        spec.clone(),
        scheduled_false("Unschedulable", SCHEDULER_MESSAGE),
    ));
    assert_eq!(
        (r.has_platform, r.has_non_platform, r.unschedulable),
        (true, true, false)
    );
    let keyed =
        "0/3 nodes are available: 3 node(s) didn't match kubernetes.io/arch. preemption: 0/3";
    assert!(platform::read(&pending(spec, scheduled_false("Unschedulable", keyed))).unschedulable);
}

#[test]
fn condition_already_set() {
    let ct = condition_type(&Config::default());
    assert_eq!(ct, "opensandbox.io/PlatformUnschedulable");
    let mut st = scheduled_false("Unschedulable", SCHEDULER_MESSAGE);
    let p = pending(arm(), st.clone());
    assert!(!platform::already_reported(&p, &ct));
    st["conditions"]
        .as_array_mut()
        .unwrap()
        .push(json!({"type": ct, "status": "True"}));
    assert!(platform::already_reported(&pending(arm(), st), &ct));
}

#[test]
fn diagnosis_json() {
    let mut p = pending(arm(), scheduled_false("Unschedulable", SCHEDULER_MESSAGE));
    p.metadata.annotations =
        Some([(format!("{P}/expires-at"), "2026-01-02T03:00:00Z".to_owned())].into());
    let d = serde_json::to_value(diagnose(&p, &Config::default(), None, now())).unwrap();
    assert_eq!(d["pod"], json!("team/s1"));
    assert_eq!(d["expiry"]["at"], json!("2026-01-02T03:00:00Z"));
    assert_eq!(
        d["expiry"]["reason"],
        json!("expires-at passed; the pod has no controller owner, so it is deleted")
    );
    for (spec, ours) in [
        ("hasPlatform", "hasPlatformConstraints"),
        ("hasNonPlatform", "hasNonPlatformConstraints"),
    ] {
        assert_eq!(d["platform"][spec], d["platform"][ours], "{d}");
    }
    assert_eq!(d["platform"]["message"], json!(SCHEDULER_MESSAGE));
    let empty = sandbox(&json!({}), &json!({}));
    let d = serde_json::to_value(diagnose(&empty, &Config::default(), None, now())).unwrap();
    assert_eq!(
        d["expiry"],
        json!({"expiresAt": null, "expired": false, "action": "none", "at": null,
               "reason": "no opensandbox.io/expires-at annotation, so the pod is never removed"})
    );
    assert_eq!(d["platform"]["hasPlatform"], json!(false));
    // The owner rules and a time in another offset, given in UTC.
    let job = with_owner(
        expiring("2026-01-02T06:00:00+02:00"),
        "batch/v1",
        "Job",
        Some(true),
    );
    let d = serde_json::to_value(diagnose(&job, &Config::default(), None, now())).unwrap();
    assert_eq!(d["expiry"]["at"], json!("2026-01-02T04:00:00Z"));
    assert_eq!(
        d["expiry"]["reason"],
        json!(
            "at expires-at; its controller owner Job/owner is of a kind whose controller.expiry.ownerActions is delete, so the owner is deleted (propagation Background), once no other pod of it is due later"
        )
    );
    for a in [
        ExpiryAction::None,
        ExpiryAction::DeletePod,
        ExpiryAction::DeleteOwner,
        ExpiryAction::ShutdownOwner,
        ExpiryAction::SuspendOwner,
        ExpiryAction::LeaveOwned,
        ExpiryAction::Invalid,
    ] {
        assert_eq!(serde_json::to_value(a).unwrap(), json!(a.as_str()));
    }
}
