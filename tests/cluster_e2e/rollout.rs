//! Scenario 5: a rollout under load with `failurePolicy: Fail`. Two webhook
//! processes stand behind one address (a TCP proxy in the test, which
//! routes new connections to ready backends only, as a Service does), the
//! apiserver calls that address through a webhook configuration the chart
//! renders, and 100 sandbox creates a second go through while each process
//! in turn is sent SIGTERM and replaced by a new one. Not one create may be
//! refused.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Env, Result, admissions, check, sandbox_pod, wait_for};
use crate::releases::HostWebhook;
use common::load::Load;
use common::processes::Daemon;
use common::proxy::{Backend, Proxy};

/// The label that brings a namespace under the rollout's webhook only.
const LABEL: &str = "sandbox-webhook-e2e/rollout";
const RATE: u32 = 100;
const SECONDS: u32 = 16;

/// One `sandbox-webhook serve` behind the proxy.
struct Replica {
    daemon: Daemon,
    backend: Backend,
}

impl Replica {
    fn start(env: &Env, name: &str) -> Result<Replica> {
        let HostWebhook {
            daemon,
            port,
            admin,
        } = HostWebhook::start(env, env.var("WEBHOOK_CONFIG")?, &format!("rollout-{name}"))?;
        Ok(Replica {
            daemon,
            backend: Backend {
                addr: format!("127.0.0.1:{port}").parse()?,
                admin,
            },
        })
    }

    fn mutated(&self) -> Result<u64> {
        let (_, body) = common::wire::get(&self.backend.admin, "/metrics")?;
        Ok(admissions(&common::metrics::Metrics::parse(&body), "CREATE")["mutated"])
    }
}

pub(crate) async fn rollout_under_load_refuses_nothing(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[(LABEL, "true")]).await?;
    let proxy = Proxy::start()?;
    let mut old = Vec::new();
    for name in ["a", "b"] {
        let replica = tokio::task::block_in_place(|| Replica::start(env, name))?;
        proxy.add(replica.backend.clone());
        old.push(replica);
    }
    let yaml = env.helm_template(
        "rollout",
        &[
            "--namespace",
            env.var("RELEASE_NAMESPACE")?,
            "--set",
            "deployment.enabled=false",
            "--set",
            &format!("webhook.url=https://{}/mutate", proxy.addr),
            "--set-file",
            &format!("webhook.caBundle={}", env.var("WEBHOOK_CA")?),
            "--set",
            "validation.enabled=false",
            "--set-string",
            &format!("webhook.namespaceSelector.matchLabels.{LABEL}=true"),
            "--show-only",
            "templates/mutatingwebhookconfiguration.yaml",
        ],
    )?;
    env.kubectl(&["apply", "-f", "-"], &yaml)?;
    let result = load_and_roll(env, &ns, &proxy, old).await;
    env.kubectl(&["delete", "-f", "-"], &yaml)?;
    result
}

async fn load_and_roll(env: &Env, ns: &str, proxy: &Proxy, old: Vec<Replica>) -> Result<()> {
    let pods = env.pods(ns);
    // The apiserver picks configurations up asynchronously: wait until a
    // dry-run create reaches the replicas.
    let served =
        |replicas: &[Replica]| -> Result<u64> { replicas.iter().map(Replica::mutated).sum() };
    let dry = common::cluster::dry_run();
    let probe = sandbox_pod("probe", &json!({}), &json!({}))?;
    wait_for(
        "the rollout webhook to be called",
        Duration::from_secs(30),
        async || {
            pods.create(&dry, &probe).await?;
            Ok((served(&old)? > 0).then_some(()))
        },
    )
    .await?;

    let started = Instant::now();
    // The pods carry a scheduling gate so that the scheduler leaves them alone.
    let gate = json!({"schedulingGates": [{"name": "sandbox-webhook-e2e/hold"}]});
    let load = Load::start(pods.clone(), RATE, Some(RATE * SECONDS), move |i| {
        sandbox_pod(&format!("load-{i}"), &json!({}), &gate)
    });
    let mut new = Vec::new();
    let mut exits = Vec::new();
    let mut served_old = 0;
    for (i, replica) in old.into_iter().enumerate() {
        // One step every 6 s from t = 3 s: SIGTERM to an old replica, a new
        // one started; the old one leaves the endpoints once it has exited.
        let at = Duration::from_secs(3 + 6 * i as u64);
        tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
        let before = replica.mutated()?;
        served_old += before;
        let name = ["c", "d"][i];
        let mut daemon = replica.daemon;
        let stopping = tokio::task::spawn_blocking(move || daemon.terminate());
        let fresh = tokio::task::block_in_place(|| Replica::start(env, name))?;
        proxy.add(fresh.backend.clone());
        let status = stopping.await??;
        proxy.remove(replica.backend.addr);
        println!(
            "    t={:.1}s: replica {} got SIGTERM after {before} reviews and exited ({status}); {name} took its place",
            at.as_secs_f64(),
            ["a", "b"][i]
        );
        exits.push(status);
        new.push(fresh);
    }
    let tally = load.finish().await?;
    let total = tally.total();
    println!(
        "    {total} sandbox creates at {RATE}/s over {SECONDS} s: {} admitted, {} refused; proxy found no ready replica {} times",
        tally.ok,
        tally.refused.len(),
        proxy.refused()
    );
    tally.none_refused()?;
    check(
        total == (RATE * SECONDS) as usize,
        format!("{total} creates made"),
    )?;
    for status in exits {
        check(
            status.success(),
            format!("an old replica exited with {status}"),
        )?;
    }
    let served_new = served(&new)?;
    println!(
        "    reviews mutated: {served_old} by the old replicas when they got SIGTERM, {served_new} by the new ones"
    );
    check(served_new > 0, "the new replicas served no review")
}
