//! Property tests over generated pods: the core never panics, its patch
//! always applies to the raw pod, fields it does not know survive untouched,
//! and admitting its own output again needs no patch.

use common::P;
use common::context::TestContext;
use proptest::prelude::*;
use sandbox_webhook::config::Config;
use sandbox_webhook::mutate::{self, Decision};
use serde_json::{Map, Value, json};

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => Just("sandbox".to_owned()),
        1 => Just("egress".to_owned()),
        1 => Just("execd-installer".to_owned()),
        12 => "[a-z]{1,6}",
    ]
}

fn arb_command() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(json!([]))),
        Just(Some(json!(null))),
        Just(Some(json!(["/opt/opensandbox/bootstrap.sh", "sh"]))),
        proptest::collection::vec("[a-z/]{1,8}", 1..3).prop_map(|v| Some(json!(v))),
    ]
}

fn arb_env() -> impl Strategy<Value = Option<Value>> {
    let entry = prop_oneof![
        Just(json!({"name": "EXECD", "value": "/opt/opensandbox/execd"})),
        Just(json!({"name": "OPENSANDBOX_EGRESS_RULES", "value": "{}"})),
        Just(json!({"name": "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT", "value": "true"})),
        Just(json!({"name": "OPENSANDBOX_ID", "value": "someone-else"})),
        Just(
            json!({"name": "OPENSANDBOX_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
        ),
        "[A-Z]{1,5}".prop_map(|n| json!({"name": n, "value": "x"})),
    ];
    proptest::option::of(proptest::collection::vec(entry, 0..3).prop_map(Value::from))
}

fn arb_mounts() -> impl Strategy<Value = Option<Value>> {
    let mount = prop_oneof![
        3 => Just(json!({"name": "opensandbox-bin", "mountPath": "/opt/opensandbox"})),
        1 => Just(json!({"name": "other", "mountPath": "/opt/opensandbox/"})),
        2 => Just(json!({"name": "kube-api-access-abcde", "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"})),
        1 => Just(json!({"name": "isolation-upper", "mountPath": "/var/lib/execd/isolation"})),
        6 => Just(json!({"name": "data", "mountPath": "/data"})),
    ];
    proptest::option::of(proptest::collection::vec(mount, 0..3).prop_map(Value::from))
}

fn arb_security() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        4 => Just(None),
        2 => Just(Some(json!({}))),
        1 => Just(Some(json!({"privileged": true}))),
        1 => Just(Some(json!({"capabilities": {"add": ["NET_RAW"]}}))),
        1 => Just(Some(json!({"capabilities": {"add": ["SYS_ADMIN"]}}))),
        1 => Just(Some(json!({"capabilities": {"add": ["CHOWN"]}, "seccompProfile": {"type": "RuntimeDefault"}}))),
        2 => Just(Some(json!({"capabilities": {"drop": ["ALL"]}}))),
        2 => Just(Some(json!({"capabilities": {"drop": ["NET_ADMIN"]}, "runAsUser": 1}))),
        2 => Just(Some(json!({"capabilities": {}}))),
    ]
}

fn arb_container() -> impl Strategy<Value = Value> {
    (
        arb_name(),
        arb_command(),
        arb_env(),
        arb_mounts(),
        arb_security(),
        any::<bool>(),
    )
        .prop_map(|(name, command, env, mounts, security, unknown)| {
            let mut c = Map::new();
            c.insert("name".into(), json!(name));
            c.insert("image".into(), json!("img"));
            for (k, v) in [
                ("command", command),
                ("env", env),
                ("volumeMounts", mounts),
                ("securityContext", security),
            ] {
                if let Some(v) = v {
                    c.insert(k.into(), v);
                }
            }
            if unknown {
                c.insert("xFutureField".into(), json!({"keep": [1, "two", null]}));
            }
            Value::Object(c)
        })
}

