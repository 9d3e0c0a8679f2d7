use std::path::Path;

use super::*;
use crate::config::controller::OwnerAction;

mod owners;

fn ok(yaml: &str) -> Config {
    Config::from_yaml(yaml).unwrap_or_else(|e| panic!("{yaml:?} refused: {e}"))
}

/// The message of a refused document, read as if it came from `f.yaml`.
fn err(yaml: &str) -> String {
    match Config::from_file_bytes(Path::new("f.yaml"), yaml.as_bytes()) {
        Ok(c) => panic!("{yaml:?} accepted as {c:?}"),
        Err(e) => e.to_string(),
    }
}

/// Asserts the message names the file and `field`, and says `words`.
#[track_caller]
fn refused(yaml: &str, field: &str, words: &str) {
    let message = err(yaml);
    let named = if field.is_empty() {
        "config file f.yaml: ".to_owned()
    } else {
        format!("config file f.yaml: {field}: ")
    };
    assert!(
        message.starts_with(&named),
        "{yaml:?}: {message:?} does not start with {named:?}"
    );
    assert!(
        message.contains(words),
        "{yaml:?}: {message:?} does not say {words:?}"
    );
}

/// Every row of `refusals.jsonl`: a document, the field its message names,
/// and words it says. The table holds most of the configuration's refusals; the tests
/// below add what a row cannot say.
/// contract: config.errors, config.strict-keys, config.strict-types
#[test]
fn every_refusal_names_its_field() {
    let mut rows = 0;
    for line in include_str!("refusals.jsonl").lines() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (yaml, field, words): (String, String, String) =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        refused(&yaml, &field, &words);
        rows += 1;
    }
    // A truncated table must not pass quietly.
    assert_eq!(rows, 116);
}

/// contract: config.empty-file
#[test]
fn explicit_empty_mapping_is_default() {
    let c = ok("{}");
    assert_eq!(c, Config::default());
    assert_eq!(c.keys().id, "opensandbox.io/id");
}

/// contract: config.empty-file
#[test]
fn empty_and_whitespace_files_are_refused() {
    for text in [
        "",
        " ",
        "\n\n",
        "\t \n",
        "# only a comment\n",
        "---\n",
        "~",
        "null",
    ] {
        refused(text, "", "no settings");
    }
}

#[test]
fn spec_example_parses() {
    let c = ok(r#"
prefix: example.com
excludedNamespaces: [kube-system, kube-public, kube-node-lease]
execd:   {image: "opensandbox/execd:v1.0.18", resources: null}
egress:  {image: "opensandbox/egress:v1.1.0", mode: dns+nft, disableIPv6: false, nativeSidecar: false, maxRules: 10, resources: {limits: {cpu: 100m}}}
expiry:  {defaultTimeoutSeconds: 600, maxTimeoutSeconds: 3600}
"#);
    assert_eq!(c.keys().expires_at, "example.com/expires-at");
    assert_eq!(c.egress.mode, EgressMode::DnsNft);
    assert!(!c.egress.native_sidecar);
    assert!(!c.egress.disable_ipv6);
    assert_eq!(c.egress.max_rules, 10);
    assert_eq!(c.expiry.default_timeout_seconds, Some(600));
    assert_eq!(c.expiry.max_timeout_seconds, Some(3600));
    assert_eq!(
        c.egress.resources,
        Some(serde_json::json!({"limits": {"cpu": "100m"}}))
    );
}

/// contract: config.defaults
#[test]
fn partial_sections_keep_defaults() {
    let c = ok("egress: {mode: dns}");
    assert_eq!(c.egress.image.as_deref(), Some(DEFAULT_EGRESS_IMAGE));
    assert!(c.egress.native_sidecar);
    assert_eq!(c.execd, ExecdConfig::default());
}

#[test]
fn every_fixture_config_is_accepted() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().ends_with(".config.yaml") {
            Config::load(&path).unwrap_or_else(|e| panic!("{e}"));
            seen += 1;
        }
    }
    assert!(seen >= 5, "only {seen} fixture configs found");
}

