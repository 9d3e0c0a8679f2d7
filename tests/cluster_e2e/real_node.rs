//! Scenario 6: the README's sandboxes on the real node that `cluster.sh up`
//! brings (the manifests are read from the README, so the examples are what
//! runs). The host webhook injects the pod with the node's stand-in execd
//! image, and it runs: its log shows the command under bootstrap.sh with
//! `EXECD` set, and execd answers inside it through `kubectl exec`. The
//! README's agent-sandbox Sandbox (`up` installs agent-sandbox) gets its
//! pod from agent-sandbox's controller, injected, with the `expires-at` of
//! its `P/timeout`, and the controller's plan for it is to tell the
//! Sandbox (`shutdown-owner`; `tests/node_e2e` waits for that to happen).

use std::time::Duration;

use crate::harness::{Env, P, Result, annotation, check, check_at, init_names, repo};
use common::cluster::{is_ready, wait_for_object, wait_noting};
use common::pods::{check_pong, controller_owner, created_second, execd_ping};

pub(crate) async fn readme_sandbox_runs_on_the_real_node(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[]).await?;
    let readme = std::fs::read_to_string(repo().join("README.md"))?;
    let manifests: Vec<&str> = readme
        .split("kubectl apply -f - <<'EOF'\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("\nEOF\n").map(|(yaml, _)| yaml))
        .collect();
    let [manifest, sandbox] = manifests[..] else {
        return Err(format!(
            "README.md has {} `kubectl apply -f - <<'EOF'` examples, not 2 (a Pod, a Sandbox)",
            manifests.len()
        )
        .into());
    };
    env.kubectl(&["apply", "-n", &ns, "-f", "-"], manifest)?;
    let pods = env.pods(&ns);
    let (p, ()) = wait_for_object(
        &pods,
        "hello",
        "the README's pod Ready",
        Duration::from_secs(60),
        |p| is_ready(p).then_some(()),
    )
    .await?;
    let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
    check(
        node.as_deref() == Some(env.var("NODE_NAME")?),
        format!("hello runs on {node:?}"),
    )?;
    // Ready as soon as it started: its command may not have written yet.
    let log = wait_noting(
        "the README's pod to log its line",
        Duration::from_secs(30),
        "its log",
        async |log: &mut String| {
            *log = env.kubectl(&["logs", "-n", &ns, "hello", "-c", "sandbox"], "")?;
            Ok(log.contains("execd is").then(|| log.clone()))
        },
    )
    .await?;
    for needle in [
        "bootstrap.sh: starting /opt/opensandbox/execd in the background",
        "runs, execd is /opt/opensandbox/execd",
    ] {
        check(
            log.contains(needle),
            format!("the log of hello has no {needle:?}:\n{log}"),
        )?;
    }
    let ping = env.kubectl(&execd_ping(&ns, "hello", "sandbox", &[]), "")?;
    check_pong(&ping)?;
    println!(
        "    hello: Running on {}, its log shows bootstrap.sh and EXECD, execd answered {}",
        env.var("NODE_NAME")?,
        ping.trim()
    );
    readme_sandbox(env, &ns, sandbox).await
}

/// The README's Sandbox: its pod, from agent-sandbox's controller, runs
/// injected on the real node, expires 60 s after its creation, and the
/// controller will tell the Sandbox to shut down then.
/// contract: controller.expiry-owner-actions
async fn readme_sandbox(env: &Env, ns: &str, manifest: &str) -> Result<()> {
    env.kubectl(&["apply", "-n", ns, "-f", "-"], manifest)?;
    env.kubectl(
        &[
            "wait",
            "-n",
            ns,
            "--for=condition=Ready",
            "sandbox/agent",
            "--timeout=90s",
        ],
        "",
    )?;
    let p = env.pods(ns).get("agent").await?;
    let owner = controller_owner(&p);
    check(
        owner == Some(("Sandbox", "agent")),
        format!("the pod agent's controller owner is {owner:?}"),
    )?;
    let inits = init_names(&p);
    check(
        inits == ["execd-installer"],
        format!("the pod agent's init containers are {inits:?}"),
    )?;
    let expires = annotation(&p, &format!("{P}/expires-at")).ok_or("agent has no expires-at")?;
    let expires = chrono::DateTime::parse_from_rfc3339(expires)?.to_utc();
    let created = created_second(&p).ok_or("agent has no creationTimestamp")?;
    check(
        (59..=61).contains(&(expires.timestamp() - created)),
        format!(
            "agent expires {}s after its creation",
            expires.timestamp() - created
        ),
    )?;
    let plan = env.diagnose(&p, expires)?;
    check_at(&plan, "/expiry/action", "shutdown-owner")?;
    println!(
        "    the README's Sandbox agent: its pod Running on {}, injected, expires 60s after its creation; at that time the controller tells the Sandbox (shutdown-owner)",
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("?")
    );
    Ok(())
}
