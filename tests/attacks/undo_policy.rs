//! contract: execd.drop-net-admin, egress.drop-net-raw, egress.capability-names,
//! egress.token-exposure, egress.policy-file, egress.ptrace, egress.nameservers,
//! egress.windows, egress.startup-probe, select.pod-update, egress.update-images,
//! egress.ephemeral
//!
//! A pod that asks for egress control and then tries to undo it from its
//! own spec, from the sandbox's code or after admission, against the real
//! server on loopback (issue 41): whatever the pod writes, no container but
//! the webhook's sidecar holds `NET_RAW`, `NET_ADMIN`, `SYS_PTRACE` over
//! the sidecar or the sidecar's token while the pod runs. `tests/node_e2e`
//! (`policy.rs`) shows the same attacks on a real node.

use common::pods::SandboxPod;
use serde_json::{Value, json};

use crate::answers::{PolicyServer, applied, policy_pod};

/// A pod's main container given `capabilities` (`add`, `drop`).
trait MainCapabilities {
    fn main_capabilities(self, capabilities: Value) -> Self;
}

impl MainCapabilities for SandboxPod {
    fn main_capabilities(self, capabilities: Value) -> Self {
        self.main_field("securityContext", json!({ "capabilities": capabilities }))
    }
}

const TOKEN_KEY: &str = "opensandbox.io/egress-auth-token";
/// A token as the control plane chooses one (32 URL-safe characters).
const CHOSEN: &str = "Zx8-q1Lr0_kPw3Ym5nTb7vUc9dHs2fGa";

/// `pod` as stored after the answer, which must allow it; admitted again,
/// it needs nothing.
async fn admitted(server: &PolicyServer, pod: &Value) -> Value {
    let (response, body) = server.answer(pod).await;
    assert_eq!(response["allowed"], true, "{response}");
    let stored = applied(pod, &body);
    let (again, _) = server.answer(&stored).await;
    assert!(again.get("patch").is_none(), "not settled: {again}");
    stored
}

/// The denial's code and message; fails if `pod` is admitted.
async fn denied(server: &PolicyServer, pod: &Value) -> (u64, String) {
    let (response, _) = server.answer(pod).await;
    assert_eq!(response["allowed"], false, "admitted: {pod}");
    let status = &response["status"];
    (
        status["code"].as_u64().unwrap(),
        status["message"].as_str().unwrap().to_owned(),
    )
}

async fn assert_denied(server: &PolicyServer, pod: &Value, code: u64, says: &[&str]) {
    let (got, message) = denied(server, pod).await;
    assert_eq!(got, code, "{message}");
    for s in says {
        assert!(message.contains(s), "{s:?} not in: {message}");
    }
}

fn with_container(pod: &SandboxPod, c: Value) -> Value {
    let mut pod = pod.json();
    pod["spec"]["containers"].as_array_mut().unwrap().push(c);
    pod
}

fn caps(c: &Value) -> (Vec<&str>, Vec<&str>) {
    let list = |l: &str| {
        c["securityContext"]["capabilities"][l]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    };
    (list("add"), list("drop"))
}

/// Issue 41 items 1 and 8: an ordinary policy pod. Every container but the
/// sidecar drops NET_RAW (which the runtime grants by default, and with
/// which root in the sandbox sniffs the probe's token) and NET_ADMIN, in
/// every list, merged with what each drops already; the native sidecar
/// holds the app back until it answers /healthz.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_container_but_the_sidecar_loses_net_raw_and_net_admin() {
    let server = PolicyServer::start().await;
    let pod = policy_pod("ordinary")
        .main_capabilities(json!({"drop": ["MKNOD"]}))
        .spec_field(
            "initContainers",
            json!([{"name": "fetch", "image": "curl", "securityContext": {"runAsUser": 1000}}]),
        );
    let pod = with_container(
        &pod,
        json!({"name": "helper", "image": "busybox", "securityContext": {"capabilities": {"drop": ["cap_net_raw"]}}}),
    );
    let stored = admitted(&server, &pod).await;
    let spec = &stored["spec"];
    let mut seen = Vec::new();
    for c in spec["initContainers"]
        .as_array()
        .unwrap()
        .iter()
        .chain(spec["containers"].as_array().unwrap())
    {
        let name = c["name"].as_str().unwrap();
        seen.push(name);
        let (add, drop) = caps(c);
        match name {
            "egress" => assert_eq!((add, drop), (vec!["NET_ADMIN"], vec![]), "{c}"),
            // Privileged, first, and done before the sidecar starts.
            "execd-installer" => assert_eq!(c["securityContext"]["privileged"], true),
            _ => {
                assert!(
                    drop.contains(&"NET_ADMIN") && drop.contains(&"NET_RAW"),
                    "{name} keeps NET_ADMIN or NET_RAW: {c}"
                );
                assert!(add.is_empty(), "{c}");
            }
        }
    }
    assert_eq!(
        seen,
        ["execd-installer", "egress", "fetch", "sandbox", "helper"]
    );
    let (_, main_drop) = caps(&spec["containers"][0]);
    assert_eq!(main_drop, ["MKNOD", "NET_ADMIN", "NET_RAW"]);
    // `cap_net_raw` is no drop to containerd: NET_RAW goes beside it.
    let (_, helper_drop) = caps(&spec["containers"][1]);
    assert_eq!(helper_drop, ["cap_net_raw", "NET_ADMIN", "NET_RAW"]);
    assert_eq!(
        spec["initContainers"][2]["securityContext"],
        json!({"runAsUser": 1000, "capabilities": {"drop": ["NET_ADMIN", "NET_RAW"]}})
    );
    let sidecar = &spec["initContainers"][1];
    assert_eq!(
        sidecar["startupProbe"]["httpGet"],
        sidecar["readinessProbe"]["httpGet"]
    );
    assert_eq!(sidecar["startupProbe"]["periodSeconds"], 1);
}

