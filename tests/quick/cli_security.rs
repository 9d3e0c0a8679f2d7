//! contract: execd.installer-run-as, egress.run-as, warning.run-as-root, execd.drop-net-admin
//!
//! Through `inject`: the injected containers say
//! for themselves who they run as, so a pod-level user never breaks them,
//! and a main container that drops ALL keeps its drop list as written.

use common::cli::run;
use serde_json::{Value, json};

const POLICY: &str =
    r#"{"defaultAction": "deny", "egress": [{"action": "allow", "target": "pypi.org"}]}"#;

fn pod(pod_security: &Value, main_security: &Value, policy: bool) -> Value {
    let mut annotations = json!({"opensandbox.io/timeout": "1h"});
    if policy {
        annotations["opensandbox.io/network-policy"] = json!(POLICY);
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "sandboxes",
                     "labels": {"opensandbox.io/id": "p"}, "annotations": annotations},
        "spec": {"securityContext": pod_security,
                 "containers": [{"name": "sandbox", "image": "x", "command": ["sh"],
                                 "securityContext": main_security}]}
    })
}

/// The injected pod and `inject`'s stderr.
fn inject(input: &Value) -> (Value, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("pod.json"), input.to_string()).unwrap();
    let r = run(
        &[
            "inject",
            "-f",
            "pod.json",
            "-o",
            "json",
            "--egress-token",
            "t",
        ],
        dir.path(),
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    (serde_json::from_str(&r.stdout).unwrap(), r.stderr)
}

fn container<'a>(pod: &'a Value, list: &str, name: &str) -> &'a Value {
    pod["spec"][list]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}: {pod}"))
}

#[test]
fn containers_that_need_root_say_so_when_the_pod_asks_for_a_non_root_user() {
    for asks in [json!({"runAsNonRoot": true}), json!({"runAsUser": 1000})] {
        let (out, stderr) = inject(&pod(&asks, &json!({}), true));
        let root = json!({"runAsUser": 0, "runAsNonRoot": false});
        let installer = &container(&out, "initContainers", "execd-installer")["securityContext"];
        let sidecar = &container(&out, "initContainers", "egress")["securityContext"];
        for (sc, what) in [(installer, "installer"), (sidecar, "sidecar")] {
            for key in ["runAsUser", "runAsNonRoot"] {
                assert_eq!(
                    sc[key], root[key],
                    "{what} {key} for a pod with {asks}: {sc}"
                );
            }
        }
        assert_eq!(installer["privileged"], true);
        assert_eq!(sidecar["capabilities"]["add"], json!(["NET_ADMIN"]));
        assert!(
            stderr.contains("the egress sidecar and the IPv6 installer run as root"),
            "{stderr}"
        );
        // The pod's own settings are left as they are.
        assert_eq!(out["spec"]["securityContext"], asks);
    }
}

#[test]
fn a_pod_that_asks_nothing_gets_the_spec_security_contexts_exactly() {
    let (out, stderr) = inject(&pod(&json!({}), &json!({}), true));
    assert_eq!(
        container(&out, "initContainers", "execd-installer")["securityContext"],
        json!({"privileged": true})
    );
    assert_eq!(
        container(&out, "initContainers", "egress")["securityContext"],
        json!({"capabilities": {"add": ["NET_ADMIN"]}})
    );
    assert!(!stderr.contains("as root"), "{stderr}");
    let (plain, _) = inject(&pod(&json!({"runAsUser": 0}), &json!({}), false));
    assert_eq!(
        container(&plain, "initContainers", "execd-installer")["securityContext"],
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})
    );
}

#[test]
fn the_unprivileged_installer_names_a_user_when_the_pod_asks_only_for_non_root() {
    let (out, stderr) = inject(&pod(&json!({"runAsNonRoot": true}), &json!({}), false));
    let sc = &container(&out, "initContainers", "execd-installer")["securityContext"];
    assert_eq!(sc["runAsUser"], 65532, "{sc}");
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert!(!stderr.contains("as root"), "{stderr}");
    // With the pod's own user, the installer runs as that user.
    let (named, _) = inject(&pod(
        &json!({"runAsNonRoot": true, "runAsUser": 1000}),
        &json!({}),
        false,
    ));
    let sc = &container(&named, "initContainers", "execd-installer")["securityContext"];
    assert!(sc.get("runAsUser").is_none(), "{sc}");
}

/// The main container's drop list after `inject`, for a pod with a policy
/// whose main container drops `given`.
fn main_drops_after_inject(given: &str) -> Value {
    let main = json!({"capabilities": {"drop": [given]}});
    let (out, _) = inject(&pod(&json!({}), &main, true));
    container(&out, "containers", "sandbox")["securityContext"]["capabilities"]["drop"].clone()
}

#[test]
fn a_drop_list_with_all_is_not_given_net_admin_again() {
    for all in ["ALL", "all"] {
        assert_eq!(main_drops_after_inject(all), json!([all]));
    }
    // containerd reads `CAP_ALL` as `CAP_CAP_ALL` and drops nothing.
    assert_eq!(
        main_drops_after_inject("CAP_ALL"),
        json!(["CAP_ALL", "NET_ADMIN", "NET_RAW"])
    );
    assert_eq!(
        main_drops_after_inject("MKNOD"),
        json!(["MKNOD", "NET_ADMIN", "NET_RAW"])
    );
}
