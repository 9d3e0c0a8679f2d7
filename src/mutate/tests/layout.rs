//! The layout (`layout.rs`) through the core's entry point: the operations it writes for
//! each shape of pod, and that the result admitted again, as the apiserver
//! hands it back, needs nothing.

use serde_json::{Value, json};

use crate::config::Config;
use crate::mutate::read::pod::{PodView, Source};
use crate::mutate::{Completed, Context, Decision, FixedToken, decide, decide_view};

const TOKEN: &str = "layoutTokenLayoutTokenLayoutTok0";
const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;

fn context<'a>(config: &'a Config, tokens: &'a FixedToken) -> Context<'a> {
    Context {
        config,
        now: chrono::DateTime::UNIX_EPOCH,
        own_namespace: None,
        tokens,
    }
}

/// The patch's operations and the warnings, for an admitted pod (a pod
/// without a policy that an OpenSandbox installer completed, the
/// webhook's own output among them, is one too: contract: coexist.kept).
fn admit(pod: &Value, config: &Config) -> (Vec<Value>, Vec<String>) {
    let tokens = FixedToken(TOKEN.to_owned());
    match decide(&pod.to_string(), None, &context(config, &tokens)) {
        Decision::Admit(a) | Decision::ServerCompleted(Completed { admission: a, .. }) => (
            serde_json::from_slice(a.patch.as_json()).unwrap(),
            a.warnings,
        ),
        other => panic!("{other:?}"),
    }
}

fn apply(pod: &Value, ops: &[Value]) -> Value {
    let mut out = pod.clone();
    let ops: json_patch::Patch = serde_json::from_value(Value::from(ops.to_vec())).unwrap();
    json_patch::patch(&mut out, &ops).unwrap();
    out
}

fn sandbox(policy: Option<&str>) -> Value {
    let mut pod = json!({
        "metadata": {"name": "p", "labels": {"opensandbox.io/id": "p"}, "annotations": {}},
        "spec": {"containers": [{"name": "sandbox", "image": "python", "command": ["python"]}]},
    });
    if let Some(p) = policy {
        pod["metadata"]["annotations"]["opensandbox.io/network-policy"] = json!(p);
    }
    pod
}

/// The pod after one admission.
fn injected(pod: &Value, config: &Config) -> Value {
    let (ops, _) = admit(pod, config);
    apply(pod, &ops)
}

/// `pod` admitted again, which must rebuild `spec.initContainers` with
/// `warning`; the pod after the patch.
fn rebuilt_with(pod: &Value, config: &Config, warning: &str) -> Value {
    let (ops, warnings) = admit(pod, config);
    assert_eq!(paths(&ops), ["replace /spec/initContainers"]);
    assert_eq!(warnings, [warning]);
    assert!(warning.chars().count() <= 120, "{warning}");
    apply(pod, &ops)
}

fn paths(ops: &[Value]) -> Vec<String> {
    ops.iter()
        .map(|o| {
            format!(
                "{} {}",
                o["op"].as_str().unwrap(),
                o["path"].as_str().unwrap()
            )
        })
        .collect()
}

