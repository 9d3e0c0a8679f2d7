//! One test per field rule of SPEC 8.

use super::*;

#[test]
fn prefix_is_a_dns_subdomain() {
    assert_eq!(
        ok("prefix: sandbox.example.com").keys().id,
        "sandbox.example.com/id"
    );
    refused("prefix: Bad_Prefix", "prefix", "not a DNS subdomain");
    refused("prefix: ''", "prefix", "not a DNS subdomain");
    refused("prefix: opensandbox.io/", "prefix", "not a DNS subdomain");
    refused("prefix: 123", "prefix", "got the number 123");
    refused(
        &format!("prefix: {}.io", "a".repeat(64)),
        "prefix",
        "too long",
    );
}

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
    refused(
        "excludedNamespaces: ['']",
        "excludedNamespaces[0]",
        "not a namespace name",
    );
    refused(
        "excludedNamespaces: [ok, Kube-System]",
        "excludedNamespaces[1]",
        "not a namespace name",
    );
    refused(
        "excludedNamespaces: [a.b]",
        "excludedNamespaces[0]",
        "not a namespace name",
    );
    refused(
        "excludedNamespaces: kube-system",
        "excludedNamespaces",
        "got the text 'kube-system'",
    );
    refused(
        "excludedNamespaces: [1]",
        "excludedNamespaces[0]",
        "got the number 1",
    );
}

#[test]
fn images_are_references() {
    assert_eq!(
        ok("execd: {image: 'r.example.com:5000/x/execd:v2'}")
            .execd
            .image,
        "r.example.com:5000/x/execd:v2"
    );
    refused(
        "execd: {image: 'opensandbox/execd: v1'}",
        "execd.image",
        "whitespace",
    );
    refused(
        "execd: {image: ' opensandbox/execd'}",
        "execd.image",
        "whitespace",
    );
    refused(
        "execd: {image: ''}",
        "execd.image",
        "not a valid image reference",
    );
    refused(
        "execd: {image: 'OpenSandbox/execd:v1'}",
        "execd.image",
        "lower-case",
    );
    refused(
        "egress: {image: 'OpenSandbox/egress'}",
        "egress.image",
        "lower-case",
    );
    refused(
        "egress: {image: ''}",
        "egress.image",
        "not a valid image reference",
    );
    refused("egress: {image: 'a b'}", "egress.image", "whitespace");
    refused("egress: {image: [x]}", "egress.image", "got a list");
    refused(
        "execd: {image: 'x@sha256:12'}",
        "execd.image",
        "not a valid image reference",
    );
}

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
    refused(
        "execd: {resources: {limits: {cpu: lots}}}",
        "execd.resources.limits.cpu",
        "'lots' is not a Kubernetes quantity",
    );
    refused(
        "execd: {resources: {limits: {cpu: '-1'}}}",
        "execd.resources.limits.cpu",
        "negative",
    );
    refused(
        "execd: {resources: {limits: {cpu: -1}}}",
        "execd.resources.limits.cpu",
        "negative",
    );
    refused(
        "execd: {resources: {limits: {memory: 1Gb}}}",
        "execd.resources.limits.memory",
        "not a Kubernetes quantity",
    );
    refused(
        "execd: {resources: {limits: {cpu: null}}}",
        "execd.resources.limits.cpu",
        "got null",
    );
    refused(
        "execd: {resources: {limits: {cpus: 1}}}",
        "execd.resources.limits.cpus",
        "not a container resource",
    );
    refused(
        "execd: {resources: {limits: {kubernetes.io/x: 1}}}",
        "execd.resources.limits[\"kubernetes.io/x\"]",
        "not a container resource",
    );
    refused(
        "execd: {resources: {limit: {cpu: 1}}}",
        "execd.resources.limit",
        "unknown field",
    );
    refused(
        "execd: {resources: {limits: [cpu]}}",
        "execd.resources.limits",
        "got a list",
    );
    refused(
        "execd: {resources: 1}",
        "execd.resources",
        "got the number 1",
    );
    refused(
        "execd: {resources: {claims: [{name: x}]}}",
        "execd.resources.claims",
        "not supported",
    );
    refused(
        "egress: {resources: {requests: {cpu: 2}, limits: {cpu: 1500m}}}",
        "egress.resources.requests.cpu",
        "above limits.cpu",
    );
    refused(
        "egress: {resources: {requests: {memory: 1Gi}, limits: {memory: 1G}}}",
        "egress.resources.requests.memory",
        "above limits.memory",
    );
    refused(
        "egress: {resources: {limits: {example.com/dev: 500m}}}",
        "egress.resources.limits[\"example.com/dev\"]",
        "not a whole number",
    );
    refused(
        "egress: {resources: {requests: {example.com/dev: 1}}}",
        "egress.resources.requests[\"example.com/dev\"]",
        "needs limits.example.com/dev",
    );
    refused(
        "egress: {resources: {requests: {example.com/dev: 1}, limits: {example.com/dev: 2}}}",
        "egress.resources.requests[\"example.com/dev\"]",
        "must equal",
    );
}

#[test]
fn numbers_in_range() {
    assert_eq!(ok("egress: {maxRules: 1}").egress.max_rules, 1);
    assert_eq!(ok("egress: {maxRules: 50000}").egress.max_rules, 50_000);
    refused(
        "egress: {maxRules: 0}",
        "egress.maxRules",
        "from 1 to 50000",
    );
    refused(
        "egress: {maxRules: 50001}",
        "egress.maxRules",
        "from 1 to 50000",
    );
    refused(
        "egress: {maxRules: -1}",
        "egress.maxRules",
        "got the number -1",
    );
    refused("egress: {maxRules: 1.5}", "egress.maxRules", "whole number");
    refused(
        "egress: {maxRules: '10'}",
        "egress.maxRules",
        "got the text '10'",
    );
    refused(
        "expiry: {maxTimeoutSeconds: 10}",
        "expiry.maxTimeoutSeconds",
        "from 60 to",
    );
    refused(
        "expiry: {defaultTimeoutSeconds: 59}",
        "expiry.defaultTimeoutSeconds",
        "from 60 to",
    );
    refused(
        "expiry: {defaultTimeoutSeconds: 99999999999}",
        "expiry.defaultTimeoutSeconds",
        "from 60 to",
    );
    refused(
        "expiry: {defaultTimeoutSeconds: 18446744073709551616}",
        "",
        "a number at line 1 column 33 is too large",
    );
    refused(
        "expiry: {defaultTimeoutSeconds: 900, maxTimeoutSeconds: 600}",
        "expiry.defaultTimeoutSeconds",
        "above expiry.maxTimeoutSeconds",
    );
    ok("expiry: {defaultTimeoutSeconds: 600, maxTimeoutSeconds: 600}");
    ok("expiry: {defaultTimeoutSeconds: 60}");
}
