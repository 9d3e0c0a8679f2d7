//! contract: egress.drop-net-raw, execd.drop-net-admin, egress.capability-names,
//! egress.policy-file, egress.startup-probe
//!
//! Issue 41's attacks on the real node (containerd and runc), one pod per
//! attack, each run as hostile code in a sandbox would run it: `peek` in
//! the sandbox's image (tests/image/node/peek) tries, and the egress
//! stand-in's log says what its rules and API saw. A scenario passes when
//! the attack fails (or the pod is refused), and otherwise fails with the
//! attack's evidence: run against the build before issue 41, each shows
//! the attack working.
//!
//! 1. A root sandbox captures the kubelet's probe with a packet socket
//!    (NET_RAW, granted by the runtime unless dropped), reads the token in
//!    its header and posts an allow-all policy to the sidecar.
//! 2. A second container adds `net_admın` (dotless ı), which containerd
//!    grants as CAP_NET_ADMIN, and deletes the sidecar's rule.
//! 4. The sandbox writes `/opt/opensandbox/policy.json`, where
//!    `OPENSANDBOX_EGRESS_POLICY_FILE` points: the sidecar loads it over
//!    its rules when it next starts.
//! 8. The app connects to a denied address as soon as it starts: before
//!    the sidecar's rules exist unless the sidecar's startup probe holds it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::json;

use crate::harness::{Env, PRIVILEGED, Result, check, lines_with, logged, wait_for};
use crate::node::{NET_ADMIN, NET_RAW, has_capability, pid_of, pod_ip};
use common::pods::{SandboxPod, container_status};

/// What the apiserver answered a create of `pod`: the stored pod, or the
/// refusal's code and message.
async fn create(env: &Env, ns: &str, pod: &Pod) -> Result<std::result::Result<Pod, (u16, String)>> {
    match env.pods(ns).create(&PostParams::default(), pod).await {
        Ok(p) => Ok(Ok(p)),
        Err(kube::Error::Api(e)) => Ok(Err((e.code, e.message))),
        Err(e) => Err(e.into()),
    }
}

/// Runs sandbox `name` with `policy`, its main container running `script`
/// (which ends by reporting), once Ready: the logs of its main container
/// (to the report) and of its sidecar.
async fn run_with_policy(
    env: &Env,
    ns: &str,
    name: &str,
    script: &str,
    policy: &str,
) -> Result<(String, String)> {
    let sandbox = env
        .sandbox(name, script)?
        .annotation("network-policy", policy);
    let Ok(_) = create(env, ns, &sandbox.pod()).await? else {
        return Err("an ordinary policy pod was refused".into());
    };
    env.ready(ns, name, Duration::from_secs(90)).await?;
    let main = env
        .logs_with(ns, name, "sandbox", "sandbox: reported")
        .await?;
    let egress = env.logs(ns, name, "egress")?;
    Ok((main, egress))
}

/// An egress policy that denies `target` (a CIDR) and applies `default`
/// (`allow`, `deny`) to everything else.
fn denying(default: &str, target: &str) -> String {
    json!({"defaultAction": default, "egress": [{"action": "deny", "target": target}]}).to_string()
}

/// The attack's pod was refused as it must be: `Err` unless with 403 and a
/// message that names each of `names`.
fn refused(code: u16, message: &str, names: &[&str]) -> Result<()> {
    check(
        code == 403 && names.iter().all(|n| message.contains(n)),
        format!("refused with {code}: {message}"),
    )?;
    println!("    refused: {code} {message}");
    Ok(())
}

/// The lines of `log` that carry `prefix`, for an error message.
fn evidence(log: &str, prefix: &str) -> String {
    lines_with(log, prefix).join("\n      ")
}