/// contract: config.defaults
#[test]
fn defaults_round_trip() {
    let yaml = Config::default().to_yaml().unwrap();
    assert_eq!(ok(&yaml), Config::default());
    assert!(yaml.contains("resources: null"), "{yaml}");
    assert!(yaml.contains("defaultTimeoutSeconds: null"), "{yaml}");
}

/// contract: config.strict-null
#[test]
fn nulls_only_where_the_defaults_show_them() {
    for allowed in [
        "execd: {resources: null}",
        "egress: {resources: null}",
        "egress: {image: null}",
        "egress: {otlpEndpoint: null}",
        "pod: {automountServiceAccountToken: null}",
        "expiry: {defaultTimeoutSeconds: null, maxTimeoutSeconds: ~}",
    ] {
        ok(allowed);
    }
    assert_eq!(ok("egress: {image: null}").egress.image, None);
}

// What each field rule accepts (the refusals are in the table).

/// contract: config.names
#[test]
fn prefix_is_a_dns_subdomain() {
    assert_eq!(
        ok("prefix: sandbox.example.com").keys().id,
        "sandbox.example.com/id"
    );
    refused(
        &format!("prefix: {}.io", "a".repeat(64)),
        "prefix",
        "too long",
    );
}

/// contract: config.names
#[test]
fn namespaces_are_dns_labels() {
    assert_eq!(
        ok("excludedNamespaces: []").excluded_namespaces,
        Vec::<String>::new()
    );
    assert_eq!(
        ok("excludedNamespaces: [a, b-c]").excluded_namespaces,
        ["a", "b-c"]
    );
}

/// contract: config.images
#[test]
fn images_are_references() {
    assert_eq!(
        ok("execd: {image: 'r.example.com:5000/x/execd:v2'}")
            .execd
            .image,
        "r.example.com:5000/x/execd:v2"
    );
}

/// contract: config.resources
#[test]
fn resources_follow_the_apiserver() {
    let c = ok(
        "execd: {resources: {requests: {cpu: 50m, memory: 32Mi}, limits: {cpu: 1, memory: 64Mi, example.com/dev: 2}}}",
    );
    assert_eq!(
        c.execd.resources,
        Some(
            serde_json::json!({"requests": {"cpu": "50m", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "64Mi", "example.com/dev": "2"}})
        )
    );
    ok("egress: {resources: {}}");
    ok("egress: {resources: {limits: {}}}");
    ok("egress: {resources: {requests: {cpu: 0.5}}}");
    ok("egress: {resources: {requests: {cpu: 1000m}, limits: {cpu: '1'}}}");
    ok("egress: {resources: {requests: {hugepages-2Mi: 4Mi}, limits: {hugepages-2Mi: 4Mi}}}");
}

/// contract: config.values
#[test]
fn numbers_in_range() {
    assert_eq!(ok("egress: {maxRules: 1}").egress.max_rules, 1);
    assert_eq!(ok("egress: {maxRules: 50000}").egress.max_rules, 50_000);
    ok("expiry: {defaultTimeoutSeconds: 600, maxTimeoutSeconds: 600}");
    ok("expiry: {defaultTimeoutSeconds: 60}");
}

