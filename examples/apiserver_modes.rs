//! The API work of `bench/apiserver.sh` (issue 19): what a pod create costs
//! through a real kube-apiserver with each kind of webhook answer.
//!
//! ```text
//! apiserver_modes KUBECONFIG POD_JSON CREATES OUT_DIR MODE[:POD_JSON]...
//! ```
//!
//! Each MODE has its own namespace, `bench-<mode>`, labelled
//! `bench-mode=<mode>`; the script registers one webhook per mode that
//! selects its namespace by that label (mode `none` has no webhook). The
//! same pod (`POD_JSON`, or the mode's own) is created `CREATES` times per
//! mode, one create at a time, the modes taken in turn (interleaved), so
//! that the apiserver's warm-up, etcd's compactions and the machine's noise
//! fall on every mode alike. Prints one line per mode (p50, p99, mean) and writes the first
//! stored pod of each mode to `OUT_DIR/<mode>.json` for the script to
//! compare.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use kube::Client;
use kube::api::{Api, PostParams};
use serde_json::json;

use common::stats::percentile;

use common::bench::cluster::{Result, client};

/// Creates per mode before the measured ones: connections, caches, the
/// webhook servers' first TLS handshakes.
const WARM_UP: usize = 50;

async fn namespace(client: &Client, mode: &str) -> Result<()> {
    let name = format!("bench-{mode}");
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"bench-mode": mode}},
    }))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    // Where the ServiceAccount admission plugin is on, it needs `default`.
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "default"}}))?;
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), &name);
    if sas.get_opt("default").await?.is_none() {
        sas.create(&PostParams::default(), &sa).await?;
    }
    Ok(())
}

/// The pod in `path`, made creatable again: no name, namespace or managed
/// fields.
fn pod_to_create(path: &str) -> Result<Pod> {
    let mut pod: Pod = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    pod.metadata.namespace = None;
    pod.metadata.managed_fields = None;
    pod.metadata.name = None;
    pod.metadata.generate_name = Some("bench-".into());
    Ok(pod)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kubeconfig, pod_json, creates, out_dir, modes @ ..] = args.as_slice() else {
        return Err("usage: apiserver_modes KUBECONFIG POD_JSON CREATES OUT_DIR MODE...".into());
    };
    let creates: usize = creates.parse()?;
    let mut pods = Vec::with_capacity(modes.len());
    let modes: Vec<&str> = modes
        .iter()
        .map(|m| {
            let (mode, path) = m.split_once(':').unwrap_or((m, pod_json));
            pods.push(pod_to_create(path));
            mode
        })
        .collect();
    let pods = pods.into_iter().collect::<Result<Vec<Pod>>>()?;

    let client = client(kubeconfig).await?;
    for mode in &modes {
        namespace(&client, mode).await?;
    }
    let apis: Vec<Api<Pod>> = modes
        .iter()
        .map(|m| Api::namespaced(client.clone(), &format!("bench-{m}")))
        .collect();
    let mut samples = vec![Vec::with_capacity(creates); modes.len()];
    let mut first: Vec<Option<Pod>> = vec![None; modes.len()];
    for round in 0..WARM_UP + creates {
        for (i, api) in apis.iter().enumerate() {
            let started = Instant::now();
            let stored = api.create(&PostParams::default(), &pods[i]).await?;
            let took = started.elapsed();
            if round >= WARM_UP {
                samples[i].push(took);
            }
            first[i].get_or_insert(stored);
        }
    }
    for (i, mode) in modes.iter().enumerate() {
        let s = &mut samples[i];
        s.sort();
        let mean = s.iter().sum::<Duration>() / u32::try_from(s.len().max(1))?;
        println!(
            "mode {mode:<10} creates {:>5}  p50 {:>6.2} ms  p99 {:>6.2} ms  mean {:>6.2} ms",
            s.len(),
            ms(percentile(s, 0.5)),
            ms(percentile(s, 0.99)),
            ms(mean),
        );
        if let Some(pod) = &first[i] {
            std::fs::write(
                format!("{out_dir}/{mode}.json"),
                serde_json::to_vec_pretty(pod)?,
            )?;
        }
    }
    Ok(())
}