/// The values generated for each annotation the webhook knows, valid and
/// invalid; `None` for a name without a row here, which
/// `every_annotation_name_has_values` refuses, so a name added to
/// `mutate::ANNOTATION_NAMES` is generated from its first day.
fn annotation_values(name: &str) -> Option<(Vec<&'static str>, Vec<&'static str>)> {
    Some(match name {
        "id" => (vec!["sb-1"], vec![""]),
        "manual-cleanup" => (vec!["true"], vec!["yes"]),
        "platform" => (
            vec!["linux/amd64", "windows/arm64", "Linux/ARM64"],
            vec!["linux", "mac/amd64"],
        ),
        "timeout" => (vec!["3600", "1h30m", "90s"], vec!["59", "abc"]),
        "expires-at" => (vec!["2030-01-01T00:00:00Z"], vec!["soon"]),
        "network-policy" => (
            vec![
                r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"a.com"}]}"#,
                "{}",
            ],
            vec!["{bad", r#"{"egress":[{"action":"x","target":"a"}]}"#],
        ),
        "egress-mode" => (vec!["dns", "dns+nft"], vec!["nft"]),
        "credential-proxy" => (vec!["false", "false", "true"], vec!["yes"]),
        "entrypoint" => (vec![r#"["python","app.py"]"#], vec!["[]", "python"]),
        "main-container" => (vec!["sandbox"], vec!["egress", "nope"]),
        "inject" => (vec!["true", "true", "true", "false"], vec!["maybe"]),
        "egress-auth-token" => (vec!["tok-1"], vec![""]),
        "egress-env" => (
            vec![
                r#"{"OPENSANDBOX_EGRESS_LOG_LEVEL":"debug"}"#,
                r#"{"OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT":"true"}"#,
            ],
            vec![r#"{"OPENSANDBOX_EGRESS_RULES":"{}"}"#],
        ),
        "execd-isolation" => (vec!["enable"], vec!["on"]),
        "lifecycle" => (
            vec![r#"{"preStart":{"command":["true"],"timeoutSeconds":null}}"#],
            vec![r#"{"preStart":{}}"#],
        ),
        "injected" => (
            vec![
                r#"{"release":"0.1.0","config":"44136fa355b3678a","images":{"execd":"opensandbox/execd:v1.1.0"}}"#,
            ],
            vec!["{bad", "[]"],
        ),
        "rev" => (vec!["canary"], vec!["Canary!"]),
        _ => return None,
    })
}

/// Mostly valid values, so most generated pods get as far as a patch; the
/// invalid ones keep the denial paths exercised.
fn arb_annotation_value(key: &'static str) -> BoxedStrategy<Option<String>> {
    let (valid, invalid) = annotation_values(key).unwrap_or_else(|| {
        panic!("tests/quick/properties.rs: annotation_values() has no row for `{key}`")
    });
    let value = prop_oneof![
        19 => proptest::sample::select(valid),
        1 => proptest::sample::select(invalid),
    ];
    proptest::option::weighted(0.35, value.prop_map(str::to_owned)).boxed()
}

/// Every name of the one list the webhook reads (`mutate::ANNOTATION_NAMES`)
/// has values in the generator.
#[test]
fn every_annotation_name_has_values() {
    let missing: Vec<&str> = mutate::ANNOTATION_NAMES
        .iter()
        .filter(|name| annotation_values(name).is_none())
        .copied()
        .collect();
    assert!(
        missing.is_empty(),
        "tests/quick/properties.rs: the generator has no values for the annotations {missing:?} of mutate::ANNOTATION_NAMES: add their valid and invalid values to annotation_values()"
    );
}

fn arb_annotations() -> impl Strategy<Value = Option<Value>> {
    // A name without values fails `every_annotation_name_has_values`; here
    // it is left out, so the properties still run.
    let names: Vec<&'static str> = mutate::ANNOTATION_NAMES
        .into_iter()
        .filter(|name| annotation_values(name).is_some())
        .collect();
    let per_key: Vec<_> = names
        .iter()
        .map(|name| arb_annotation_value(name))
        .collect();
    (per_key, any::<bool>()).prop_map(move |(values, present)| {
        let mut map = Map::new();
        for (k, v) in names.iter().zip(values) {
            if let Some(v) = v {
                map.insert(format!("{P}/{k}"), json!(v));
            }
        }
        map.insert("other.example/keep".into(), json!("kept"));
        (present || !map.is_empty()).then_some(Value::Object(map))
    })
}

fn arb_node_selector() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(json!(null))),
        Just(Some(json!({"disk": "ssd"}))),
        Just(Some(json!({"kubernetes.io/os": "linux"}))),
        Just(Some(
            json!({"kubernetes.io/arch": "arm64", "kubernetes.io/os": null})
        )),
    ]
}

