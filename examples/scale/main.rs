//! The scale benchmark's API work (`bench/scale.sh` runs it against the
//! whole control plane of `tests/e2e/cluster.sh up`; the figures are in
//! docs/performance.md).
//!
//! ```text
//! scale create KUBECONFIG PODS EXPIRING [FROM]   PODS sandbox pods in 10 namespaces (the
//!                                                 ones after the first FROM, for a second
//!                                                 batch), as fast as the apiserver takes
//!                                                 them, with one plain pod (no <prefix>/id:
//!                                                 never sent to the webhook) per 9
//!                                                 sandboxes interleaved; the first EXPIRING
//!                                                 sandboxes are labelled for `expire` as
//!                                                 group 1, the next EXPIRING as group 2
//! scale expire KUBECONFIG LEAD_S SPREAD_S [GROUP] renew the sandboxes of GROUP (default 1)
//!                                                 to expire from LEAD_S on, spread over
//!                                                 SPREAD_S, and time their removal
//! scale watch KUBECONFIG                          time a streaming list of every sandbox,
//!                                                 whole pods and metadata only: what a
//!                                                 watch of each kind costs the controller
//! ```
//!
//! `create` prints the create latency of sandbox pods against plain ones
//! (the same pod without the label, at the same moment on the same
//! apiserver: what a create costs without the webhook). `expire` prints the
//! removal delay after each expiry as this program's watch sees the DELETED
//! event, how many were removed early (by the apiserver's clock: the
//! deletionTimestamp less the grace period), and the API requests per
//! expired pod.

use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use futures_util::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use common::stats::percentile;

use common::bench::removals;
mod watch_costs;
use common::bench::cluster::{Result, client, request_deltas, request_totals};
use watch_costs::watch_costs;

const NAMESPACES: usize = 10;
/// Creates in flight: enough to keep the apiserver's two cores busy.
const CONCURRENCY: usize = 64;
const EXPIRING_LABEL: &str = "scale-bench/expiring";
const EXPIRES_AT: &str = "opensandbox.io/expires-at";

/// A count or a microsecond figure as `f64`, for the report.
#[expect(
    clippy::cast_precision_loss,
    reason = "the counts and microseconds here are far below 2^52, so exact in f64"
)]
fn float(n: impl TryInto<i64>) -> f64 {
    n.try_into().unwrap_or(i64::MAX) as f64
}

fn namespace(i: usize) -> String {
    format!("scale-{}", i % NAMESPACES)
}

async fn create_namespaces(client: &Client) -> Result<()> {
    for i in 0..NAMESPACES {
        let ns: Namespace = serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace(i)}}),
        )?;
        let namespaces = Api::<Namespace>::all(client.clone());
        if namespaces.get_opt(&namespace(i)).await?.is_none() {
            namespaces.create(&PostParams::default(), &ns).await?;
        }
        // The ServiceAccount admission plugin needs it.
        let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace(i));
        while sas.get_opt("default").await?.is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

/// Pod `i`: every 10th is plain; the others are sandboxes that live an hour
/// (the webhook writes their expires-at), and the first `expiring` of those
/// carry the label `expire` renews, `1`, the next `expiring` `2`.
fn pod(i: usize, expiring: usize) -> Result<(bool, Pod)> {
    let plain = i % 10 == 9;
    let name = format!("p-{i}");
    let mut labels = serde_json::Map::new();
    if !plain {
        labels.insert("opensandbox.io/id".into(), json!(name));
        let sandbox = i - i / 10;
        if sandbox < 2 * expiring {
            labels.insert(
                EXPIRING_LABEL.into(),
                json!(format!("{}", 1 + sandbox / expiring)),
            );
        }
    }
    let pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace(i), "labels": labels,
                     "annotations": {"opensandbox.io/timeout": "1h"}},
        "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36", "command": ["sleep", "3600"]}]},
    }))?;
    Ok((plain, pod))
}

/// The number of pods (sandbox and plain) that holds `sandboxes` sandboxes:
/// every 10th pod is plain.
fn pods_holding(sandboxes: usize) -> usize {
    (sandboxes..=sandboxes * 2)
        .find(|t| t - t / 10 >= sandboxes)
        .unwrap_or(sandboxes)
}

