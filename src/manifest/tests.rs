//! The injector on workload kinds whose version matters: agent-sandbox's
//! Sandbox at `v1alpha1`, `v1beta1` and a version it does not know.

use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use super::{Entry, Injector, NoteKind, Outcome};
use crate::config::Config;
use crate::mutate::{Context, FixedToken};

fn sandbox(api_version: &str, timeout: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": "Sandbox",
        "metadata": {"name": "s", "namespace": "team"},
        "spec": {"shutdownPolicy": "Delete", "podTemplate": {
            "metadata": {"labels": {"opensandbox.io/id": "s"},
                "annotations": {"opensandbox.io/timeout": timeout}},
            "spec": {"containers": [{"name": "sandbox", "image": "busybox", "command": ["sleep", "1d"]}]},
        }},
    })
}

/// Injects `object` with a 1-hour maximum timeout; the object as injected
/// and what was recorded.
fn inject(object: &Value) -> (Value, bool, Vec<Entry>) {
    let mut config = Config::default();
    config.expiry.max_timeout_seconds = Some(3600);
    let tokens = FixedToken("t".into());
    let ctx = Context {
        config: &config,
        now: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
        own_namespace: Some("sandbox-webhook"),
        tokens: &tokens,
    };
    let mut injector = Injector::new(&ctx);
    let mut v = object.clone();
    let changed = injector.object(&mut v, None, "document 1");
    (v, changed, injector.entries)
}

/// The one entry of injecting `object`, which must leave it as it is.
fn the_entry_of_unchanged(object: &Value) -> Entry {
    let (v, changed, entries) = inject(object);
    assert!(!changed);
    assert_eq!(&v, object);
    let [entry] = <[Entry; 1]>::try_from(entries).unwrap_or_else(|e| panic!("{e:?}"));
    entry
}

#[test]
fn both_sandbox_versions_have_their_pod_template_injected() {
    for api_version in ["agents.x-k8s.io/v1alpha1", "agents.x-k8s.io/v1beta1"] {
        let object = sandbox(api_version, "30m");
        let (v, changed, entries) = inject(&object);
        assert!(changed, "{api_version}");
        let t = &v["spec"]["podTemplate"];
        assert_eq!(t["spec"]["initContainers"][0]["name"], "execd-installer");
        let annotations = t["metadata"]["annotations"].as_object().unwrap();
        let keys: Vec<&str> = annotations.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["opensandbox.io/timeout", "opensandbox.io/injected"],
            "{api_version}: timeout stays, no expires-at on a template, the record is written"
        );
        assert_eq!(annotations["opensandbox.io/timeout"], "30m");
        assert_eq!(v["apiVersion"], api_version);
        assert_eq!(v["spec"]["shutdownPolicy"], "Delete");
        let [Entry::Judged(judged)] = &entries[..] else {
            panic!("{api_version}: {entries:?}");
        };
        assert_eq!(judged.at, "document 1 (Sandbox/s) spec.podTemplate");
        assert!(matches!(judged.outcome, Outcome::Mutated));
    }
}

#[test]
fn a_denied_v1beta1_template_is_denied_at_its_path() {
    let object = sandbox("agents.x-k8s.io/v1beta1", "2h");
    let entry = the_entry_of_unchanged(&object);
    let Entry::Judged(judged) = &entry else {
        panic!("{entry:?}");
    };
    let Outcome::Denied(denial) = &judged.outcome else {
        panic!("{:?}", judged.outcome);
    };
    assert_eq!(judged.at, "document 1 (Sandbox/s) spec.podTemplate");
    assert_eq!(
        denial.to_string(),
        "Sandbox timeout 7200s exceeds configured maximum of 3600s."
    );
}

#[test]
fn a_version_inject_does_not_know_passes_through_with_a_note() {
    let object = sandbox("agents.x-k8s.io/v1", "2h");
    let entry = the_entry_of_unchanged(&object);
    let Entry::Note { kind, at, text } = &entry else {
        panic!("{entry:?}");
    };
    assert_eq!(*kind, NoteKind::UnknownVersion);
    assert_eq!(at, "document 1 (Sandbox/s)");
    assert_eq!(
        text,
        "Sandbox agents.x-k8s.io/v1 is not a version inject knows \
         (agents.x-k8s.io/v1alpha1, agents.x-k8s.io/v1beta1): passed through unchanged; \
         the webhook still injects its pods at admission"
    );
    // Another kind of that group is nobody's business.
    let mut claim = object.clone();
    claim["kind"] = "SandboxClaim".into();
    assert!(inject(&claim).2.is_empty());
}
