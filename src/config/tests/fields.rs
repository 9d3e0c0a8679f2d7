//! One test per field rule of SPEC 8.

use super::*;

#[test]
fn prefix_is_a_dns_subdomain() {
    assert_eq!(
        ok("prefix: sandbox.example.com").keys().id,
        "sandbox.example.com/id"
    );
    // document, field named, words said
    #[rustfmt::skip]
    let cases = [
        ("prefix: Bad_Prefix",      "prefix", "not a DNS subdomain"),
        ("prefix: ''",              "prefix", "not a DNS subdomain"),
        ("prefix: opensandbox.io/", "prefix", "not a DNS subdomain"),
        ("prefix: 123",             "prefix", "got the number 123"),
    ];
    refused_each(&cases);
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
    // document, field named, words said
    #[rustfmt::skip]
    let cases = [
        ("excludedNamespaces: ['']",              "excludedNamespaces[0]", "not a namespace name"),
        ("excludedNamespaces: [ok, Kube-System]", "excludedNamespaces[1]", "not a namespace name"),
        ("excludedNamespaces: [a.b]",             "excludedNamespaces[0]", "not a namespace name"),
        ("excludedNamespaces: kube-system",       "excludedNamespaces",    "got the text 'kube-system'"),
        ("excludedNamespaces: [1]",               "excludedNamespaces[0]", "got the number 1"),
    ];
    refused_each(&cases);
}

#[test]
fn images_are_references() {
    assert_eq!(
        ok("execd: {image: 'r.example.com:5000/x/execd:v2'}")
            .execd
            .image,
        "r.example.com:5000/x/execd:v2"
    );
    // document, field named, words said
    #[rustfmt::skip]
    let cases = [
        ("execd: {image: 'opensandbox/execd: v1'}", "execd.image",  "whitespace"),
        ("execd: {image: ' opensandbox/execd'}",    "execd.image",  "whitespace"),
        ("execd: {image: ''}",                      "execd.image",  "not a valid image reference"),
        ("execd: {image: 'OpenSandbox/execd:v1'}",  "execd.image",  "lower-case"),
        ("egress: {image: 'OpenSandbox/egress'}",   "egress.image", "lower-case"),
        ("egress: {image: ''}",                     "egress.image", "not a valid image reference"),
        ("egress: {image: 'a b'}",                  "egress.image", "whitespace"),
        ("egress: {image: [x]}",                    "egress.image", "got a list"),
        ("execd: {image: 'x@sha256:12'}",           "execd.image",  "not a valid image reference"),
    ];
    refused_each(&cases);
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
    // document, field named, words said
    #[rustfmt::skip]
    let cases = [
        ("execd: {resources: {limits: {cpu: lots}}}", "execd.resources.limits.cpu",
         "'lots' is not a Kubernetes quantity"),
        ("execd: {resources: {limits: {cpu: '-1'}}}", "execd.resources.limits.cpu",
         "negative"),
        ("execd: {resources: {limits: {cpu: -1}}}", "execd.resources.limits.cpu",
         "negative"),
        ("execd: {resources: {limits: {memory: 1Gb}}}", "execd.resources.limits.memory",
         "not a Kubernetes quantity"),
        ("execd: {resources: {limits: {cpu: null}}}", "execd.resources.limits.cpu",
         "got null"),
        ("execd: {resources: {limits: {cpus: 1}}}", "execd.resources.limits.cpus",
         "not a container resource"),
        ("execd: {resources: {limits: {kubernetes.io/x: 1}}}", "execd.resources.limits[\"kubernetes.io/x\"]",
         "not a container resource"),
        ("execd: {resources: {limit: {cpu: 1}}}", "execd.resources.limit",
         "unknown field"),
        ("execd: {resources: {limits: [cpu]}}", "execd.resources.limits",
         "got a list"),
        ("execd: {resources: 1}", "execd.resources",
         "got the number 1"),
        ("execd: {resources: {claims: [{name: x}]}}", "execd.resources.claims",
         "not supported"),
        ("egress: {resources: {requests: {cpu: 2}, limits: {cpu: 1500m}}}", "egress.resources.requests.cpu",
         "above limits.cpu"),
        ("egress: {resources: {requests: {memory: 1Gi}, limits: {memory: 1G}}}", "egress.resources.requests.memory",
         "above limits.memory"),
        ("egress: {resources: {limits: {example.com/dev: 500m}}}", "egress.resources.limits[\"example.com/dev\"]",
         "not a whole number"),
        ("egress: {resources: {requests: {example.com/dev: 1}}}", "egress.resources.requests[\"example.com/dev\"]",
         "needs limits.example.com/dev"),
        ("egress: {resources: {requests: {example.com/dev: 1}, limits: {example.com/dev: 2}}}", "egress.resources.requests[\"example.com/dev\"]",
         "must equal"),
    ];
    refused_each(&cases);
}

#[test]
fn numbers_in_range() {
    assert_eq!(ok("egress: {maxRules: 1}").egress.max_rules, 1);
    assert_eq!(ok("egress: {maxRules: 50000}").egress.max_rules, 50_000);
    // document, field named, words said
    #[rustfmt::skip]
    let cases = [
        ("egress: {maxRules: 0}", "egress.maxRules",
         "from 1 to 50000"),
        ("egress: {maxRules: 50001}", "egress.maxRules",
         "from 1 to 50000"),
        ("egress: {maxRules: -1}", "egress.maxRules",
         "got the number -1"),
        ("egress: {maxRules: 1.5}", "egress.maxRules",
         "whole number"),
        ("egress: {maxRules: '10'}", "egress.maxRules",
         "got the text '10'"),
        ("expiry: {maxTimeoutSeconds: 10}", "expiry.maxTimeoutSeconds",
         "from 60 to"),
        ("expiry: {defaultTimeoutSeconds: 59}", "expiry.defaultTimeoutSeconds",
         "from 60 to"),
        ("expiry: {defaultTimeoutSeconds: 99999999999}", "expiry.defaultTimeoutSeconds",
         "from 60 to"),
        ("expiry: {defaultTimeoutSeconds: 18446744073709551616}", "",
         "a number at line 1 column 33 is too large"),
        ("expiry: {defaultTimeoutSeconds: 900, maxTimeoutSeconds: 600}", "expiry.defaultTimeoutSeconds",
         "above expiry.maxTimeoutSeconds"),
    ];
    refused_each(&cases);
    ok("expiry: {defaultTimeoutSeconds: 600, maxTimeoutSeconds: 600}");
    ok("expiry: {defaultTimeoutSeconds: 60}");
}