/// Item 2: a capability is what the runtime reads. containerd grants
/// `"CAP_" + strings.ToUpper(name)` (Go upper-cases by Unicode: `ı` is
/// `I`), CRI-O takes a `cap_` prefix of any case: each spelling is
/// refused on any container, init container or the main one, and a main
/// container that "drops" `cap_net_admin` while adding `net_admın` keeps
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_judged_as_runtimes_read_them() {
    let server = PolicyServer::start().await;
    for (spelled, read_as) in [
        ("net_adm\u{131}n", "NET_ADMIN"),
        ("NET_ADM\u{131}N", "NET_ADMIN"),
        ("cap_net_admin", "NET_ADMIN"),
        ("Cap_Net_Raw", "NET_RAW"),
        ("cap_all", "ALL"),
        (" all ", "ALL"),
    ] {
        let sc = json!({"capabilities": {"add": [spelled]}});
        let second = with_container(
            &policy_pod("second"),
            json!({"name": "second", "image": "busybox", "securityContext": sc}),
        );
        let init = policy_pod("init")
            .spec_field(
                "initContainers",
                json!([{"name": "prep", "image": "busybox", "securityContext": sc}]),
            )
            .json();
        let main = policy_pod("main")
            .main_capabilities(json!({"add": [spelled], "drop": ["cap_net_admin"]}))
            .json();
        for (pod, who) in [
            (second, "container 'second'"),
            (init, "init container 'prep'"),
            (main, "container 'sandbox'"),
        ] {
            assert_denied(&server, &pod, 403, &[who, read_as, "capabilities.add"]).await;
        }
    }
    // Shapes that grant nothing stay admitted.
    let fine = with_container(
        &policy_pod("fine"),
        json!({"name": "second", "image": "busybox",
               "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE", "NET_ADM\u{130}N"]}}}),
    );
    admitted(&server, &fine).await;
}