/// Item 1: without NET_RAW the sandbox's packet socket is refused, so it
/// never sees the probe's token, and the sidecar's API never hears from it.
pub(crate) async fn sniffing_the_probe_yields_no_token(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    let script = "peek caps 2>&1 | sed 's/^/sandbox: /'; \
        out=$(peek sniff 18080 20 2>&1); echo \"$out\" | sed 's/^/sandbox: /'; \
        tok=$(echo \"$out\" | sed -n 's/^token=//p'); \
        if [ -n \"$tok\" ]; then peek post http://127.0.0.1:18080/policy \"$tok\" \
            '{\"defaultAction\":\"allow\",\"egress\":[]}' 2>&1 | sed 's/^/sandbox: /'; fi; \
        echo sandbox: reported; exec sleep 3600";
    let policy = denying("deny", "203.0.113.7/32");
    let (main, egress) = run_with_policy(env, &ns, "sniffer", script, &policy).await?;
    check(
        !main.contains("peek: sniff: captured") && !egress.contains("policy API: policy replaced"),
        format!(
            "the sandbox sniffed the token and undid its policy:\n      {}\n    the sidecar:\n      {}",
            evidence(&main, "sandbox: "),
            evidence(&egress, "policy API")
        ),
    )?;
    logged(
        &main,
        "peek: sniff: packet socket: operation not permitted",
        "the packet socket refused",
    )?;
    let cap_eff = lines_with(&main, "peek: caps: CapEff").join("");
    check(
        !cap_eff.contains("cap_net_raw")
            && !cap_eff.contains("cap_net_admin")
            && !cap_eff.is_empty(),
        format!("the sandbox's capabilities: {cap_eff}"),
    )?;
    println!("    sandbox: {}", cap_eff.trim_start_matches("sandbox: "));
    println!(
        "    sandbox: peek sniff 18080 -> packet socket: operation not permitted; the sidecar's API saw no request"
    );
    Ok(())
}

/// Item 2: `net_admın` is NET_ADMIN to containerd, so the pod is refused;
/// admitted, its container would delete the sidecar's rule.
pub(crate) async fn unicode_net_admin_is_refused(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    let policy = denying("allow", "203.0.113.7/32");
    let helper = json!({
        "name": "helper", "image": env.var("BUSYBOX_IMAGE")?, "imagePullPolicy": "Never",
        "command": ["sh", "-c", "sleep 5; peek caps 2>&1 | sed 's/^/helper: /'; \
            peek unroute 203.0.113.7/32 2>&1 | sed 's/^/helper: /'; echo helper: reported; exec sleep 3600"],
        "securityContext": {"capabilities": {"add": ["net_adm\u{131}n"]}},
    });
    let mut pod = env
        .sandbox("dotless", "echo sandbox: started; exec sleep 3600")?
        .annotation("network-policy", &policy)
        .pod();
    pod.spec
        .as_mut()
        .ok_or("no spec")?
        .containers
        .push(serde_json::from_value(helper)?);
    if let Err((code, message)) = create(env, &ns, &pod).await? {
        return refused(code, &message, &["NET_ADMIN", "helper"]);
    }
    env.ready(&ns, "dotless", Duration::from_secs(90)).await?;
    let log = env
        .logs_with(&ns, "dotless", "helper", "helper: reported")
        .await?;
    Err(format!(
        "admitted, and the container holds NET_ADMIN:\n      {}",
        evidence(&log, "helper: ")
    )
    .into())
}