async fn create(client: Client, sandboxes: usize, expiring: usize, from: usize) -> Result<()> {
    create_namespaces(&client).await?;
    let range = pods_holding(from)..pods_holding(from + sandboxes);
    let started = Instant::now();
    let latencies: Vec<(bool, i64)> = stream::iter(range)
        .map(|i| {
            let client = client.clone();
            async move {
                let (plain, pod) = pod(i, expiring)?;
                let api: Api<Pod> = Api::namespaced(client, &namespace(i));
                let t0 = Instant::now();
                api.create(&PostParams::default(), &pod).await?;
                let micros = i64::try_from(t0.elapsed().as_micros())?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>((plain, micros))
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    let secs = started.elapsed().as_secs_f64();
    let mut with: Vec<i64> = latencies
        .iter()
        .filter(|(p, _)| !p)
        .map(|(_, l)| *l)
        .collect();
    let mut without: Vec<i64> = latencies
        .iter()
        .filter(|(p, _)| *p)
        .map(|(_, l)| *l)
        .collect();
    with.sort_unstable();
    without.sort_unstable();
    let ms = |v: &[i64], q| float(percentile(v, q)) / 1000.0;
    println!(
        "created {} sandbox + {} plain pods in {secs:.0} s ({:.0} creates/s, {CONCURRENCY} in flight)",
        with.len(),
        without.len(),
        float(latencies.len()) / secs
    );
    println!(
        "create latency through the apiserver: sandbox (webhook) p50 {:.2} ms p99 {:.2} ms; plain (no webhook) p50 {:.2} ms p99 {:.2} ms; ratio p50 {:.2} p99 {:.2}",
        ms(&with, 0.5),
        ms(&with, 0.99),
        ms(&without, 0.5),
        ms(&without, 0.99),
        ms(&with, 0.5) / ms(&without, 0.5),
        ms(&with, 0.99) / ms(&without, 0.99)
    );
    Ok(())
}

async fn expire(client: Client, lead: i64, spread: i64, group: &str) -> Result<()> {
    let pods: Api<Pod> = Api::all(client.clone());
    let selector = format!("{EXPIRING_LABEL}={group}");
    let mut names: Vec<(String, String)> = pods
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .filter_map(|p| Some((p.metadata.namespace?, p.metadata.name?)))
        .collect();
    names.sort();
    let n = names.len();
    let n_i64 = i64::try_from(n)?.max(1);
    let (removals, watch) =
        removals::watch(pods.clone(), watcher::Config::default().labels(&selector));
    let start = Utc::now() + TimeDelta::seconds(lead);
    let base = DateTime::from_timestamp(start.timestamp(), 0).ok_or("time")?;
    let at = |i: usize| base + TimeDelta::seconds(i64::try_from(i).unwrap_or(0) * spread / n_i64);
    let renewing = Instant::now();
    stream::iter(names.iter().enumerate())
        .map(|(i, (ns, name))| {
            let api: Api<Pod> = Api::namespaced(client.clone(), ns);
            let patch = json!({"metadata": {"annotations": {EXPIRES_AT: at(i).to_rfc3339_opts(SecondsFormat::Secs, true)}}});
            async move {
                api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    println!(
        "renewed {n} sandboxes in {:.0} s to expire from {} over {spread} s; before the first expiry: {}",
        renewing.elapsed().as_secs_f64(),
        base.to_rfc3339_opts(SecondsFormat::Secs, true),
        Utc::now() < base
    );
    let before = request_totals(&client).await?;
    let end = base + TimeDelta::seconds(spread + 120);
    while removals.lock().map_or(0, |s| s.removals.len()) < n && Utc::now() < end {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = request_totals(&client).await?;
    watch.abort();

    let seen = removals.lock().map(|s| s.clone()).unwrap_or_default();
    println!("{}", seen.health());
    let seen = seen.removals;
    let mut delays = Vec::new();
    let mut early = 0;
    for (i, (_, name)) in names.iter().enumerate() {
        if let Some(r) = seen.get(name) {
            delays.push((r.seen - at(i)).num_milliseconds());
            early += usize::from(r.requested.is_some_and(|t| t < at(i)));
        }
    }
    delays.sort_unstable();
    println!(
        "removed {} of {n}; removed early (apiserver clock): {early}; delay after expiry (watch-observed): p50 {} ms, p99 {} ms, max {} ms",
        delays.len(),
        percentile(&delays, 0.5),
        percentile(&delays, 0.99),
        delays.last().copied().unwrap_or(0)
    );
    println!(
        "API requests per expired pod during the expiry window (apiserver_request_total, everyone's):"
    );
    let deltas = request_deltas(&before, &after);
    let per = float(n);
    let mut sum = 0.0;
    for ((verb, resource, sub), d) in &deltas {
        if resource.is_empty() || d / per < 0.005 {
            continue;
        }
        sum += d;
        let what = if sub.is_empty() {
            resource.clone()
        } else {
            format!("{resource}/{sub}")
        };
        println!("  {verb:<6} {what:<22} {:.3}", d / per);
    }
    println!("  total  {:.2}", sum / per);
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: scale create KUBECONFIG PODS EXPIRING [FROM] | scale expire KUBECONFIG LEAD_S SPREAD_S [GROUP] | scale watch KUBECONFIG";
    let [_, command, kubeconfig, rest @ ..] = args.as_slice() else {
        return Err(usage.into());
    };
    let client = client(kubeconfig).await?;
    match (command.as_str(), rest) {
        ("create", [pods, expiring]) => create(client, pods.parse()?, expiring.parse()?, 0).await,
        ("create", [pods, expiring, from]) => {
            create(client, pods.parse()?, expiring.parse()?, from.parse()?).await
        }
        ("expire", [lead, spread]) => expire(client, lead.parse()?, spread.parse()?, "1").await,
        ("expire", [lead, spread, group]) => {
            expire(client, lead.parse()?, spread.parse()?, group).await
        }
        ("watch", []) => watch_costs(client).await,
        _ => Err(usage.into()),
    }
}