/// Item 3: the token reaches only the sidecar. The downward API exposes
/// annotations (one, or all in a volume), and a pod that chooses its
/// token may not copy it anywhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_reaches_no_other_container() {
    let server = PolicyServer::start().await;
    let field = |path: &str| json!({"fieldRef": {"fieldPath": path}});
    let env_ref = |path: &str| {
        policy_pod("env-ref")
            .main_field("env", json!([{"name": "T", "valueFrom": field(path)}]))
            .json()
    };
    let token_ref = format!("metadata.annotations['{TOKEN_KEY}']");
    assert_denied(
        &server,
        &env_ref(&token_ref),
        403,
        &["container 'sandbox' (env[0])", &token_ref, "downward API"],
    )
    .await;
    let volume = |v: Value| {
        policy_pod("vol")
            .spec_field("volumes", json!([v]))
            .main_field(
                "volumeMounts",
                json!([{"name": "podinfo", "mountPath": "/etc/podinfo"}]),
            )
            .json()
    };
    let all = json!({"name": "podinfo", "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}});
    assert_denied(
        &server,
        &volume(all),
        403,
        &["volume 'podinfo'", "metadata.annotations"],
    )
    .await;
    let projected = json!({"name": "podinfo", "projected": {"sources": [
        {"downwardAPI": {"items": [{"path": "t", "fieldRef": {"fieldPath": token_ref}}]}}]}});
    assert_denied(&server, &volume(projected), 403, &["volume 'podinfo'"]).await;

    // A token the pod chose, copied where the sandbox reads it.
    let chosen = policy_pod("chosen").annotation("egress-auth-token", CHOSEN);
    let copied_env = chosen
        .clone()
        .main_field("env", json!([{"name": "EGRESS", "value": CHOSEN}]))
        .json();
    assert_denied(
        &server,
        &copied_env,
        403,
        &["container 'sandbox' (env[0].value)", TOKEN_KEY],
    )
    .await;
    let copied_args = chosen
        .clone()
        .main_field("args", json!(["--token", format!("Bearer {CHOSEN}")]))
        .json();
    assert_denied(&server, &copied_args, 403, &["(args[1])"]).await;
    let init_copy = chosen
        .clone()
        .spec_field(
            "initContainers",
            json!([{"name": "i", "image": "x", "command": [CHOSEN]}]),
        )
        .json();
    assert_denied(
        &server,
        &init_copy,
        403,
        &["init container 'i' (command[0])"],
    )
    .await;
    let relabelled = chosen
        .clone()
        .annotation("innocent", CHOSEN)
        .main_field(
            "env",
            json!([{"name": "T", "valueFrom": field("metadata.annotations['opensandbox.io/innocent']")}]),
        )
        .json();
    assert_denied(&server, &relabelled, 403, &["opensandbox.io/innocent"]).await;

    // What hands out no token is admitted: another annotation, the labels,
    // the pod's name; and the chosen token in the sidecar only.
    let harmless = policy_pod("harmless")
        .annotation("team", "a")
        .main_field(
            "env",
            json!([{"name": "A", "valueFrom": field("metadata.annotations['opensandbox.io/team']")},
                   {"name": "N", "valueFrom": field("metadata.name")}]),
        )
        .spec_field(
            "volumes",
            json!([{"name": "l", "downwardAPI": {"items": [{"path": "l", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]),
        )
        .json();
    admitted(&server, &harmless).await;
    let stored = admitted(&server, &chosen.json()).await;
    assert_eq!(stored["metadata"]["annotations"][TOKEN_KEY], CHOSEN);
}

/// Item 4: the sidecar loads `OPENSANDBOX_EGRESS_POLICY_FILE` over its
/// rules when it starts; the sandbox may not be able to write it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_file_is_out_of_the_sandboxs_reach() {
    let server = PolicyServer::start().await;
    let file = |path: &str| {
        policy_pod("policy-file")
            .annotation(
                "egress-env",
                &json!({"OPENSANDBOX_EGRESS_POLICY_FILE": path}).to_string(),
            )
            .json()
    };
    for (path, says) in [
        ("/opt/opensandbox/policy.json", "/opt/opensandbox"),
        ("/opt//opensandbox/../opensandbox/p", "/opt/opensandbox"),
        ("/dev/shm/policy.json", "/dev"),
        ("/etc/resolv.conf", "every container of the pod"),
        ("/proc/1/root/tmp/p", "/proc"),
        ("policy.json", "relative"),
    ] {
        assert_denied(
            &server,
            &file(path),
            403,
            &["OPENSANDBOX_EGRESS_POLICY_FILE", says],
        )
        .await;
    }
    let stored = admitted(&server, &file("/var/lib/egress/policy.json")).await;
    let env = stored["spec"]["initContainers"][1]["env"].to_string();
    assert!(env.contains("/var/lib/egress/policy.json"), "{env}");
}

/// Items 5, 6 and 7: SYS_PTRACE where the sidecar's processes are seen,
/// nameservers the pod chose in dns+nft mode, and a Windows platform.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ptrace_nameservers_and_windows_cannot_widen_the_policy() {
    let server = PolicyServer::start().await;
    for share in ["shareProcessNamespace", "hostPID"] {
        let field = format!("spec.{share}");
        for spelled in ["SYS_PTRACE", "\u{17f}ys_ptrace"] {
            let pod = policy_pod("ptrace")
                .spec_field(share, json!(true))
                .main_capabilities(json!({"add": [spelled]}))
                .json();
            assert_denied(&server, &pod, 403, &["SYS_PTRACE", &field]).await;
        }
    }
    // SYS_PTRACE alone sees only its own container's processes.
    let own = policy_pod("ptrace-alone")
        .main_capabilities(json!({"add": ["SYS_PTRACE"]}))
        .json();
    admitted(&server, &own).await;

    let dns = |mode: &str| {
        policy_pod("dns")
            .annotation("egress-mode", mode)
            .spec_field("dnsPolicy", json!("None"))
            .spec_field("dnsConfig", json!({"nameservers": ["203.0.113.53"]}))
            .json()
    };
    assert_denied(
        &server,
        &dns("dns+nft"),
        403,
        &["spec.dnsConfig.nameservers", "dns+nft"],
    )
    .await;
    // DNS filtering alone opens no address to the nameservers.
    admitted(&server, &dns("dns")).await;

    let windows = policy_pod("windows")
        .annotation("platform", "windows/amd64")
        .json();
    assert_denied(
        &server,
        &windows,
        400,
        &["opensandbox.io/platform", "Windows"],
    )
    .await;
}

// Item 9, after admission: UPDATEs and ephemeral containers.
mod after_admission;