fn arb_affinity() -> impl Strategy<Value = Option<Value>> {
    let expr = (
        prop_oneof![
            Just("kubernetes.io/os"),
            Just("kubernetes.io/arch"),
            Just("zone")
        ],
        prop_oneof![
            Just("In"),
            Just("NotIn"),
            Just("Exists"),
            Just("DoesNotExist"),
            Just("Gt")
        ],
        proptest::sample::subsequence(vec!["linux", "windows", "amd64", "arm64"], 0..3),
    )
        .prop_map(|(k, op, vals)| json!({"key": k, "operator": op, "values": vals}));
    let term = proptest::collection::vec(expr, 0..3).prop_map(|e| json!({"matchExpressions": e}));
    proptest::option::of(proptest::collection::vec(term, 0..3).prop_map(|terms| {
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}, "xAffinityExtra": 1})
    }))
}

fn arb_pod() -> impl Strategy<Value = Value> {
    (
        proptest::bool::weighted(0.9),
        arb_annotations(),
        proptest::collection::vec(arb_container(), 1..4),
        proptest::option::of(proptest::collection::vec(arb_container(), 0..2)),
        proptest::option::of(proptest::sample::select(vec![
            json!([{"name": "opensandbox-bin", "emptyDir": {}}]),
            json!([{"name": "opensandbox-bin", "emptyDir": {}}]),
            json!([{"name": "opensandbox-bin", "hostPath": {"path": "/x"}}]),
            json!([{"name": "data", "emptyDir": {"medium": "Memory"}}]),
            json!([{"name": "data", "emptyDir": {"medium": "Memory"}}]),
            json!([{"name": "kube-api-access-abcde", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}]),
            json!([{"name": "isolation-upper", "emptyDir": {}}, {"name": "opensandbox-bin", "emptyDir": {}}]),
            json!([]),
        ])),
        arb_node_selector(),
        arb_affinity(),
        proptest::option::of(any::<bool>()),
        prop_oneof![1 => Just("default"), 1 => Just("kube-system"), 8 => Just("sandboxes")],
        (
            proptest::option::of(proptest::sample::select(vec!["gvisor", "kata"])),
            proptest::option::of(any::<bool>()),
        ),
    )
        .prop_map(
            |(sandbox, annotations, containers, inits, volumes, selector, affinity, host_network, ns, (runtime, automount))| {
                let mut labels = Map::new();
                labels.insert("app".into(), json!("x"));
                if sandbox {
                    labels.insert(format!("{P}/id"), json!("sb-1"));
                }
                let mut meta = Map::new();
                meta.insert("name".into(), json!("p"));
                meta.insert("namespace".into(), json!(ns));
                meta.insert("labels".into(), Value::Object(labels));
                meta.insert("managedFields".into(), json!([{"manager": "m", "fieldsV1": {"f:x": {}}}]));
                if let Some(a) = annotations {
                    meta.insert("annotations".into(), a);
                }
                let mut spec = Map::new();
                spec.insert("containers".into(), json!(containers));
                spec.insert("xFuturePodField".into(), json!({"a": [1, 2]}));
                for (k, v) in [
                    ("initContainers", inits.map(Value::from)),
                    ("volumes", volumes),
                    ("nodeSelector", selector),
                    ("affinity", affinity),
                    ("hostNetwork", host_network.map(Value::from)),
                    ("runtimeClassName", runtime.map(Value::from)),
                    ("automountServiceAccountToken", automount.map(Value::from)),
                ] {
                    if let Some(v) = v {
                        spec.insert(k.into(), v);
                    }
                }
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {}})
            },
        )
}

