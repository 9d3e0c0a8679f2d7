//! Scenario 6: the README's sandbox on the real node that `cluster.sh up`
//! brings (the manifest is read from the README, so the example is what
//! runs). The host webhook injects it with the node's stand-in execd image,
//! and it runs: its log shows the command under bootstrap.sh with `EXECD`
//! set, and execd answers inside it through `kubectl exec`.

use std::time::Duration;

use crate::harness::{Env, Result, check, repo, wait_for};

pub(crate) async fn readme_sandbox_runs_on_the_real_node(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[]).await?;
    let readme = std::fs::read_to_string(repo().join("README.md"))?;
    let manifest = readme
        .split_once("kubectl apply -f - <<'EOF'\n")
        .and_then(|(_, rest)| rest.split_once("\nEOF\n"))
        .map(|(yaml, _)| yaml)
        .ok_or("README.md has no `kubectl apply -f - <<'EOF'` example")?;
    env.kubectl(&["apply", "-n", &ns, "-f", "-"], manifest)?;
    let pods = env.pods(&ns);
    let p = wait_for(
        "the README's pod Ready on the real node",
        Duration::from_secs(60),
        async || {
            let p = pods.get("hello").await?;
            let ready = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            Ok(ready.then_some(p))
        },
    )
    .await?;
    let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
    check(
        node.as_deref() == Some(env.var("NODE_NAME")?),
        format!("hello runs on {node:?}"),
    )?;
    // Ready as soon as it started: its command may not have written yet.
    let mut log = String::new();
    let said = wait_for(
        "the README's pod to log its line",
        Duration::from_secs(30),
        async || {
            log = env.kubectl(&["logs", "-n", &ns, "hello", "-c", "sandbox"], "")?;
            Ok(log.contains("execd is").then_some(()))
        },
    )
    .await;
    said.map_err(|e| format!("{e}; its log:\n{log}"))?;
    for needle in [
        "bootstrap.sh: starting /opt/opensandbox/execd in the background",
        "runs, execd is /opt/opensandbox/execd",
    ] {
        check(
            log.contains(needle),
            format!("the log of hello has no {needle:?}:\n{log}"),
        )?;
    }
    let ping = env.kubectl(
        &[
            "exec",
            "-n",
            &ns,
            "hello",
            "-c",
            "sandbox",
            "--",
            "wget",
            "-qO-",
            "127.0.0.1:44772/ping",
        ],
        "",
    )?;
    check(
        ping.contains("\"status\":\"pong\""),
        format!("execd answered {ping:?}"),
    )?;
    println!(
        "    hello: Running on {}, its log shows bootstrap.sh and EXECD, execd answered {}",
        env.var("NODE_NAME")?,
        ping.trim()
    );
    Ok(())
}