/// Item 4: a policy file where the sandbox writes is refused; admitted,
/// the sidecar would load the sandbox's policy when it next starts.
pub(crate) async fn a_policy_file_the_sandbox_writes_is_refused(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    let policy = denying("deny", "203.0.113.7/32");
    let script = "echo '{\"defaultAction\":\"allow\",\"egress\":[]}' >/opt/opensandbox/policy.json \
        && echo sandbox: wrote /opt/opensandbox/policy.json; echo sandbox: reported; exec sleep 3600";
    let sandbox = env
        .sandbox("policy-file", script)?
        .annotation("network-policy", &policy)
        .annotation(
            "egress-env",
            r#"{"OPENSANDBOX_EGRESS_POLICY_FILE":"/opt/opensandbox/policy.json"}"#,
        );
    let stored = match create(env, &ns, &sandbox.pod()).await? {
        Err((code, message)) => {
            return refused(code, &message, &["OPENSANDBOX_EGRESS_POLICY_FILE"]);
        }
        Ok(p) => p,
    };
    let name = stored.metadata.name.clone().unwrap_or_default();
    let p = env.ready(&ns, &name, Duration::from_secs(90)).await?;
    let main = env
        .logs_with(&ns, &name, "sandbox", "sandbox: reported")
        .await?;
    // The sidecar restarts, as any process may (an OOM kill, a node's
    // hiccup): killed here from the host.
    let pid = pid_of(env, &p, "egress")?;
    crate::harness::run_command({
        let mut kill = std::process::Command::new("kill");
        kill.args(["-KILL", &pid.to_string()]);
        kill
    })?;
    let pods = env.pods(&ns);
    wait_for(
        "the sidecar to restart",
        Duration::from_secs(90),
        async || {
            let p = pods.get(&name).await?;
            let restarted =
                container_status(&p, "egress").is_some_and(|c| c.restart_count > 0 && c.ready);
            Ok(restarted.then_some(()))
        },
    )
    .await?;
    let egress = env.logs(&ns, &name, "egress")?;
    Err(format!(
        "admitted; the sandbox wrote the policy file and the restarted sidecar took it:\n      {}\n      {}",
        evidence(&main, "sandbox: "),
        evidence(&egress, "loaded egress policy")
    )
    .into())
}

/// Item 8: the app starts once the sidecar's rules are in place, so its
/// first connection to a denied address is refused.
pub(crate) async fn the_app_starts_after_the_rules(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    // A peer on the node's bridge that answers, outside any sandbox.
    let target = SandboxPod::new("target")
        .not_a_sandbox()
        .image(env.var("BUSYBOX_IMAGE")?)
        .command(&["httpd", "-f", "-p", "8080", "-h", "/"])
        .main_field(
            "readinessProbe",
            json!({"tcpSocket": {"port": 8080}, "periodSeconds": 1}),
        );
    let target = env
        .on_node(target)?
        .spec_field("terminationGracePeriodSeconds", json!(1));
    env.pods(&ns)
        .create(&PostParams::default(), &target.pod())
        .await?;
    let target = env.ready(&ns, "target", Duration::from_secs(60)).await?;
    let ip = pod_ip(&target)?;
    // The control: the host reaches it.
    std::net::TcpStream::connect_timeout(&format!("{ip}:8080").parse()?, Duration::from_secs(2))
        .map_err(|e| format!("the host cannot reach the target {ip}:8080: {e}"))?;

    let policy = denying("allow", &format!("{ip}/32"));
    let script = format!(
        "peek connect {ip}:8080 2 2>&1 | sed 's/^/sandbox: /'; echo sandbox: reported; exec sleep 3600"
    );
    let (main, egress) = run_with_policy(env, &ns, "early", &script, &policy).await?;
    check(
        !main.contains(": connected"),
        format!(
            "the app connected to {ip}, which the policy denies, before the rules existed:\n      {}\n    the sidecar:\n      {}",
            evidence(&main, "sandbox: "),
            evidence(&egress, "rules in place")
        ),
    )?;
    logged(&main, "connect: permission denied", "the denied connection")?;
    println!(
        "    the app's first connection to {ip}:8080 (denied by the policy): {}",
        lines_with(&main, "peek: connect").join("")
    );
    // The main container never held what could undo that.
    let pid = pid_of(env, &env.pods(&ns).get("early").await?, "sandbox")?;
    let cap = crate::node::status_field(pid, "CapEff")?;
    check(
        !has_capability(&cap, NET_ADMIN)? && !has_capability(&cap, NET_RAW)?,
        format!("the main container's CapEff {cap}"),
    )?;
    Ok(())
}
