//! contract: execd.installer, execd.command-wrap, execd.env-id, egress.native, egress.token
//!
//! Scenario 2: sandboxes run. What the webhook injected (execd and egress) is
//! seen working on the real node, from the inside (the main container's
//! log, `kubectl exec`), from the sidecar's own log, from the kubelet's
//! probe and from the host over the bridge:
//! - with a network policy: the installer completes; execd answers inside
//!   the pod; the main command ran under bootstrap.sh with `EXECD` and
//!   `OPENSANDBOX_ID`, without NET_ADMIN or NET_RAW, with IPv6 disabled in the pod's
//!   network namespace; the installer's optional copies (bwrap, the session
//!   gate) are there; the egress sidecar is Ready through its probe with the
//!   token header and its `NET_ADMIN` operation took effect;
//! - in a Pod Security `restricted` namespace, without a policy: it runs.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::api::PostParams;
use serde_json::json;

use crate::harness::{ENFORCE, Env, P, PRIVILEGED, Result, check, lines_with, logged};
use crate::node::{NET_ADMIN, NET_RAW, egress_healthz, has_capability, pod_ip};
use common::cluster::wait_for_object;
use common::pods::{SandboxPod, annotation, check_pong, container_status, execd_ping};

/// What the sandbox's main command reports, once, then it sleeps.
const REPORT: &str = "echo sandbox: started; env | sort | sed 's/^/sandbox: env /'; \
    echo \"sandbox: $(grep CapEff /proc/self/status)\"; \
    echo \"sandbox: disable_ipv6=$(cat /proc/sys/net/ipv6/conf/all/disable_ipv6 2>&1)\"; \
    ls /opt/opensandbox | sed 's/^/sandbox: installed /'; \
    echo sandbox: reported; exec sleep 3600";

/// The Pod Security level a namespace enforces.
const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"example.com"}]}"#;

pub(crate) async fn sandbox_with_policy_runs(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    let sandbox = env
        .sandbox("policed", REPORT)?
        .annotation("network-policy", POLICY);
    let (p, main) = run(env, &ns, &sandbox).await?;
    let cap = main_capabilities(&main)?;
    check(
        !has_capability(&cap, NET_ADMIN)? && !has_capability(&cap, NET_RAW)?,
        format!("the main container has NET_ADMIN or NET_RAW (CapEff {cap})"),
    )?;
    logged(
        &main,
        "sandbox: disable_ipv6=1",
        "IPv6 disabled in the pod's network namespace",
    )?;
    println!(
        "    main: ran under bootstrap.sh, EXECD set, CapEff {cap} (no NET_ADMIN, no NET_RAW), disable_ipv6=1"
    );

    execd_answers(env, &ns, "policed")?;
    egress_works(env, &ns, &p)?;
    egress_needs_net_admin(env, &ns).await?;

    // The id in the env (contract: execd.env-id) and the installer's optional
    // copies (contract: execd.install-script).
    let mut missing = Vec::new();
    let want_id = format!("sandbox: env OPENSANDBOX_ID={}", "policed");
    for (needle, what) in [
        (
            want_id.as_str(),
            "OPENSANDBOX_ID in the main container's env",
        ),
        ("sandbox: installed bwrap", "the installer's copy of bwrap"),
        (
            "sandbox: installed opensandbox-session-gate",
            "the installer's copy of the session gate",
        ),
    ] {
        if logged(&main, needle, what).is_err() {
            missing.push(what);
        }
    }
    check(
        missing.is_empty(),
        format!(
            "missing: {}; the main container saw: {:?}",
            missing.join(", "),
            lines_with(&main, "sandbox: ")
        ),
    )
}

/// Creates `sandbox` in `ns` and waits until it is Ready; the pod and its
/// main container's log, which shows the installer completed and the
/// command ran under bootstrap.sh with `EXECD` set.
async fn run(env: &Env, ns: &str, sandbox: &SandboxPod) -> Result<(Pod, String)> {
    let pod = sandbox.pod();
    let name = pod.metadata.name.clone().unwrap_or_default();
    env.pods(ns).create(&PostParams::default(), &pod).await?;
    let p = env.ready(ns, &name, Duration::from_secs(60)).await?;
    installer_completed(&p)?;
    let main = env
        .logs_with(ns, &name, "sandbox", "sandbox: reported")
        .await?;
    logged(
        &main,
        "bootstrap.sh: starting /opt/opensandbox/execd in the background, then: sh -c",
        "bootstrap.sh wrapping the main command",
    )?;
    logged(
        &main,
        "sandbox: env EXECD=/opt/opensandbox/execd",
        "EXECD in the main container's env",
    )?;
    Ok((p, main))
}

/// The status of init container `name`.
fn init_status<'a>(p: &'a Pod, name: &str) -> Result<&'a ContainerStatus> {
    container_status(p, name).ok_or_else(|| format!("no status of init container {name}").into())
}

/// The installer init container ran to completion.
fn installer_completed(p: &Pod) -> Result<()> {
    let installer = init_status(p, "execd-installer")?;
    let done = installer.state.as_ref().and_then(|s| s.terminated.as_ref());
    check(
        done.is_some_and(|t| t.exit_code == 0 && t.reason.as_deref() == Some("Completed")),
        format!("execd-installer did not complete: {:?}", installer.state),
    )
}

