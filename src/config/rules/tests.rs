use super::*;

/// Accepted and refused values of each rule (`rule_cases.json`).
#[derive(serde::Deserialize)]
struct Cases {
    accepted: Vec<String>,
    refused: Vec<String>,
}

type Rule = fn(&str) -> Result<(), String>;

/// `rule` refuses each value with a message that holds what the case
/// pairs it with; the messages, in the cases' order.
fn refusals(rule: Rule, cases: &[(&str, &str)]) -> Vec<String> {
    let refused = |&(value, says): &(&str, &str)| {
        let message = rule(value).unwrap_err();
        assert!(message.contains(says), "{value:?}: {message}");
        message
    };
    cases.iter().map(refused).collect()
}

#[test]
fn each_rule_against_its_cases() {
    let table: std::collections::BTreeMap<String, Cases> =
        serde_json::from_str(include_str!("../rule_cases.json")).unwrap();
    let rules: [(&str, Rule); 10] = [
        ("image", image),
        ("quantity_syntax", quantity_syntax),
        ("resource_name", resource_name),
        ("dns_label", dns_label),
        ("dns_subdomain", dns_subdomain),
        ("runtime_class", runtime_class),
        ("otlp_endpoint", otlp_endpoint),
        ("upstream_proxy_url", upstream_proxy_url),
        ("secret_key", secret_key),
        ("revision", revision),
    ];
    assert_eq!(table.len(), rules.len());
    for (name, rule) in rules {
        let cases = &table[name];
        assert!(
            !cases.accepted.is_empty() && !cases.refused.is_empty(),
            "{name}"
        );
        for value in &cases.accepted {
            assert_eq!(rule(value), Ok(()), "{name}: {value:?}");
        }
        for value in &cases.refused {
            assert!(rule(value).is_err(), "{name}: {value:?} accepted");
        }
    }
}

#[test]
fn images() {
    // A repository named "null" is a valid reference (it is in the
    // table); the YAML null is caught before this rule (see read.rs).
    let long = format!("{}/x:v1", "a".repeat(300));
    assert!(image(&long).unwrap_err().contains("at most 255"));
    let tag = format!("x:{}", "a".repeat(129));
    assert!(image(&tag).is_err());
    assert!(image("A/b").unwrap_err().contains("lower-case"));
    assert!(image("a b").unwrap_err().contains("whitespace"));
}

#[test]
fn quantities() {
    assert!(quantity_syntax("-1").unwrap_err().contains("negative"));
}

#[test]
fn dns_names() {
    assert_eq!(dns_label(&"a".repeat(63)), Ok(()));
    assert!(
        dns_label(&"a".repeat(64))
            .unwrap_err()
            .contains("at most 63")
    );
    assert!(dns_subdomain(&format!("{}.io", "a".repeat(64))).is_err());
    assert!(dns_subdomain(&vec!["a".repeat(63); 5].join(".")).is_err());
}

#[test]
fn otlp_endpoints_say_what_is_wrong() {
    refusals(
        otlp_endpoint,
        &[
            ("otel-collector:4318", "not an http:// or https:// URL"),
            ("grpc://otel:4317", "not an http:// or https:// URL"),
            ("http://", "no host"),
            ("http:///v1/metrics", "no host"),
            ("https://user:pw@otel:4318", "user or password"),
            ("http://otel collector:4318", "not a URL with a host"),
            ("http://otel:99999", "port outside"),
            ("http://otel:0", "port outside"),
        ],
    );
    assert!(
        runtime_class("gVisor")
            .unwrap_err()
            .contains("runtime class name")
    );
}

/// Each refusal says what is wrong, and none quotes the URL.
/// contract: config.upstream-proxy
#[test]
fn upstream_proxy_urls_say_what_is_wrong_without_quoting_it() {
    let cases = [
        ("proxy.secret-host.example:3128", "no scheme"),
        ("socks5://secret-host:1080", "scheme other than http"),
        ("http://user:pw@secret-host:3128", "user or password"),
        ("http://secret-host:3128/path", "has a path"),
        ("http://secret-host:3128/?q=1", "query or a fragment"),
        ("http://secret-host:3128#frag", "query or a fragment"),
        ("http://:3128", "no host"),
        ("http://secret-host:0", "port outside"),
        ("http://secret-host:65536", "port outside"),
        ("http://secret-host:http", "port outside"),
        ("http://secret host:3128", "a space"),
        ("http://secret-host\n:3128", "a space"),
        ("http://secret_host$:3128", "not a host name"),
    ];
    let messages = refusals(upstream_proxy_url, &cases);
    for ((value, _), message) in cases.iter().zip(messages) {
        assert!(!message.contains("secret"), "{value:?}: {message}");
    }
    for good in [
        "http://proxy:3128",
        "HTTPS://p.example.com",
        "http://[fd00::1]:8080/",
    ] {
        assert_eq!(upstream_proxy_url(good), Ok(()), "{good}");
    }
}

#[test]
fn shorten_escapes_and_cuts() {
    assert_eq!(shorten("a\nb"), "a\\nb");
    assert_eq!(shorten(&"x".repeat(100)).chars().count(), 81);
}
