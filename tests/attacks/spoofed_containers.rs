//! contract: egress.present, egress.reserved-name, execd.reserved-names, egress.net-capability-main,
//! egress.privileged-main, select.idempotent
//!
//! A pod spec that tries to undo its own network policy,
//! against the real server on loopback. Each spoofed container under a name
//! the webhook injects comes out as exactly the webhook's own; every other
//! container that could rewrite the sidecar's rules is denied; and a policy
//! changed between two passes (another webhook, on reinvocation) reaches
//! the sidecar.

use common::pods::SandboxPod;
use serde_json::{Value, json};

use crate::answers::{POLICY, PolicyServer, applied, policy_pod};

const EGRESS_IMAGE: &str = "example.com/egress:v1";
const EXECD_IMAGE: &str = "example.com/execd:v1";

/// Fails unless `stored`, the webhook's own output, admitted again needs
/// nothing.
async fn assert_settled(server: &PolicyServer, stored: &Value) {
    let (again, _) = server.answer(stored).await;
    assert!(again.get("patch").is_none(), "{again}");
}

/// Fails, naming `case`, unless one of `warnings` starts with `prefix`.
#[track_caller]
fn assert_warned(warnings: &[String], prefix: &str, case: &str) {
    assert!(
        warnings.iter().any(|w| w.starts_with(prefix)),
        "{case}: no warning starts with {prefix:?}: {warnings:?}"
    );
}

/// `pod` as the apiserver stores it after the server's answer.
async fn admitted(server: &PolicyServer, pod: &Value) -> (Value, Vec<String>) {
    let (response, body) = server.answer(pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let out = applied(pod, &body);
    let warnings = response["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| w.as_str().unwrap().to_owned())
        .collect();
    (out, warnings)
}

/// Every container named `name`, in either list.
fn named<'p>(pod: &'p Value, name: &str) -> Vec<&'p Value> {
    ["initContainers", "containers"]
        .into_iter()
        .flat_map(|l| pod["spec"][l].as_array().into_iter().flatten())
        .filter(|c| c["name"] == name)
        .collect()
}

fn env<'c>(c: &'c Value, name: &str) -> Option<&'c str> {
    c["env"].as_array()?.iter().find(|e| e["name"] == name)?["value"].as_str()
}