/// What the apiserver adds to every container before a second pass: the
/// defaults, `resources: {}`, and the service-account token mount.
fn defaulted(mut pod: Value) -> Value {
    for list in ["initContainers", "containers"] {
        for c in pod["spec"][list].as_array_mut().into_iter().flatten() {
            c["terminationMessagePath"] = json!("/dev/termination-log");
            c["terminationMessagePolicy"] = json!("File");
            c["imagePullPolicy"] = json!("IfNotPresent");
            // Requests default to the limits, written canonically.
            match c.get_mut("resources") {
                None => c["resources"] = json!({}),
                Some(r) => {
                    let canonical = |q: &Value| match q.as_str() {
                        Some("1.5") => json!("1500m"),
                        _ => q.clone(),
                    };
                    let limits: serde_json::Map<String, Value> = r["limits"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, q)| (k.clone(), canonical(q)))
                        .collect();
                    r["limits"] = Value::Object(limits.clone());
                    r["requests"] = Value::Object(limits);
                }
            }
            let ports = c.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten() {
                port["protocol"] = json!("TCP");
            }
            for name in ["readinessProbe", "startupProbe"] {
                if let Some(probe) = c.get_mut(name) {
                    probe["timeoutSeconds"] = json!(1);
                    probe["successThreshold"] = json!(1);
                    probe["httpGet"]["scheme"] = json!("HTTP");
                }
            }
            let token = json!({"name": "kube-api-access-abcde", "readOnly": true,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"});
            match c["volumeMounts"].as_array_mut() {
                Some(mounts) => mounts.push(token),
                None => c["volumeMounts"] = json!([token]),
            }
        }
    }
    pod
}

#[test]
fn a_new_pod_gets_insertions_at_fixed_places_and_is_never_read_twice() {
    let config = Config::default();
    let (ops, warnings) = admit(&sandbox(Some(POLICY)), &config);
    assert!(warnings.is_empty(), "{warnings:?}");
    let paths = paths(&ops);
    assert!(paths.contains(&"add /spec/volumes".to_owned()), "{paths:?}");
    assert!(
        paths.contains(&"add /spec/initContainers".to_owned()),
        "{paths:?}"
    );
    assert!(
        !paths
            .iter()
            .any(|p| p.starts_with("replace") || p.starts_with("remove"))
    );

    // A view whose text is unknown: a new pod needs none of it, a pod that
    // holds the webhook's containers does (and says so, as a bug).
    let tokens = FixedToken(TOKEN.to_owned());
    let ctx = context(&config, &tokens);
    for (pod, admitted) in [
        (sandbox(Some(POLICY)), true),
        (injected(&sandbox(Some(POLICY)), &config), false),
    ] {
        let text = pod.to_string();
        let mut view = PodView::parse(&text).unwrap();
        view.source = Source::Unknown;
        let decision = decide_view(&view, None, &ctx);
        assert_eq!(
            matches!(decision, Decision::Admit(_)),
            admitted,
            "{decision:?}"
        );
    }
}

#[test]
fn the_webhooks_own_output_as_the_apiserver_returns_it_needs_nothing() {
    for yaml in [
        "{}",
        "egress: {nativeSidecar: false}",
        "egress: {disableIPv6: false, resources: {limits: {cpu: '1.5'}}}",
        "execd: {resources: {limits: {memory: 64Mi}}}",
    ] {
        let config = Config::from_yaml(yaml).unwrap();
        for policy in [None, Some(POLICY)] {
            let once = defaulted(injected(&sandbox(policy), &config));
            let (ops, warnings) = admit(&once, &config);
            assert_eq!(ops, Vec::<Value>::new(), "{yaml} {policy:?} {warnings:?}");
            assert!(warnings.is_empty(), "{warnings:?}");
        }
    }
}

#[test]
fn a_changed_policy_replaces_the_sidecar_with_the_new_rules() {
    let config = Config::default();
    let mut once = defaulted(injected(&sandbox(Some(POLICY)), &config));
    let new = r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"example.org"}]}"#;
    once["metadata"]["annotations"]["opensandbox.io/network-policy"] = json!(new);
    let (ops, warnings) = admit(&once, &config);
    // The record names the new policy's hash with the new sidecar.
    assert_eq!(
        paths(&ops),
        [
            "add /metadata/annotations/opensandbox.io~1injected",
            "replace /spec/initContainers"
        ]
    );
    assert_eq!(
        warnings,
        ["replaced init container 'egress': its env differed from what the webhook injects"]
    );
    let twice = apply(&once, &ops);
    let record: Value = serde_json::from_str(
        twice["metadata"]["annotations"]["opensandbox.io/injected"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        record["policy"],
        crate::config::short_sha256(new.as_bytes()),
        "contract: record.reinvocation"
    );
    let sidecar = &twice["spec"]["initContainers"][1];
    assert_eq!(sidecar["env"][0]["value"], new);
    assert_eq!(
        twice["spec"]["initContainers"][0]["args"],
        once["spec"]["initContainers"][0]["args"]
    );
    assert!(admit(&twice, &config).0.is_empty());
}

/// contract: warning.length
///
/// A key the pod's author added to an injected container names the
/// difference; a long or odd one is quoted and the warning still fits what
/// kubectl shows (found by fuzzing: a 300-character key made a 400-character
/// warning).
#[test]
fn a_foreign_key_in_an_injected_container_makes_a_short_warning() {
    let config = Config::default();
    for (key, named) in [
        ("x".repeat(300), "\"xxx".to_owned()),
        ("a\u{2028}b".to_owned(), "\"a\\u2028b\"".to_owned()),
        ("extra".to_owned(), "its extra differed".to_owned()),
    ] {
        let mut once = defaulted(injected(&sandbox(Some(POLICY)), &config));
        once["spec"]["initContainers"][1][&key] = json!(1);
        let (ops, warnings) = admit(&once, &config);
        assert_eq!(paths(&ops), ["replace /spec/initContainers"]);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].chars().count() <= 120, "{warnings:?}");
        assert!(warnings[0].contains(&named), "{warnings:?}");
    }
}

