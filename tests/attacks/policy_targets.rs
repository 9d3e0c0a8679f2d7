//! contract: policy.target-grammar, warning.policy-target
//!
//! Network-policy targets reach the egress sidecar (which
//! runs with `NET_ADMIN`) in its environment as written. A target is an
//! FQDN, a `*.` wildcard, an IP or a CIDR; anything else is denied with a
//! sentence naming it, by the real server on loopback. A URL or `host:port`
//! is still admitted, with today's warning.

use common::https::patch_of;
use common::pods::SandboxPod;
use common::server::{Running, review_body};
use serde_json::{Value, json};

use crate::answers::answer_to;

/// An egress image, so that an admitted policy gets its sidecar.
const CONFIG: &str = "egress:\n  image: example.com/egress:v1\n";

/// A sandbox pod whose policy allows `pypi.org` and then `target`.
fn pod(target: &str) -> Value {
    let policy = json!({
        "defaultAction": "deny",
        "egress": [
            {"action": "allow", "target": "pypi.org"},
            {"action": "allow", "target": target},
        ],
    });
    SandboxPod::new("sb-1")
        .namespace("team-a")
        .annotation("network-policy", &policy.to_string())
        .json()
}

/// The response to a review of [`pod`] of `target`, and the whole answer.
async fn answer(c: &reqwest::Client, server: &Running, target: &str) -> (Value, Vec<u8>) {
    answer_to(c, server, review_body("u-t", &pod(target))).await
}

/// The value of the env var `name` anywhere in `value`.
fn env_value<'v>(value: &'v Value, name: &str) -> Option<&'v str> {
    match value {
        Value::Object(map) if map.get("name").and_then(Value::as_str) == Some(name) => {
            map.get("value").and_then(Value::as_str)
        }
        Value::Object(map) => map.values().find_map(|v| env_value(v, name)),
        Value::Array(items) => items.iter().find_map(|v| env_value(v, name)),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_target_is_denied_naming_it() {
    let (_alone, _pki, server, c) = common::attack::attacked(Some(CONFIG)).await;
    let long = format!("{}.example.com", "a".repeat(64));
    for target in [
        "'; rm -rf /'",
        "a.com\nb.com",
        "a.com\r\nX-Injected: 1",
        "`reboot`.example.com",
        "$(reboot).example.com",
        "example.com; reboot",
        "example .com",
        "exam\tple.com",
        "\"pypi.org\"",
        "pypi.org|sh",
        "pypi.org&&sh",
        "<pypi.org>",
        "pypi.org\\",
        "pypi.org\u{0}",
        "-pypi.org",
        "pypi..org",
        "*pypi.org",
        "*.*.org",
        long.as_str(),
        "10.0.0.0/33",
        "10.0.0.0/",
        "2001:db8::/129",
        "https://pypi.org/$(reboot)",
        "https://pypi.org/'; rm -rf /'",
        "https://py pi.org/",
        "pypi.org:443;reboot",
        "pypí.org",
        "a\u{2028}b.org",
        "\u{202e}gro.ipyp",
    ] {
        let (response, _) = answer(&c, &server, target).await;
        assert_eq!(response["allowed"], false, "{target:?}: {response}");
        assert_eq!(response["status"]["code"], 400, "{target:?}");
        assert!(response.get("patch").is_none(), "{target:?}");
        let message = response["status"]["message"].as_str().unwrap();
        // The target named as a JSON string: quoted, with newlines, tabs,
        // quotes and invisible characters escaped in JSON's notation (never
        // Rust's `\u{2028}`), so the sentence stays one visible line.
        let json = serde_json::to_string(target)
            .unwrap()
            .replace('\u{2028}', "\\u2028")
            .replace('\u{202e}', "\\u202e");
        let named =
            format!("egress[1].target {json}, which is not an FQDN, *.wildcard, IP or CIDR");
        assert!(message.contains(&named), "{target:?}: {message}");
        assert!(!message.contains('\n'), "{message}");
        assert!(!message.contains("\\u{"), "{message}");
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_targets_reach_the_sidecar_and_url_like_ones_are_warned_about() {
    let (_alone, _pki, server, c) = common::attack::attacked(Some(CONFIG)).await;
    for (target, warning) in [
        ("files.pythonhosted.org", None),
        ("PyPI.org.", None),
        ("localhost", None),
        ("_sip._tcp.example.com", None),
        ("*", None),
        ("*.github.com", None),
        ("10.1.2.3", None),
        ("2001:db8::1", None),
        ("10.0.0.0/8", None),
        ("2001:db8::/32", None),
        (
            "https://files.pythonhosted.org/packages",
            Some("egress[1].target is a URL, not a host name: use files.pythonhosted.org"),
        ),
        (
            "api.example.com:443",
            Some("egress[1].target has a port; targets match host names only: use api.example.com"),
        ),
    ] {
        let (response, body) = answer(&c, &server, target).await;
        assert_eq!(response["allowed"], true, "{target:?}: {response}");
        let warnings = response["warnings"].as_array().cloned().unwrap_or_default();
        match warning {
            None => assert!(warnings.is_empty(), "{target}: {warnings:?}"),
            Some(w) => assert!(
                warnings.iter().any(|x| x.as_str().unwrap().ends_with(w)),
                "{target}: {warnings:?}"
            ),
        }
        let patch = patch_of(&body);
        let rules = env_value(&patch, "OPENSANDBOX_EGRESS_RULES")
            .unwrap_or_else(|| panic!("{target}: no rules in {patch}"));
        let rules: Value = serde_json::from_str(rules).unwrap();
        assert_eq!(rules["egress"][1]["target"], target, "{rules}");
    }
    server.shutdown().await;
}