/// The pod holds one sidecar, the webhook's, right after the installer,
/// with `rules`; and one installer, the webhook's, first.
fn assert_real_sidecar(pod: &Value, rules: &str) {
    let sidecars = named(pod, "egress");
    assert_eq!(sidecars.len(), 1, "{pod}");
    let s = sidecars[0];
    assert_eq!(s["image"], EGRESS_IMAGE, "{s}");
    let policy: Value = serde_json::from_str(rules).unwrap();
    let got: Value = serde_json::from_str(env(s, "OPENSANDBOX_EGRESS_RULES").unwrap()).unwrap();
    assert_eq!(got, policy);
    assert!(s.get("command").is_none() && s.get("args").is_none(), "{s}");
    assert_eq!(pod["spec"]["initContainers"][1], *s);
    let installer = &pod["spec"]["initContainers"][0];
    assert_eq!(installer["name"], "execd-installer");
    assert_eq!(installer["image"], EXECD_IMAGE);
    assert_eq!(installer["securityContext"]["privileged"], true);
    assert!(
        installer["args"][0]
            .as_str()
            .unwrap()
            .contains("/proc/sys/net/ipv6/conf/all/disable_ipv6"),
        "{installer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoofed_sidecars_and_installers_come_out_as_the_webhooks_own() {
    let server = PolicyServer::start().await;
    let busybox = json!({"name": "egress", "image": "busybox:1.36", "command": ["sleep", "infinity"],
        "env": [{"name": "OPENSANDBOX_EGRESS_RULES", "value": "{}"}]});
    let installer = json!({"name": "execd-installer", "image": "attacker/installer",
        "command": ["/bin/sh", "-c"], "args": ["cp ./execd /opt/opensandbox/execd"],
        "volumeMounts": [{"name": "opensandbox-bin", "mountPath": "/opt/opensandbox"}]});
    let mut as_container = policy_pod("spoof-1").json();
    as_container["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(busybox.clone());
    let as_init = policy_pod("spoof-2")
        .spec_field("initContainers", json!([busybox]))
        .json();
    let fake_installer = policy_pod("spoof-3")
        .spec_field("initContainers", json!([installer]))
        .json();
    let both = policy_pod("spoof-4")
        .spec_field(
            "initContainers",
            json!([installer, {"name": "egress", "image": "busybox",
                "env": [{"name": "OPENSANDBOX_EGRESS_RULES", "value": "{\"defaultAction\":\"allow\"}"}],
                "restartPolicy": "Always"}]),
        )
        .json();
    for pod in [as_container, as_init, fake_installer, both] {
        let (stored, warnings) = admitted(&server, &pod).await;
        assert_real_sidecar(&stored, POLICY);
        assert_warned(
            &warnings,
            "replaced ",
            pod["metadata"]["name"].as_str().unwrap(),
        );
        assert_settled(&server, &stored).await;
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_changed_between_passes_reaches_the_sidecar() {
    let server = PolicyServer::start().await;
    let (mut stored, _) = admitted(&server, &policy_pod("repolicy").json()).await;
    assert_real_sidecar(&stored, POLICY);
    // Another webhook changes the policy; the apiserver calls this one again.
    let new = r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"files.pythonhosted.org"}]}"#;
    stored["metadata"]["annotations"]["opensandbox.io/network-policy"] = json!(new);
    let (updated, warnings) = admitted(&server, &stored).await;
    assert_real_sidecar(&updated, new);
    assert_eq!(
        warnings,
        ["replaced init container 'egress': its env differed from what the webhook injects"]
    );
    assert_settled(&server, &updated).await;
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_other_container_that_could_undo_the_rules_is_denied() {
    let server = PolicyServer::start().await;
    let helper = |sc: Value| json!({"name": "helper", "image": "busybox", "securityContext": sc});
    for (list, sc, says) in [
        (
            "initContainers",
            json!({"privileged": true}),
            "init container 'helper' is privileged",
        ),
        (
            "containers",
            json!({"privileged": true}),
            "container 'helper' is privileged",
        ),
        (
            "initContainers",
            json!({"capabilities": {"add": ["NET_ADMIN"]}}),
            "init container 'helper' adds capability NET_ADMIN",
        ),
        (
            "containers",
            json!({"capabilities": {"add": ["net_raw"]}}),
            "container 'helper' adds capability NET_RAW",
        ),
        (
            "containers",
            json!({"capabilities": {"add": ["SYS_TIME", "ALL"]}}),
            "container 'helper' adds capability ALL",
        ),
    ] {
        let mut pod = policy_pod("extra").json();
        match pod["spec"][list].as_array_mut() {
            Some(items) => items.push(helper(sc.clone())),
            None => pod["spec"][list] = json!([helper(sc.clone())]),
        }
        let (response, _) = server.answer(&pod).await;
        assert_eq!(response["allowed"], false, "{list} {sc}: {response}");
        assert_eq!(response["status"]["code"], 403);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(message.starts_with(says), "{message}");
    }
    // SYS_ADMIN alone is allowed (execd's isolated sessions need it), and
    // without a policy nothing is checked.
    let mut pod = policy_pod("sys-admin").json();
    pod["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(helper(json!({"capabilities": {"add": ["SYS_ADMIN"]}})));
    let (response, _) = server.answer(&pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let mut pod = SandboxPod::new("no-policy").namespace("team-a").json();
    pod["spec"]["initContainers"] = json!([helper(json!({"privileged": true}))]);
    let (response, _) = server.answer(&pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    server.shutdown().await;
}

/// The webhook's output for a policy pod, rewritten into what OpenSandbox's
/// server builds: the sidecar among the containers, its rules in Python's
/// spacing with an upper-case action, no token annotation (the sidecar
/// holds the token).
async fn server_like(server: &PolicyServer, name: &str) -> Value {
    let (mut pod, _) = admitted(server, &policy_pod(name).json()).await;
    let inits = pod["spec"]["initContainers"].as_array_mut().unwrap();
    let mut sidecar = inits.remove(1);
    sidecar.as_object_mut().unwrap().remove("restartPolicy");
    sidecar["env"][0]["value"] = json!(
        r#"{"defaultAction": "deny", "egress": [{"action": "ALLOW", "target": "pypi.org"}]}"#
    );
    pod["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(sidecar);
    pod["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("opensandbox.io/egress-auth-token");
    pod
}

/// contract: coexist.policy, egress.rules-as-values, egress.classic-kept, egress.token-kept
///
/// A pod that imitates OpenSandbox's server beside a network policy: its
/// sidecar may spell the requested rules as the server does and keep its
/// token and classic place, and then is kept byte for byte; anything else
/// in it (an image, a command, an env entry, a capability, a mount, a
/// second rules entry) has it replaced by the webhook's own, and the token
/// it held carried over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imitating_the_server_beside_a_policy_keeps_only_the_spelling_of_the_rules() {
    type Change = fn(&mut Value);
    let server = PolicyServer::start().await;
    let exact = server_like(&server, "imitation").await;
    let (response, _) = server.answer(&exact).await;
    assert!(response.get("patch").is_none(), "{response}");
    let token = env(&exact["spec"]["containers"][1], "OPENSANDBOX_EGRESS_TOKEN")
        .unwrap()
        .to_owned();
    let changes: [(&str, Change); 11] = [
        ("image", |s| {
            s["image"] = json!("attacker.example/egress:v1");
        }),
        ("command", |s| {
            s["command"] = json!(["sh", "-c", "iptables -F; sleep inf"]);
        }),
        ("args", |s| s["args"] = json!(["--allow-all"])),
        ("env", |s| {
            let env = s["env"].as_array_mut().unwrap();
            env.push(json!({"name": "OPENSANDBOX_EGRESS_POLICY_FILE", "value": "/opt/opensandbox/p.json"}));
        }),
        ("env", |s| {
            let env = s["env"].as_array_mut().unwrap();
            env.push(json!({"name": "OPENSANDBOX_EGRESS_RULES", "value": "{\"defaultAction\":\"allow\"}"}));
        }),
        ("env", |s| {
            let env = s["env"].as_array_mut().unwrap();
            env.insert(0, json!({"name": "OPENSANDBOX_EGRESS_RULES", "value": "{\"defaultAction\":\"allow\"}"}));
        }),
        ("envFrom", |s| {
            s["envFrom"] = json!([{"configMapRef": {"name": "rules"}}]);
        }),
        ("securityContext", |s| {
            s["securityContext"]["capabilities"]["add"] = json!(["NET_ADMIN", "ALL"]);
        }),
        ("securityContext", |s| {
            s["securityContext"]["privileged"] = json!(true);
        }),
        ("volumeMounts", |s| {
            let mounts = s["volumeMounts"].as_array_mut().unwrap();
            mounts.push(json!({"name": "opensandbox-bin", "mountPath": "/etc/egress"}));
        }),
        ("lifecycle", |s| {
            s["lifecycle"] =
                json!({"postStart": {"exec": {"command": ["nft", "flush", "ruleset"]}}});
        }),
    ];
    for (field, change) in changes {
        let mut pod = exact.clone();
        change(&mut pod["spec"]["containers"][1]);
        let (stored, warnings) = admitted(&server, &pod).await;
        assert_real_sidecar(&stored, POLICY);
        let sidecar = &stored["spec"]["initContainers"][1];
        assert_eq!(
            env(sidecar, "OPENSANDBOX_EGRESS_TOKEN"),
            Some(&*token),
            "{field}"
        );
        assert_warned(&warnings, "replaced container 'egress'", field);
        assert!(
            stored["metadata"]["annotations"]
                .get("opensandbox.io/egress-auth-token")
                .is_none(),
            "{field}"
        );
        assert_settled(&server, &stored).await;
    }
    server.shutdown().await;
}

/// contract: coexist.kept, coexist.risks
///
/// Without a network policy, a pod the server built keeps its sidecar
/// whatever it holds beside it; a shape that could undo the server's policy
/// is warned about and counted, never denied or changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_pod_that_could_undo_its_policy_is_kept_warned_about_and_counted() {
    let server = PolicyServer::start().await;
    let mut pod = server_like(&server, "risky").await;
    pod["metadata"]["annotations"]
        .as_object_mut()
        .unwrap()
        .remove("opensandbox.io/network-policy");
    pod["spec"]["containers"][0]["securityContext"]["privileged"] = json!(true);
    let skips = [("reason", "server-completed")];
    let before = server
        .metric("sandbox_webhook_admission_skips_total", &skips)
        .await;
    let (response, _) = server.answer(&pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response.get("patch").is_none(), "{response}");
    assert_eq!(
        response["warnings"],
        json!([
            "container 'sandbox' is privileged: it could undo the rules of the egress sidecar OpenSandbox's server built"
        ])
    );
    let risks = [("risk", "privileged")];
    assert_eq!(
        server
            .metric("sandbox_webhook_server_completed_risks_total", &risks)
            .await,
        1
    );
    assert_eq!(
        server
            .metric("sandbox_webhook_admission_skips_total", &skips)
            .await,
        before + 1
    );
    server.shutdown().await;
}
