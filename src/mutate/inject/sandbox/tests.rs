use super::*;
use crate::mutate::intent::policy;
use serde_json::Value;

/// The main container after its changes, for a pod whose main container
/// is `container`.
fn changed(container: &Value, intent: &Intent, config: &Config) -> Value {
    let pod = json!({"spec": {"containers": [container]}});
    let text = pod.to_string();
    let view = PodView::parse(&text).unwrap();
    let changes = plan(&view, 0, intent, config).unwrap();
    let mut patch = PatchBuilder::default();
    changes.write(0, &mut patch);
    let ops = patch.finish().unwrap().operations().unwrap();
    let mut out = pod.clone();
    json_patch::patch(&mut out, &ops).unwrap();
    // A second plan on the result changes nothing.
    let again = out.to_string();
    let view = PodView::parse(&again).unwrap();
    let mut second = PatchBuilder::default();
    plan(&view, 0, intent, config)
        .unwrap()
        .write(0, &mut second);
    assert!(second.finish().unwrap().is_empty(), "{again}");
    out["spec"]["containers"][0].take()
}

fn intent() -> Intent {
    Intent {
        sandbox_id: "sb-1".to_owned(),
        ..Intent::default()
    }
}

fn names(c: &Value) -> Vec<&str> {
    c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

#[test]
fn env_in_specs_order_after_the_pods_own() {
    let config = Config::from_yaml("execd: {runAsInit: true}").unwrap();
    let mut i = intent();
    i.lifecycle = Some(r#"{"preStart":{"command":["true"]}}"#.to_owned());
    i.credential_proxy = true;
    let c = changed(
        &json!({"name": "sandbox", "command": ["x"], "env": [{"name": "A", "value": "1"}]}),
        &i,
        &config,
    );
    assert_eq!(
        names(&c),
        [
            "A",
            "OPENSANDBOX_LIFECYCLE",
            "OPENSANDBOX_ID",
            "EXECD_INIT",
            "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT",
            "EXECD"
        ]
    );
    assert_eq!(c["env"][2]["value"], "sb-1");
    assert_eq!(c["env"][3]["value"], "1");
    // Without any of them: the id and EXECD only.
    let plain = changed(
        &json!({"name": "s", "command": ["x"]}),
        &intent(),
        &Config::default(),
    );
    assert_eq!(names(&plain), ["OPENSANDBOX_ID", "EXECD"]);
}

#[test]
fn the_pods_own_opensandbox_id_keeps_its_place_and_gets_the_id() {
    for entry in [
        json!({"name": "OPENSANDBOX_ID", "value": "mine"}),
        json!({"name": "OPENSANDBOX_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        json!({"name": "OPENSANDBOX_ID"}),
    ] {
        let c = changed(
            &json!({"name": "s", "command": ["x"], "env": [entry, {"name": "B", "value": "2"}]}),
            &intent(),
            &Config::default(),
        );
        assert_eq!(
            c["env"][0],
            json!({"name": "OPENSANDBOX_ID", "value": "sb-1"})
        );
        assert_eq!(names(&c), ["OPENSANDBOX_ID", "B", "EXECD"]);
    }
    // The last of two counts (a later entry of a name wins).
    let c = changed(
        &json!({"name": "s", "command": ["x"], "env": [
            {"name": "OPENSANDBOX_ID", "value": "sb-1"}, {"name": "OPENSANDBOX_ID", "value": "x"}]}),
        &intent(),
        &Config::default(),
    );
    assert_eq!(c["env"][1]["value"], "sb-1");
}

#[test]
fn isolation_and_a_policy_merge_into_the_security_context() {
    let mut i = intent();
    i.isolation = true;
    i.policy = Some(policy::parse("{}", 10).unwrap());
    let config = Config::default();
    for (sc, want) in [
        (
            None,
            json!({"capabilities": {"add": ["SYS_ADMIN"], "drop": ["NET_ADMIN", "NET_RAW"]},
                   "seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"}}),
        ),
        (
            Some(json!({"runAsUser": 1000})),
            json!({"runAsUser": 1000, "capabilities": {"add": ["SYS_ADMIN"], "drop": ["NET_ADMIN", "NET_RAW"]},
                   "seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"}}),
        ),
        (
            Some(
                json!({"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN", "CHOWN"], "drop": ["MKNOD"]},
                        "seccompProfile": {"type": "RuntimeDefault"}}),
            ),
            json!({"capabilities": {"add": ["CHOWN", "NET_BIND_SERVICE", "SYS_ADMIN"], "drop": ["MKNOD", "NET_ADMIN", "NET_RAW"]},
                   "seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"}}),
        ),
        (
            Some(
                json!({"capabilities": {"add": ["cap_sys_admin"], "drop": ["ALL"]},
                        "seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"}}),
            ),
            json!({"capabilities": {"add": ["cap_sys_admin"], "drop": ["ALL"]},
                   "seccompProfile": {"type": "Unconfined"}, "appArmorProfile": {"type": "Unconfined"}}),
        ),
    ] {
        let mut c = json!({"name": "s", "command": ["x"]});
        if let Some(sc) = &sc {
            c["securityContext"] = sc.clone();
        }
        let out = changed(&c, &i, &config);
        assert_eq!(out["securityContext"], want, "{sc:?}");
        assert_eq!(
            out["volumeMounts"],
            json!([
                {"name": "opensandbox-bin", "mountPath": "/opt/opensandbox"},
                {"name": "isolation-upper", "mountPath": "/var/lib/execd/isolation"}
            ])
        );
    }
    // Without isolation nothing but the drops (contract: execd.drop-net-admin).
    i.isolation = false;
    let out = changed(&json!({"name": "s", "command": ["x"]}), &i, &config);
    assert_eq!(
        out["securityContext"],
        json!({"capabilities": {"drop": ["NET_ADMIN", "NET_RAW"]}})
    );
}
