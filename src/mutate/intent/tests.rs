//! Reading the annotations: what each one accepts and refuses.

use super::*;
use serde_json::json;

const POLICY: &str = r#"{"defaultAction":"deny"}"#;

fn read_with(annotations: &serde_json::Value, config: &str) -> Result<Intent, IntentError> {
    let pod =
        json!({"metadata": {"labels": {"opensandbox.io/id": "sb-7"}, "annotations": annotations}});
    let text = pod.to_string();
    let view = PodView::parse(&text).unwrap();
    read(&view, &Config::from_yaml(config).unwrap()).map(Option::unwrap)
}

fn read_one(annotations: &serde_json::Value) -> Result<Intent, IntentError> {
    read_with(annotations, "{}")
}

/// The annotation `annotations` are refused for and why: they must be
/// refused as a malformed annotation.
fn malformed(annotations: &serde_json::Value) -> (String, String) {
    match read_one(annotations) {
        Err(IntentError::MalformedAnnotation { key, problem }) => (key, problem),
        r => panic!("{annotations} is read: {r:?}"),
    }
}

#[test]
fn the_annotations_of_issue_32() {
    let i = read_with(
        &json!({
            "opensandbox.io/network-policy": POLICY,
            "opensandbox.io/egress-env": r#"{"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT": "true"}"#,
            "opensandbox.io/execd-isolation": "enable",
            "opensandbox.io/lifecycle": r#"{"preStart": {"command": ["true"]}}"#,
        }),
        "execd: {allowIsolation: true}",
    )
    .unwrap();
    assert_eq!(i.sandbox_id, "sb-7");
    assert!(i.isolation && i.mitm() == Some("true"));
    assert_eq!(
        i.lifecycle.as_deref(),
        Some(r#"{"preStart":{"command":["true"]}}"#)
    );
    assert_eq!(i.mode(&Config::default()), EgressMode::Dns);
}

#[test]
fn what_only_a_sidecar_reads_needs_a_policy_and_the_proxy_needs_nft() {
    let env = r#"{"OPENSANDBOX_EGRESS_LOG_LEVEL": "debug"}"#;
    assert!(matches!(
        read_one(&json!({"opensandbox.io/egress-env": env})),
        Err(IntentError::WithoutPolicy { .. })
    ));
    let proxy = |extra: serde_json::Value| {
        let mut a = json!({"opensandbox.io/network-policy": POLICY, "opensandbox.io/credential-proxy": "true"});
        a.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        read_one(&a)
    };
    assert!(matches!(
        proxy(json!({})),
        Err(IntentError::CredentialProxyNeedsNft {
            mode: EgressMode::Dns,
            ..
        })
    ));
    assert!(proxy(json!({"opensandbox.io/egress-mode": "dns+nft"})).is_ok());
    assert!(matches!(
        proxy(json!({"opensandbox.io/egress-mode": "dns+nft",
            "opensandbox.io/egress-env": r#"{"OPENSANDBOX_EGRESS_MITMPROXY_SSL_INSECURE": "true"}"#})),
        Err(IntentError::SslInsecureWithCredentialProxy { .. })
    ));
}

#[test]
fn isolation_is_enable_only_and_only_where_allowed() {
    let on = json!({"opensandbox.io/execd-isolation": "enable"});
    assert!(matches!(
        read_one(&on),
        Err(IntentError::IsolationNotAllowed { .. })
    ));
    for other in ["true", "Enable", " enable", ""] {
        let r = read_with(
            &json!({"opensandbox.io/execd-isolation": other}),
            "execd: {allowIsolation: true}",
        );
        assert!(
            matches!(r, Err(IntentError::MalformedAnnotation { .. })),
            "{other:?}"
        );
    }
}

/// A token travels in an HTTP header: visible ASCII, at least one
/// character; anything else is refused (the golden fixtures
/// `egress-auth-token-*` show the whole 400 denial), not replaced.
/// contract: intent.egress-auth-token
#[test]
fn an_egress_token_is_visible_ascii() {
    let key = "opensandbox.io/egress-auth-token";
    for bad in ["", " ", "two words", "tab\there", "née", "del\u{7f}", "\n"] {
        let (named, problem) =
            malformed(&json!({"opensandbox.io/network-policy": POLICY, key: bad}));
        assert_eq!(named, key);
        assert_eq!(
            problem,
            "must be a non-empty string of visible ASCII characters; remove it to have one generated",
            "{bad:?}"
        );
    }
    for good in ["t", "A-z_0.9~!\"#$%&'()*+,/:;<=>?@[\\]^`{|}"] {
        let i = read_one(&json!({"opensandbox.io/network-policy": POLICY, key: good})).unwrap();
        assert_eq!(i.egress_token.as_deref(), Some(good));
    }
}

/// An annotation value that is not a string is refused, naming the
/// annotation (the golden fixture `annotation-not-a-string` shows the 400
/// denial); a null one counts as absent.
/// contract: intent.string-values
#[test]
fn annotation_values_are_strings_and_null_is_absent() {
    for key in ["opensandbox.io/timeout", "opensandbox.io/network-policy"] {
        for value in [json!(3600), json!(true), json!(["1h"]), json!({"a": "b"})] {
            let (named, problem) = malformed(&json!({key: value}));
            assert_eq!(
                (named.as_str(), problem.as_str()),
                (key, "must be a string")
            );
        }
    }
    let i =
        read_one(&json!({"opensandbox.io/timeout": null, "opensandbox.io/network-policy": null}))
            .unwrap();
    let absent = read_one(&json!({})).unwrap();
    assert_eq!(format!("{i:?}"), format!("{absent:?}"));
}

#[test]
fn a_label_that_is_not_a_string_is_refused() {
    let pod = json!({"metadata": {"labels": {"opensandbox.io/id": 7}}});
    let text = pod.to_string();
    let view = PodView::parse(&text).unwrap();
    assert!(matches!(
        read(&view, &Config::default()),
        Err(IntentError::MalformedLabel { .. })
    ));
}