fn arb_config() -> impl Strategy<Value = Config> {
    (
        any::<bool>(),
        any::<bool>(),
        proptest::option::of(60u64..7200),
        (any::<bool>(), any::<bool>(), any::<bool>()),
    )
        .prop_map(|(native, ipv6, default_timeout, (isolation, init, automount))| {
            let yaml = format!(
                "egress: {{nativeSidecar: {native}, disableIPv6: {ipv6}, otlpEndpoint: 'http://otel:4318'}}\n\
                 expiry: {{defaultTimeoutSeconds: {}}}\n\
                 execd: {{allowIsolation: {isolation}, runAsInit: {init}}}\n\
                 pod: {{automountServiceAccountToken: {}}}",
                default_timeout.map_or("null".to_owned(), |t| t.to_string()),
                if automount { "false" } else { "null" },
            );
            Config::from_yaml(&yaml).unwrap()
        })
}

fn props_context(config: Config) -> TestContext {
    TestContext::new()
        .config(config)
        .own_namespace("sandbox-webhook")
        .token("prop-token")
}

fn decide(pod: &Value, ctx: &TestContext) -> Decision {
    mutate::decide(&pod.to_string(), None, &ctx.get())
}

/// Unknown fields of containers are keyed by container name, since injected
/// containers shift indices. A container under a name the webhook injects
/// is not the pod's own: it comes out exactly as the webhook injects it,
/// which the second pass being empty holds (contract: egress.present,
/// select.idempotent).
fn unknown_by_name(pod: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for list in ["containers", "initContainers"] {
        for c in pod["spec"][list].as_array().into_iter().flatten() {
            if c["name"] == "egress" || c["name"] == "execd-installer" {
                continue;
            }
            if let Some(x) = c.get("xFutureField") {
                out.push((format!("{list}/{}", c["name"]), x.clone()));
            }
        }
    }
    for key in ["managedFields", "status"] {
        out.push((
            key.into(),
            pod["metadata"]
                .get(key)
                .or(pod.get(key))
                .cloned()
                .unwrap_or(Value::Null),
        ));
    }
    out.push(("spec/x".into(), pod["spec"]["xFuturePodField"].clone()));
    out.push((
        "affinity/x".into(),
        pod["spec"]["affinity"]["xAffinityExtra"].clone(),
    ));
    out.push((
        "annotation".into(),
        pod["metadata"]["annotations"]["other.example/keep"].clone(),
    ));
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn patch_applies_keeps_unknown_fields_and_is_idempotent(pod in arb_pod(), config in arb_config()) {
        let ctx = props_context(config);
        let decision = decide(&pod, &ctx);
        if let Decision::Admit(admission) = decision {
            let mut patched = pod.clone();
            let ops = admission.patch.operations()
                .map_err(|e| TestCaseError::fail(format!("patch is not a JSON patch: {e}")))?;
            json_patch::patch(&mut patched, &ops)
                .map_err(|e| TestCaseError::fail(format!("patch does not apply: {e}")))?;
            prop_assert_eq!(unknown_by_name(&pod), unknown_by_name(&patched));
            for w in &admission.warnings {
                prop_assert!(w.chars().count() <= 120);
            }
            // The webhook's own output is complete: admitted with nothing
            // more, or (without a policy) taken for completed by an
            // OpenSandbox installer, which is kept as it is.
            match decide(&patched, &ctx) {
                Decision::Admit(again)
                | Decision::ServerCompleted(mutate::Completed { admission: again, .. }) => prop_assert!(
                    again.patch.is_empty(),
                    "second pass patched: {}",
                    String::from_utf8_lossy(again.patch.as_json())
                ),
                other => prop_assert!(false, "second pass: {other:?}"),
            }
        }
    }

    /// Arbitrary JSON where a pod is expected must never panic.
    #[test]
    fn arbitrary_json_never_panics(text in ".{0,200}") {
        let _ = decide(&Value::String(text.clone()), &props_context(Config::default()));
        let ctx = TestContext::new().token("t");
        let _ = mutate::decide(&text, None, &ctx.get());
        let _ = sandbox_webhook::review::review(text.as_bytes(), &ctx.get());
    }
}
