//! The lifecycle controller under load (bench/controller.sh runs it against
//! the e2e apiserver; the figures are in docs/performance.md): N sandbox pods
//! whose whole-second expiry times are spread over S seconds, and
//!
//! - the removal delay after expiry, as this program's own watch sees the
//!   DELETED event (p50/p99/max; it includes the watch's delivery time);
//! - the controller's RSS idle, with all N pods cached, and its peak;
//! - the API calls made during the run, from the apiserver's
//!   `apiserver_request_total`, minus the calls this program makes itself.
//!
//! Usage:
//!
//! ```text
//! controller_bench KUBECONFIG CONTROLLER_PID CONTROLLER_ADMIN_ADDR [PODS] [SPREAD_S] [LEAD_S]
//! ```

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use futures_util::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use serde_json::json;

// The percentile the e2e latency check uses.
use common::stats::percentile;

use common::bench::cluster::{
    Result, admin_metric as controller_metric, client, mib, request_totals, rss_kib,
};
use common::bench::removals;

const NS: &str = "bench";
const CONCURRENCY: usize = 16;

/// When the bench pods expire: pod `i` of `n` at `base + i * spread / n`
/// seconds, `base` a whole second.
#[derive(Clone, Copy)]
struct Schedule {
    base: DateTime<Utc>,
    spread: i64,
    n: i64,
}

impl Schedule {
    fn expiry(self, i: usize) -> DateTime<Utc> {
        let i = i64::try_from(i).expect("a pod index is below the pod count, an i64");
        self.base + TimeDelta::seconds(i * self.spread / self.n)
    }
}

/// Creates pods `p-0` .. `p-{n-1}`, each with its expiry, `CONCURRENCY` at
/// a time.
async fn create_pods(pods: &Api<Pod>, n: usize, schedule: Schedule) -> Result<()> {
    stream::iter(0..n)
        .map(|i| {
            let pods = pods.clone();
            async move {
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("p-{i}"), "labels": {"opensandbox.io/id": format!("p-{i}")},
                        "annotations": {"opensandbox.io/expires-at": schedule.expiry(i).to_rfc3339_opts(SecondsFormat::Secs, true)}},
                    "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36", "command": ["sleep", "3600"]}]},
                }))?;
                pods.create(&PostParams::default(), &pod).await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The controller's API calls between `before` and `after` (this program's
/// own taken out: `pods` pod POSTs and the calls below), then the pod reads
/// since the apiserver started.
fn print_api_calls(
    before: &BTreeMap<(String, String, String), f64>,
    after: &BTreeMap<(String, String, String), f64>,
    pods: f64,
) {
    // This program's own calls: one namespace POST, N pod POSTs, and its
    // watch (one LIST and one WATCH); the rest is the controller's.
    let mut ours: HashMap<(&str, &str), f64> = HashMap::new();
    ours.insert(("POST", "namespaces"), 1.0);
    ours.insert(("POST", "pods"), pods);
    ours.insert(("LIST", "pods"), 1.0);
    ours.insert(("WATCH", "pods"), 1.0);
    println!(
        "controller API calls during the run (apiserver_request_total delta minus this program's):"
    );
    for ((verb, resource, sub), v) in after {
        let delta = v - before
            .get(&(verb.clone(), resource.clone(), sub.clone()))
            .copied()
            .unwrap_or(0.0);
        let mine = if sub.is_empty() {
            ours.get(&(verb.as_str(), resource.as_str()))
                .copied()
                .unwrap_or(0.0)
        } else {
            0.0
        };
        let theirs = delta - mine;
        if theirs >= 0.5 && !resource.is_empty() {
            let what = if sub.is_empty() {
                resource.clone()
            } else {
                format!("{resource}/{sub}")
            };
            println!("  {verb:<6} {what:<24} {theirs:.0}");
        }
    }
    // The controller's watch began before the window above; on this fresh
    // apiserver the only pod readers are the controller and this program.
    println!(
        "pods reads since the apiserver started (the controller's and this program's, one each expected):"
    );
    for verb in ["LIST", "WATCH", "GET"] {
        let total = after
            .get(&(verb.to_owned(), "pods".to_owned(), String::new()))
            .copied()
            .unwrap_or(0.0);
        println!("  {verb:<6} pods {total:.0}");
    }
}

