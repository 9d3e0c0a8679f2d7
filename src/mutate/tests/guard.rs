//! The guard (`inject/guard.rs`) through the core's entry point: the drops
//! follow the pod's own containers to where the layout puts them.

use serde_json::json;

use crate::mutate::{Context, Decision, FixedToken, decide};

#[test]
fn drops_follow_the_containers_to_where_the_layout_puts_them() {
    let config = crate::config::Config::default();
    let tokens = FixedToken("guardTokenGuardTokenGuardToken00".into());
    let ctx = Context {
        config: &config,
        now: chrono::DateTime::UNIX_EPOCH,
        own_namespace: None,
        tokens: &tokens,
    };
    // An own init container before a stale installer: the list is rebuilt
    // with the webhook's two first, so the pod's own moves to index 2.
    let pod = json!({
        "metadata": {"name": "p", "labels": {"opensandbox.io/id": "p"},
                     "annotations": {"opensandbox.io/network-policy": "{}"}},
        "spec": {
            "initContainers": [
                {"name": "mine", "image": "x"},
                {"name": "execd-installer", "image": "old",
                 "volumeMounts": [{"name": "opensandbox-bin", "mountPath": "/opt/opensandbox"}]}],
            "containers": [{"name": "sandbox", "image": "x", "command": ["x"]},
                           {"name": "other", "image": "y", "securityContext": {"capabilities": {"drop": ["NET_ADMIN"]}}}]}});
    let Decision::Admit(a) = decide(&pod.to_string(), None, &ctx) else {
        panic!("admitted")
    };
    let ops: Vec<serde_json::Value> = serde_json::from_slice(a.patch.as_json()).unwrap();
    let mut out = pod.clone();
    let patch: json_patch::Patch = serde_json::from_value(json!(ops)).unwrap();
    json_patch::patch(&mut out, &patch).unwrap();
    let inits = out["spec"]["initContainers"].as_array().unwrap();
    assert_eq!(inits[2]["name"], "mine");
    assert_eq!(
        inits[2]["securityContext"],
        json!({"capabilities": {"drop": ["NET_ADMIN", "NET_RAW"]}})
    );
    assert_eq!(
        out["spec"]["containers"][1]["securityContext"]["capabilities"]["drop"],
        json!(["NET_ADMIN", "NET_RAW"])
    );
}