#[test]
fn the_keys_of_issue_32() {
    let d = Config::default();
    assert!(!d.execd.run_as_init && !d.execd.allow_isolation);
    assert_eq!(d.egress.otlp_endpoint, None);
    assert_eq!(d.egress.incompatible_runtime_classes, ["gvisor"]);
    assert_eq!(d.pod.automount_service_account_token, Some(false));
    assert_eq!(d.execd.image, "opensandbox/execd:v1.1.0");
    assert_eq!(d.egress.image.as_deref(), Some("opensandbox/egress:v1.1.7"));
    let c = ok(r#"
execd: {runAsInit: true, allowIsolation: true}
egress: {otlpEndpoint: "http://otel-collector.observability:4318", incompatibleRuntimeClasses: []}
pod: {automountServiceAccountToken: null}
"#);
    assert!(c.execd.run_as_init && c.execd.allow_isolation);
    assert_eq!(
        c.egress.otlp_endpoint.as_deref(),
        Some("http://otel-collector.observability:4318")
    );
    assert!(c.egress.incompatible_runtime_classes.is_empty());
    assert_eq!(c.pod.automount_service_account_token, None);
    assert_eq!(
        ok("egress: {incompatibleRuntimeClasses: [gvisor, kata-fc]}")
            .egress
            .incompatible_runtime_classes,
        ["gvisor", "kata-fc"]
    );
    assert_eq!(
        ok("egress: {otlpEndpoint: null}").egress.otlp_endpoint,
        None
    );
    assert_eq!(
        ok("pod: {automountServiceAccountToken: false}").pod,
        PodConfig::default()
    );
}

/// `controller.expiry.ownerActions`, in order.
fn owner_actions(c: &Config) -> Vec<(String, OwnerAction)> {
    c.controller
        .expiry
        .owner_actions
        .clone()
        .into_iter()
        .collect()
}

/// contract: config.controller
#[test]
fn controller_section() {
    let c = ok(
        "controller: {expiry: {ownerActions: {Job.batch: delete, Sandbox.agents.x-k8s.io: suspend}}, platform: {deleteUnschedulable: true}}",
    );
    assert_eq!(
        owner_actions(&c),
        [
            ("Job.batch".to_owned(), OwnerAction::Delete),
            ("Sandbox.agents.x-k8s.io".to_owned(), OwnerAction::Suspend)
        ]
    );
    assert!(c.controller.platform.delete_unschedulable);
    assert!(c.controller.warnings().is_empty());
}

#[test]
fn not_utf8() {
    let e = Config::from_file_bytes(Path::new("f.yaml"), b"prefix: \xff").unwrap_err();
    assert!(e.to_string().starts_with("config file f.yaml: "), "{e}");
    assert!(e.to_string().contains("not UTF-8"), "{e}");
}

#[test]
fn load_names_a_missing_file() {
    let e = Config::load(Path::new("/nonexistent/c.yaml")).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }));
    assert!(e.to_string().contains("/nonexistent/c.yaml"), "{e}");
}

/// Messages are for people: no Rust or serde vocabulary, whatever is wrong.
#[test]
fn messages_never_leak_rust_types() {
    let bad = [
        "prefix: null",
        "prefix: 1",
        "prefix: [a]",
        "prefix: {a: b}",
        "prefix: true",
        "execd: {image: null}",
        "execd: {image: ~}",
        "execd: {image: 123}",
        "execd: {image: 1.5}",
        "execd: {image: {a: b}}",
        "execd: {image: [a]}",
        "execd: {resources: {limits: {cpu: lots}}}",
        "execd: {resources: {limits: {cpu: [1]}}}",
        "execd: {resources: {limits: {cpu: {a: 1}}}}",
        "execd: {resources: []}",
        "execd: {resources: true}",
        "execd: []",
        "execd: 1",
        "execd: null",
        "egress: {image: 1}",
        "egress: {mode: 1}",
        "egress: {mode: [dns]}",
        "egress: {maxRules: x}",
        "egress: {maxRules: -5}",
        "egress: {maxRules: 1e3}",
        "egress: {maxRules: 99999999999999999999999}",
        "egress: {disableIPv6: 1}",
        "egress: {nativeSidecar: null}",
        "expiry: {maxTimeoutSeconds: x}",
        "expiry: {maxTimeoutSeconds: -1}",
        "expiry: {maxTimeoutSeconds: 1.5}",
        "expiry: []",
        "excludedNamespaces: {a: b}",
        "excludedNamespaces: [[a]]",
        "excludedNamespaces: 3",
        "3",
        "true",
        "[]",
        "''",
        "\"\"",
        "{a",
        "null: 1",
        "? [a]\n: b",
        "prefix: !!binary aGVsbG8=",
        "",
        " ",
        "egress: {resources: {requests: {cpu: 2}, limits: {cpu: 1}}}",
        "controller: null",
        "controller: {expiry: {deleteOwnerKinds: null}}",
        "controller: {expiry: {deleteOwnerKinds: [1]}}",
        "controller: {platform: {deleteUnschedulable: 1}}",
        "controller: {expiry: {deleteOwnerKinds: [job]}}",
        "controller: {x: 1}",
    ];
    let leaks = [
        "u64",
        "usize",
        "i64",
        "f64",
        "u8",
        "struct",
        "enum ",
        "Option",
        "String",
        "Vec",
        "unit value",
        "invalid type",
        "Config",
        "Value",
        "serde",
        "::",
        "sequence",
        "map with",
        "variant",
    ];
    for yaml in bad {
        let message = err(yaml);
        for leak in leaks {
            assert!(
                !message.contains(leak),
                "{yaml:?} -> {message:?} contains {leak:?}"
            );
        }
        assert!(
            message.starts_with("config file f.yaml: "),
            "{yaml:?} -> {message:?}"
        );
    }
}