/// The pod watches open now: a watch is counted in `apiserver_request_total`
/// only when it ends; the open ones are in `apiserver_longrunning_requests`.
async fn open_pod_watches(client: &Client) -> Result<f64> {
    let req = axum::http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(req).await?;
    Ok(text
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{")
                && l.contains("resource=\"pods\"")
                && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

/// A client of the cluster in `kubeconfig`, and the bench namespace `NS`
/// created in it.
async fn client_with_namespace(kubeconfig: &str) -> Result<Client> {
    let client = client(kubeconfig).await?;
    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    )?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    Ok(client)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        return Err("usage: controller_bench KUBECONFIG CONTROLLER_PID ADMIN_ADDR [PODS] [SPREAD_S] [LEAD_S]".into());
    }
    let pid: u32 = args[2].parse()?;
    let admin = args[3].clone();
    let n: usize = args.get(4).map_or(Ok(5000), |a| a.parse())?;
    let spread: i64 = args.get(5).map_or(Ok(60), |a| a.parse())?;
    let lead: i64 = args.get(6).map_or(Ok(45), |a| a.parse())?;
    #[expect(
        clippy::cast_precision_loss,
        reason = "a pod count is far below 2^52, so exact in f64"
    )]
    let pods_f64 = n as f64;
    let n_i64 = i64::try_from(n)?;

    let client = client_with_namespace(&args[1]).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    let idle_rss = rss_kib(pid, "VmRSS:")?;
    let before = request_totals(&client).await?;

    let (deleted, recorder) = removals::watch(pods.clone(), watcher::Config::default());

    let start = Utc::now();
    let base = DateTime::parse_from_rfc3339(
        &(start + TimeDelta::seconds(lead)).to_rfc3339_opts(SecondsFormat::Secs, true),
    )?
    .with_timezone(&Utc);
    let schedule = Schedule {
        base,
        spread,
        n: n_i64,
    };
    let created = Instant::now();
    create_pods(&pods, n, schedule).await?;
    let create_secs = created.elapsed().as_secs_f64();
    let ready_before_expiry = Utc::now() < base;

    let deadline = Instant::now() + Duration::from_secs(60);
    while controller_metric(&admin, "sandbox_webhook_controller_cached_pods") < pods_f64
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cached = controller_metric(&admin, "sandbox_webhook_controller_cached_pods");
    let full_rss = rss_kib(pid, "VmRSS:")?;

    let end = base + TimeDelta::seconds(spread + 60);
    while deleted.lock().map_or(0, |s| s.removals.len()) < n && Utc::now() < end {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = request_totals(&client).await?;
    let peak_rss = rss_kib(pid, "VmHWM:")?;
    let end_rss = rss_kib(pid, "VmRSS:")?;
    recorder.abort();

    let seen = deleted.lock().map(|s| s.clone()).unwrap_or_default();
    let map: HashMap<_, _> = seen
        .removals
        .iter()
        .map(|(name, r)| (name.clone(), r.seen))
        .collect();
    let mut delays: Vec<i64> = (0..n)
        .filter_map(|i| {
            Some((*map.get(&format!("p-{i}"))? - schedule.expiry(i)).num_milliseconds())
        })
        .collect();
    delays.sort_unstable();
    let early = delays.iter().filter(|d| **d < 0).count();

    println!(
        "pods: {n}, expiries spread over {spread} s from {}",
        base.to_rfc3339_opts(SecondsFormat::Secs, true)
    );
    println!(
        "created in {create_secs:.1} s ({:.0}/s); all created before the first expiry: {ready_before_expiry}",
        pods_f64 / create_secs
    );
    println!("controller cache: {cached} pods");
    println!(
        "removed: {} of {n}; removed before expiry: {early}",
        delays.len()
    );
    println!(
        "removal delay after expiry (watch-observed): p50 {} ms, p99 {} ms, max {} ms",
        percentile(&delays, 0.50),
        percentile(&delays, 0.99),
        delays.last().copied().unwrap_or(0)
    );
    println!("{}", seen.health());
    println!(
        "controller RSS: idle {:.1} MiB, {n} pods cached {:.1} MiB, peak {:.1} MiB, after {:.1} MiB",
        mib(idle_rss),
        mib(full_rss),
        mib(peak_rss),
        mib(end_rss)
    );
    print_api_calls(&before, &after, pods_f64);
    let open = open_pod_watches(&client).await?;
    println!("  open WATCH pods {open:.0}");
    Ok(())
}