/// contract: answer.json-paths
///
/// The pod's own init containers are copied into the patch when the
/// injected ones are rebuilt around them: one holding JSON no strict reader
/// takes (a lone surrogate escape, found by fuzzing) is refused with its
/// path, never echoed into the patch.
#[test]
fn a_rebuilt_init_list_refuses_what_it_cannot_read() {
    let config = Config::default();
    let mut pod = defaulted(injected(&sandbox(Some(POLICY)), &config));
    let inits = pod["spec"]["initContainers"].as_array_mut().unwrap();
    inits.insert(
        0,
        json!({"name": "setup", "image": "busybox", "env": [{"name": "A", "value": "PLACEHOLDER"}]}),
    );
    let text = pod.to_string().replace("PLACEHOLDER", "\\ud800x");
    let tokens = FixedToken(TOKEN.to_owned());
    let Decision::Deny(denial) = decide(&text, None, &context(&config, &tokens)) else {
        panic!("admitted");
    };
    assert_eq!(denial.code(), 400);
    let message = denial.to_string();
    assert!(
        message.contains("request.object.spec.initContainers[0].env[0].value"),
        "{message}"
    );
}

#[test]
fn a_classic_sidecar_is_replaced_in_place_or_moved_to_the_init_containers() {
    let classic = Config::from_yaml("egress: {nativeSidecar: false}").unwrap();
    let mut pod = sandbox(Some(POLICY));
    let spoof = json!({"name": "egress", "image": "busybox",
        "env": [{"name": "OPENSANDBOX_EGRESS_RULES", "value": "{}"}]});
    pod["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .insert(0, spoof);

    let (ops, warnings) = admit(&pod, &classic);
    assert!(
        paths(&ops).contains(&"replace /spec/containers/0".to_owned()),
        "{ops:?}"
    );
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let after = apply(&pod, &ops);
    assert_eq!(
        after["spec"]["containers"][0]["image"],
        crate::config::DEFAULT_EGRESS_IMAGE
    );
    assert_eq!(
        after["spec"]["containers"][1]["command"][0],
        "/opt/opensandbox/bootstrap.sh"
    );
    assert!(admit(&after, &classic).0.is_empty());

    // With a native sidecar configured it leaves the containers, and the
    // main container's operations follow it down by one.
    let native = Config::default();
    let (ops, _) = admit(&pod, &native);
    assert!(
        paths(&ops).contains(&"remove /spec/containers/0".to_owned()),
        "{ops:?}"
    );
    let after = apply(&pod, &ops);
    let containers = after["spec"]["containers"].as_array().unwrap();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0]["name"], "sandbox");
    assert_eq!(containers[0]["command"][0], "/opt/opensandbox/bootstrap.sh");
    assert_eq!(after["spec"]["initContainers"][1]["name"], "egress");
    assert!(admit(&after, &native).0.is_empty());
}

#[test]
fn a_template_sidecar_gets_its_token_without_a_warning() {
    let config = Config::default();
    let mut once = injected(&sandbox(Some(POLICY)), &config);
    crate::mutate::strip_egress_token(&mut once, TOKEN);
    let annotations = once["metadata"]["annotations"].as_object_mut().unwrap();
    annotations.remove("opensandbox.io/egress-auth-token");
    let (ops, warnings) = admit(&once, &config);
    assert!(warnings.is_empty(), "{warnings:?}");
    let after = apply(&once, &ops);
    assert_eq!(
        after["metadata"]["annotations"]["opensandbox.io/egress-auth-token"],
        TOKEN
    );
    assert_eq!(after, injected(&sandbox(Some(POLICY)), &config));
}

#[test]
fn containers_in_the_wrong_place_are_moved_and_the_pods_own_kept_as_they_were() {
    let config = Config::default();
    let mut once = injected(&sandbox(Some(POLICY)), &config);
    // It drops what a container beside a policy must already (guard).
    let own = json!({"name": "fetch", "image": "curl", "xFuture": [1, {"a": null}],
                     "securityContext": {"capabilities": {"drop": ["ALL"]}}});
    let inits = once["spec"]["initContainers"].as_array_mut().unwrap();
    inits.insert(1, own.clone());
    let warning = "moved init container 'egress' to where the webhook injects it";
    let after = rebuilt_with(&once, &config, warning);
    let names: Vec<&str> = after["spec"]["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["execd-installer", "egress", "fetch"]);
    assert_eq!(after["spec"]["initContainers"][2], own);
}
