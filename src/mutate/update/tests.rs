//! UPDATE judgements through `judge`, on pod views.

use serde_json::{Value, json};

use super::*;
use crate::config::Config;
use crate::mutate::intent::token::FixedToken;

fn decided(old: &Value, new: &Value, sub: Option<&str>) -> Judged {
    let config = Config::default();
    let tokens = FixedToken("t".into());
    let ctx = Context {
        config: &config,
        now: chrono::DateTime::UNIX_EPOCH,
        own_namespace: Some("sandbox-webhook"),
        tokens: &tokens,
    };
    let (old_raw, new_raw) = (old.to_string(), new.to_string());
    let old = PodView::parse(&old_raw).unwrap();
    let new = PodView::parse(&new_raw).unwrap();
    judge(&new, &old, sub, Some("team-a"), &ctx)
}

fn pod(labels: &Value, annotations: &Value) -> Value {
    json!({"metadata": {"name": "p", "labels": labels, "annotations": annotations},
           "spec": {"initContainers": [{"name": "egress", "image": "egress:1",
                                        "env": [{"name": "OPENSANDBOX_EGRESS_RULES", "value": "{}"}]}],
                    "containers": [{"name": "sandbox", "image": "x"}]}})
}

#[test]
fn only_the_webhooks_containers_keep_their_images() {
    let old = pod(&json!({"opensandbox.io/id": "p"}), &json!({}));
    let mut new = old.clone();
    new["spec"]["initContainers"][0]["image"] = json!("egress:2");
    assert!(matches!(
        decided(&old, &new, None),
        Judged::Deny(Denial::InjectedImageChanged {
            container: EGRESS,
            ..
        })
    ));
    // The label taken away in the same request: still judged.
    new["metadata"]["labels"] = json!({});
    assert!(matches!(decided(&old, &new, None), Judged::Deny(_)));
    let mut main = old.clone();
    main["spec"]["containers"][0]["image"] = json!("y");
    assert!(matches!(decided(&old, &main, None), Judged::Admit(p) if p.is_empty()));
}

#[test]
fn what_the_webhook_never_touched_is_skipped() {
    let plain = pod(&json!({}), &json!({}));
    let mut swapped = plain.clone();
    swapped["spec"]["initContainers"][0]["image"] = json!("egress:2");
    assert!(matches!(
        decided(&plain, &swapped, None),
        Judged::Skip(SkipReason::NotASandbox)
    ));
    let out = pod(
        &json!({"opensandbox.io/id": "p"}),
        &json!({"opensandbox.io/inject": "False"}),
    );
    let mut swapped = out.clone();
    swapped["spec"]["initContainers"][0]["image"] = json!("egress:2");
    assert!(matches!(
        decided(&out, &swapped, None),
        Judged::Skip(SkipReason::OptOut)
    ));
    let sandbox = pod(&json!({"opensandbox.io/id": "p"}), &json!({}));
    assert!(matches!(
        decided(&sandbox, &sandbox, Some("status")),
        Judged::Skip(SkipReason::NotPodCreate)
    ));
}

#[test]
fn ephemeral_containers_beside_no_egress_control_are_left_alone() {
    let mut old = pod(&json!({"opensandbox.io/id": "p"}), &json!({}));
    old["spec"]["initContainers"] = json!([]);
    let mut new = old.clone();
    new["spec"]["ephemeralContainers"] =
        json!([{"name": "d", "image": "x", "securityContext": {"privileged": true}}]);
    assert!(matches!(
        decided(&old, &new, Some(EPHEMERAL_CONTAINERS)),
        Judged::Admit(p) if p.is_empty()
    ));
    // An egress sidecar (OpenSandbox's server puts the policy there only)
    // is egress control too.
    let old = pod(&json!({"opensandbox.io/id": "p"}), &json!({}));
    let mut new = old.clone();
    new["spec"]["ephemeralContainers"] = json!([{"name": "d", "image": "x"}]);
    let Judged::Admit(patch) = decided(&old, &new, Some(EPHEMERAL_CONTAINERS)) else {
        panic!("admitted")
    };
    let ops: Value = serde_json::from_slice(patch.as_json()).unwrap();
    assert_eq!(
        ops,
        json!([{"op": "add", "path": "/spec/ephemeralContainers/0/securityContext",
                "value": {"capabilities": {"drop": ["NET_ADMIN", "NET_RAW"]}}}])
    );
}
