//! The guard's readings: where a token shows, and which downward API
//! paths hand it out.

use serde_json::json;

use super::*;
use crate::mutate::read::pod::PodView;

#[test]
fn a_token_shows_whole_or_as_part_when_long_enough() {
    let long = "Zx8-q1Lr0_kPw3Ym";
    assert!(holds(long, long));
    assert!(holds(&format!("Bearer {long}"), long));
    // A short token the pod chose would match any text: only whole.
    assert!(holds("abc", "abc") && !holds("xabcx", "abc"));
    let c = json!({"name": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "t=other"}],
                   "args": ["a", {"k": [long]}]});
    assert_eq!(
        find_token(&c, long, String::new()).as_deref(),
        Some("args[1].k[0]")
    );
    let env_only = json!({"env": [{"name": "Y", "value": long}]});
    assert_eq!(
        find_token(&env_only, long, String::new()).as_deref(),
        Some("env[0].value")
    );
    // Keys are names, not what the sandbox reads.
    assert!(find_token(&json!({long: 1}), long, String::new()).is_none());
    assert!(
        find_token(
            &json!({"securityContext": {"capabilities": {}}}),
            "apabilitie",
            String::new()
        )
        .is_none()
    );
    assert!(find_token(&json!({"a": [1, true, null]}), long, String::new()).is_none());
}

#[test]
fn which_downward_paths_hand_out_the_token() {
    let raw = json!({"metadata": {
        "labels": {"opensandbox.io/id": "x", "copy": "Zx8-q1Lr0_kPw3Ym"},
        "annotations": {"opensandbox.io/team": "a", "mirror": "Zx8-q1Lr0_kPw3Ym"}}})
    .to_string();
    let pod = PodView::parse(&raw).unwrap();
    let keys = crate::config::Config::default().keys().clone();
    let generated = Exposure {
        pod: &pod,
        keys: &keys,
        token: None,
    };
    for (path, exposes) in [
        ("metadata.annotations", true),
        (
            "metadata.annotations['opensandbox.io/egress-auth-token']",
            true,
        ),
        (
            " metadata.annotations['opensandbox.io/egress-auth-token']",
            true,
        ),
        ("metadata.annotations['opensandbox.io/team']", false),
        ("metadata.annotations['mirror']", false),
        ("metadata.labels", false),
        ("metadata.name", false),
        ("metadata.annotationsX", true),
    ] {
        assert_eq!(generated.exposes(path), exposes, "{path}");
    }
    // With the pod's own token, what holds a copy of it hands it out too.
    let chosen = Exposure {
        token: Some("Zx8-q1Lr0_kPw3Ym"),
        ..generated
    };
    for (path, exposes) in [
        ("metadata.annotations['mirror']", true),
        ("metadata.labels['copy']", true),
        ("metadata.labels", true),
        ("metadata.labels['opensandbox.io/id']", false),
        ("metadata.annotations['opensandbox.io/team']", false),
    ] {
        assert_eq!(chosen.exposes(path), exposes, "{path}");
    }
}