/// The chart's schema refuses what this reader refuses with the very same
/// patterns; a change to one without the other fails here.
/// contract: config.chart-parity
#[test]
fn chart_schema_carries_the_same_patterns() {
    const SCHEMA: &str = "charts/sandbox-webhook/values.schema.json";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SCHEMA);
    let schema: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let at = |pointer: &str| {
        schema
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_else(|| panic!("{SCHEMA}: no {pointer}"))
            .to_owned()
    };
    let same = |pointer: &str, want: &str| {
        assert_eq!(
            at(pointer),
            want,
            "{SCHEMA} at {pointer}: not what src/config/ reads; change both together"
        );
    };
    let config = "/properties/config/properties";
    same("/properties/revision/anyOf/1/pattern", rules::DNS_LABEL);
    same(&format!("{config}/prefix/pattern"), rules::DNS_SUBDOMAIN);
    same(
        &format!("{config}/excludedNamespaces/items/pattern"),
        rules::DNS_LABEL,
    );
    same("/definitions/image/pattern", rules::IMAGE);
    same("/definitions/quantity/oneOf/0/pattern", rules::QUANTITY);
    same(
        "/definitions/resourceList/propertyNames/pattern",
        rules::RESOURCE_NAME,
    );
    same(
        &format!("{config}/egress/properties/incompatibleRuntimeClasses/items/pattern"),
        rules::DNS_SUBDOMAIN,
    );
    same(
        &format!("{config}/egress/properties/otlpEndpoint/anyOf/1/pattern"),
        rules::OTLP_ENDPOINT,
    );
    let proxy = format!("{config}/egress/properties/upstreamProxy/anyOf/1/properties");
    assert_eq!(
        at(&format!("{proxy}/url/pattern")),
        rules::UPSTREAM_PROXY_URL
    );
    assert_eq!(
        at(&format!(
            "{proxy}/authorizationSecretRef/properties/key/pattern"
        )),
        rules::SECRET_KEY
    );
    for name in ["authorizationSecretRef/properties/name", "caSecretName"] {
        assert_eq!(at(&format!("{proxy}/{name}/pattern")), rules::DNS_SUBDOMAIN);
    }
    for field in ["execd/properties/image", "egress/properties/image/anyOf/1"] {
        same(&format!("{config}/{field}/$ref"), "#/definitions/image");
    }
    for section in ["execd", "egress"] {
        same(
            &format!("{config}/{section}/properties/resources/$ref"),
            "#/definitions/resources",
        );
    }
    let number = |pointer: &str, want: u64| {
        assert_eq!(
            schema.pointer(pointer).and_then(serde_json::Value::as_u64),
            Some(want),
            "{SCHEMA} at {pointer}: not the bound src/config/ enforces; change both together"
        );
    };
    number(
        &format!("{config}/egress/properties/maxRules/maximum"),
        MAX_MAX_RULES as u64,
    );
    for field in ["defaultTimeoutSeconds", "maxTimeoutSeconds"] {
        let limits = format!("{config}/expiry/properties/{field}/oneOf/1");
        number(&format!("{limits}/minimum"), MIN_TIMEOUT_SECONDS);
        number(&format!("{limits}/maximum"), MAX_TIMEOUT_SECONDS);
    }
}

// The upstream proxy's secrecy (upstream_proxy.rs).
mod upstream_proxy;

// The configuration's part of the injection record (record.rs).
mod record;
