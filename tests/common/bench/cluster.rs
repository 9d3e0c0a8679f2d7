//! What the cluster benchmarks (`controller_bench`, `scale`) read besides
//! the API: a process's memory, a counter on an admin port, the
//! apiserver's own request counters, and a client from a kubeconfig.

use std::collections::BTreeMap;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::wire;

pub type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

/// `(verb, resource, subresource)` of `apiserver_request_total`.
pub type RequestKey = (String, String, String);

/// A field of `/proc/PID/status` in KiB (`VmRSS:`, `VmHWM:`).
pub fn rss_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .ok_or("no such field")?;
    Ok(line.split_whitespace().nth(1).ok_or("bad line")?.parse()?)
}

/// KiB as MiB, for the RSS figures.
#[expect(
    clippy::cast_precision_loss,
    reason = "an RSS in KiB is far below 2^52, so exact in f64"
)]
pub fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The unlabelled series `name` on an admin port's `/metrics`; 0 when
/// absent or unreachable.
pub fn admin_metric(addr: &str, name: &str) -> f64 {
    wire::get(addr, "/metrics")
        .ok()
        .and_then(|(_, body)| {
            body.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

/// `apiserver_request_total` summed by (verb, resource, subresource).
pub async fn request_totals(client: &Client) -> Result<BTreeMap<RequestKey, f64>> {
    let req = axum::http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(req).await?;
    let mut totals = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or("")
                .to_owned()
        };
        let key = (label("verb"), label("resource"), label("subresource"));
        *totals.entry(key).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    Ok(totals)
}

/// `after - before`, per key, the keys that moved.
pub fn request_deltas(
    before: &BTreeMap<RequestKey, f64>,
    after: &BTreeMap<RequestKey, f64>,
) -> BTreeMap<RequestKey, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d >= 0.5)
        .collect()
}

/// A client of the cluster in `kubeconfig`.
pub async fn client(kubeconfig: &str) -> Result<Client> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)?;
    Ok(Client::try_from(
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?,
    )?)
}
