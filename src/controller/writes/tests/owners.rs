//! The writes that tell an agent-sandbox `Sandbox` owner about its expired
//! pod (contract: controller.expiry-owner-actions), against an apiserver
//! stand-in that records what it is sent: the read is a patch that changes
//! nothing but the UID check, the write carries the UID and the
//! `resourceVersion` it read, and an earlier shutdown time is kept.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::{Route, pod, shared_with};
use crate::admin::metrics::Exposition;
use crate::config::Config;
use crate::controller::writes::{Shared, execute};
use crate::lifecycle::{Owner, Removal, Write};

const EXPIRES_AT: &str = "2026-01-01T00:00:00Z";
const SANDBOXES: &str = "/apis/agents.x-k8s.io/v1beta1/namespaces/team/sandboxes/owner";

/// The requests the stand-in saw: request line and body.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// An apiserver with the expired pod `team/p`, agent-sandbox's `Sandbox`
/// resource, and the Sandbox `owner` as `sandbox` (its answer to every
/// patch); a write (a patch that sets a spec) is answered `write_status`.
async fn apiserver(sandbox: Value, write_status: u16) -> (Shared, Seen) {
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let route: Route = Arc::new(move |line: &str, body: &str| {
        log.lock().unwrap().push((line.to_owned(), body.to_owned()));
        if line.starts_with("GET /api/v1/namespaces/team/pods/p ") {
            let pod = json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p",
                "namespace": "team", "uid": "u1", "resourceVersion": "1",
                "labels": {"opensandbox.io/id": "p"},
                "annotations": {"opensandbox.io/expires-at": EXPIRES_AT}}});
            return (200, pod.to_string());
        }
        if line.starts_with("GET /apis/agents.x-k8s.io/v1beta1 ") {
            let list = json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": "agents.x-k8s.io/v1beta1",
                "resources": [{"name": "sandboxes", "singularName": "sandbox", "namespaced": true,
                    "kind": "Sandbox", "verbs": ["get", "list", "watch", "patch"]}]});
            return (200, list.to_string());
        }
        if line.starts_with(&format!("PATCH {SANDBOXES}")) {
            let writes = serde_json::from_str::<Value>(body).is_ok_and(|b| b.get("spec").is_some());
            let status = if writes { write_status } else { 200 };
            return (status, sandbox.to_string());
        }
        // Events.
        (201, "{}".to_owned())
    });
    (shared_with(route).await, seen)
}

fn sandbox(spec: &Value) -> Value {
    json!({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
        "metadata": {"name": "owner", "namespace": "team", "uid": "ou1", "resourceVersion": "7"},
        "spec": spec})
}

fn owner() -> Arc<Owner> {
    Arc::new(Owner {
        api_version: "agents.x-k8s.io/v1beta1".into(),
        kind: "Sandbox".into(),
        name: "owner".into(),
        uid: "ou1".into(),
    })
}

fn expire(removal: Removal) -> Write {
    Write::expire(
        removal,
        EXPIRES_AT.into(),
        &Config::default(),
        chrono::Utc::now(),
    )
}

/// The bodies of the patches sent to the Sandbox, parsed.
fn patches(seen: &Seen) -> Vec<Value> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(line, _)| line.starts_with(&format!("PATCH {SANDBOXES}")))
        .map(|(_, body)| serde_json::from_str(body).unwrap())
        .collect()
}

/// The note of the Event recorded.
fn note(seen: &Seen) -> String {
    let seen = seen.lock().unwrap();
    let (_, body) = seen
        .iter()
        .find(|(line, _)| line.starts_with("POST ") && line.contains("/events"))
        .expect("an Event");
    let event: Value = serde_json::from_str(body).unwrap();
    event["note"].as_str().unwrap().to_owned()
}

fn counted(shared: &Shared, action: &str) -> bool {
    let text = shared.metrics.encode().unwrap();
    text.contains(&format!(
        "sandbox_webhook_expired_total{{action=\"{action}\"}} 1"
    ))
}

#[tokio::test]
async fn shutdown_sets_the_time_on_the_sandbox_read_by_a_patch() {
    let (shared, seen) = apiserver(sandbox(&json!({"shutdownPolicy": "Retain"})), 200).await;
    let (_, done) = execute(&shared, &pod(), expire(Removal::ShutdownOwner(owner()))).await;
    assert!(done);
    let sent = patches(&seen);
    assert_eq!(
        sent,
        [
            json!({"metadata": {"uid": "ou1"}}),
            json!({"metadata": {"uid": "ou1", "resourceVersion": "7"},
                   "spec": {"shutdownTime": EXPIRES_AT}}),
        ]
    );
    assert!(counted(&shared, "shutdown-owner"));
    let note = note(&seen);
    assert!(
        note.contains("set spec.shutdownTime of its owner Sandbox owner to 2026-01-01T00:00:00Z"),
        "{note}"
    );
}

#[tokio::test]
async fn an_earlier_shutdown_time_is_kept() {
    let earlier = "2025-12-31T23:00:00Z";
    let (shared, seen) = apiserver(sandbox(&json!({"shutdownTime": earlier})), 200).await;
    let (_, done) = execute(&shared, &pod(), expire(Removal::ShutdownOwner(owner()))).await;
    assert!(done);
    assert_eq!(patches(&seen), [json!({"metadata": {"uid": "ou1"}})]);
    assert!(counted(&shared, "shutdown-owner"));
    assert!(
        note(&seen).contains(&format!("already shuts down at {earlier}")),
        "{}",
        note(&seen)
    );
    // A later one is brought forward.
    let (shared, seen) = apiserver(
        sandbox(&json!({"shutdownTime": "2026-06-01T00:00:00Z"})),
        200,
    )
    .await;
    let (_, done) = execute(&shared, &pod(), expire(Removal::ShutdownOwner(owner()))).await;
    assert!(done);
    assert_eq!(patches(&seen).len(), 2);
}

/// A Sandbox changed between the read and the write (409) is told again.
#[tokio::test]
async fn a_conflicting_write_is_retried() {
    let (shared, _) = apiserver(sandbox(&json!({})), 409).await;
    let (_, done) = execute(&shared, &pod(), expire(Removal::ShutdownOwner(owner()))).await;
    assert!(!done, "retried");
    assert!(!counted(&shared, "shutdown-owner"));
}

#[tokio::test]
async fn suspend_sets_the_operating_mode() {
    let (shared, seen) = apiserver(sandbox(&json!({"operatingMode": "Running"})), 200).await;
    let (_, done) = execute(&shared, &pod(), expire(Removal::SuspendOwner(owner()))).await;
    assert!(done);
    assert_eq!(
        patches(&seen),
        [json!({"metadata": {"uid": "ou1"}, "spec": {"operatingMode": "Suspended"}})]
    );
    assert!(counted(&shared, "suspended-owner"));
    let note = note(&seen);
    assert!(
        note.contains("set spec.operatingMode of its owner Sandbox owner to Suspended"),
        "{note}"
    );
}