/// The hex `CapEff` the main command printed.
fn main_capabilities(log: &str) -> Result<String> {
    log.lines()
        .find_map(|l| l.strip_prefix("sandbox: CapEff:"))
        .map(|v| v.trim().to_owned())
        .ok_or_else(|| "the main container printed no CapEff".into())
}

/// execd answers on 44772 inside the pod (through `kubectl exec`, which the
/// kubelet authorizes by the apiserver's client certificate).
fn execd_answers(env: &Env, ns: &str, pod: &str) -> Result<()> {
    let out = env.kubectl(&execd_ping(ns, pod, "sandbox", &[]))?;
    check_pong(&out)?;
    println!(
        "    execd answered inside the pod (kubectl exec ... wget 127.0.0.1:44772/ping): {}",
        out.trim()
    );
    Ok(())
}

/// The sidecar is Ready through its probe (token header), refuses the
/// probe path without the token, did its `NET_ADMIN` operation (the main
/// container sees the MTU it set), and has `NET_ADMIN` itself.
fn egress_works(env: &Env, ns: &str, p: &Pod) -> Result<()> {
    let name = p.metadata.name.as_deref().unwrap_or("?");
    let egress = init_status(p, "egress")?;
    check(egress.ready, "the egress sidecar is not Ready")?;
    let log = env.logs(ns, name, "egress")?;
    logged(
        &log,
        "healthz: 200",
        "the sidecar answering the kubelet's probe",
    )?;
    logged(&log, "(\"kube-probe/", "the kubelet's probe")?;
    logged(
        &log,
        "NET_ADMIN: set the MTU of lo to 65520",
        "the sidecar's NET_ADMIN operation",
    )?;
    logged(&log, "NET_ADMIN=yes", "NET_ADMIN in the sidecar's CapEff")?;
    logged(
        &log,
        "env OPENSANDBOX_EGRESS_RULES=",
        "the policy in the sidecar's env",
    )?;

    let token =
        annotation(p, &format!("{P}/egress-auth-token")).ok_or("no egress token annotation")?;
    let ip = pod_ip(p)?;
    let without = egress_healthz(&ip, None)?;
    let wrong = egress_healthz(&ip, Some("not-the-token"))?;
    let with = egress_healthz(&ip, Some(token))?;
    check(
        (without, wrong, with) == (401, 401, 200),
        format!(
            "{ip}:18080/healthz answered {without} without the token, {wrong} with a wrong one, {with} with it"
        ),
    )?;
    let mtu = env.kubectl(&[
        "exec",
        "-n",
        ns,
        name,
        "-c",
        "sandbox",
        "--",
        "cat",
        "/sys/class/net/lo/mtu",
    ])?;
    check(
        mtu.trim() == "65520",
        format!("the main container sees lo's MTU {}", mtu.trim()),
    )?;
    println!(
        "    egress: Ready through the probe with its token (host: 401 without it, 200 with it at {ip}:18080); NET_ADMIN set lo's MTU to 65520, seen from the main container"
    );
    Ok(())
}

/// The control: the same egress image without `NET_ADMIN` (a plain pod, not
/// a sandbox, so the webhook leaves it alone) fails at once, loudly.
async fn egress_needs_net_admin(env: &Env, ns: &str) -> Result<()> {
    let pod = SandboxPod::new("no-net-admin")
        .not_a_sandbox()
        .image(env.var("EGRESS_IMAGE")?)
        .command(&["/egress"])
        .main_field(
            "env",
            json!([{"name": "OPENSANDBOX_EGRESS_TOKEN", "value": "t"}]),
        )
        .main_field(
            "securityContext",
            json!({"capabilities": {"drop": ["ALL"]}}),
        )
        .spec_field("restartPolicy", json!("Never"));
    let pod = env.on_node(pod)?;
    let pods = env.pods(ns);
    pods.create(&PostParams::default(), &pod.pod()).await?;
    let (_, code) = wait_for_object(
        &pods,
        "no-net-admin",
        "the egress image without NET_ADMIN to exit",
        Duration::from_secs(60),
        |p| {
            let status = p.status.as_ref()?.container_statuses.as_ref()?.first()?;
            Some(status.state.as_ref()?.terminated.as_ref()?.exit_code)
        },
    )
    .await?;
    let log = env.logs(ns, "no-net-admin", "app")?;
    logged(
        &log,
        "FATAL: setting the MTU of lo needs NET_ADMIN",
        "the egress image without NET_ADMIN",
    )?;
    check(
        code == 1,
        format!("the egress image without NET_ADMIN exited {code}"),
    )?;
    println!(
        "    control: the egress image without NET_ADMIN exits 1 (FATAL: setting the MTU of lo needs NET_ADMIN)"
    );
    Ok(())
}

pub(crate) async fn restricted_sandbox_runs(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[(ENFORCE, "restricted")]).await?;
    let sandbox = env
        .sandbox("restricted", REPORT)?
        .spec_field(
            "securityContext",
            json!({"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000,
                               "seccompProfile": {"type": "RuntimeDefault"}}),
        )
        .main_field(
            "securityContext",
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}),
        );
    let (_, main) = run(env, &ns, &sandbox).await?;
    let cap = main_capabilities(&main)?;
    check(
        cap == "0000000000000000",
        format!("the restricted sandbox has capabilities {cap}"),
    )?;
    execd_answers(env, &ns, "restricted")?;
    println!(
        "    restricted namespace: admitted with injection, Running and Ready, no capabilities, execd answers"
    );
    Ok(())
}
