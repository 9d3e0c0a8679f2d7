//! The audit annotations every answer carries (contract: audit.annotations).

use serde_json::{Value, json};

use crate::config::{Config, short_sha256};
use crate::mutate::{Context, FixedToken};
use crate::review::{review, validate};

fn answer(body: &Value, validating: bool) -> Value {
    let config = Config::default();
    let tokens = FixedToken("t".repeat(32));
    let ctx = Context {
        config: &config,
        now: chrono::Utc::now(),
        own_namespace: None,
        tokens: &tokens,
    };
    let body = body.to_string();
    let out = if validating {
        validate(body.as_bytes(), &ctx)
    } else {
        review(body.as_bytes(), &ctx)
    };
    serde_json::from_slice(&out.unwrap().body).unwrap()
}

/// The audit annotations of the answer to a review of `pod` (`operation`).
fn audit(operation: &str, pod: &Value) -> Value {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "team", "operation": operation, "object": pod}});
    answer(&body, false)["response"]["auditAnnotations"].clone()
}

fn pod(id: Option<&str>, annotations: &Value) -> Value {
    let labels = id.map_or(json!({}), |id| json!({"opensandbox.io/id": id}));
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": labels, "annotations": annotations},
        "spec": {"containers": [{"name": "sandbox", "image": "python", "command": ["python"]}]}})
}

/// A key the apiserver accepts after `<webhook name>/`: a qualified
/// name's last part.
fn valid_key(key: &str) -> bool {
    let b = key.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// contract: audit.annotations
#[test]
fn every_answer_says_what_was_decided() {
    let policy = r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;
    let config = Config::default();
    let mutated = audit(
        "CREATE",
        &pod(
            Some("sbx-1"),
            &json!({"opensandbox.io/network-policy": policy}),
        ),
    );
    assert_eq!(
        mutated,
        json!({
            "decision": "mutated",
            "sandbox-id": "sbx-1",
            "policy": short_sha256(policy.as_bytes()),
            "images": json!({"execd": config.execd.image, "egress": config.egress.image}).to_string(),
        })
    );
    let plain = audit("CREATE", &pod(Some("sbx-2"), &json!({})));
    assert_eq!(
        plain["images"],
        json!({"execd": config.execd.image}).to_string()
    );
    assert!(plain.get("policy").is_none());

    let opted_out = audit(
        "CREATE",
        &pod(Some("sbx-3"), &json!({"opensandbox.io/inject": "false"})),
    );
    assert_eq!(
        opted_out,
        json!({"decision": "skipped", "skip-reason": "opt-out", "sandbox-id": "sbx-3"})
    );
    assert_eq!(
        audit("CREATE", &pod(None, &json!({}))),
        json!({"decision": "skipped", "skip-reason": "not-a-sandbox"})
    );
    assert_eq!(
        audit("DELETE", &pod(Some("sbx-4"), &json!({}))),
        json!({"decision": "skipped", "skip-reason": "not-pod-create"})
    );
    let denied = audit(
        "CREATE",
        &pod(Some("sbx-5"), &json!({"opensandbox.io/timeout": "soon"})),
    );
    assert_eq!(denied, json!({"decision": "denied", "sandbox-id": "sbx-5"}));

    // An id no label can hold (the apiserver refuses it after admission)
    // is cut to a label's 63 characters; quotes stay JSON.
    let long = format!("\"{}", "x".repeat(200));
    let cut = audit("CREATE", &pod(Some(&long), &json!({})));
    assert_eq!(cut["sandbox-id"], format!("\"{}", "x".repeat(62)));

    for answer in [mutated, opted_out, denied, cut] {
        for key in answer.as_object().unwrap().keys() {
            assert!(valid_key(key), "{key}");
        }
    }
}

#[test]
fn the_preflight_says_what_it_decided() {
    let deployment = |annotations: Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
                "namespace": "team", "operation": "CREATE",
                "object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                    "spec": {"template": pod(Some("t"), &annotations)}}}})
    };
    let allowed = answer(&deployment(json!({})), true);
    assert_eq!(allowed["response"]["allowed"], true);
    assert_eq!(
        allowed["response"]["auditAnnotations"],
        json!({"decision": "allowed"})
    );
    let denied = answer(&deployment(json!({"opensandbox.io/timeout": "soon"})), true);
    assert_eq!(
        denied["response"]["auditAnnotations"],
        json!({"decision": "denied"})
    );
}

/// An answer given without reading the object (a large body that is no
/// Pod CREATE, or an object over the limits) carries them too.
#[test]
fn answers_to_large_bodies_say_what_was_decided() {
    let big = "x".repeat(crate::review::LOOKED_AT_ABOVE);
    let mut labelled = pod(Some("sbx-big"), &json!({}));
    labelled["metadata"]["annotations"]["filler"] = json!(big);
    assert_eq!(
        audit("DELETE", &labelled),
        json!({"decision": "skipped", "skip-reason": "not-pod-create"})
    );
    labelled["metadata"]["annotations"]["filler"] =
        json!("x".repeat(crate::review::MAX_ANNOTATION_BYTES));
    assert_eq!(audit("CREATE", &labelled), json!({"decision": "denied"}));
}
