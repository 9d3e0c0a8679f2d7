//! Processes and helpers for the controller's end-to-end test: the control
//! plane of `tests/e2e/cluster.sh`, `sandbox-webhook controller` replicas,
//! and small Kubernetes helpers. Everything started is stopped on drop.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

pub use common::P;
use common::metrics::Metrics;
pub use common::processes::{Cluster, Result, bin_path, check, check_at, repo};
use common::processes::{Daemon, free_port};
use common::wire;

/// The controllers' own namespace, where their Lease lives.
pub const HOME: &str = "e2e-ctl-home";
pub const LEASE: &str = "sandbox-webhook-controller";
/// Short, so failover is quick to prove; the chart's default is 15 s.
pub const LEASE_SECONDS: u64 = 4;

/// One `sandbox-webhook controller` replica; killed on drop.
pub struct Controller {
    pub identity: String,
    daemon: Daemon,
    admin: String,
    kubeconfig: PathBuf,
    config: PathBuf,
}

impl Controller {
    pub fn start(identity: &str, kubeconfig: &Path, config: &Path, work: &Path) -> Result<Self> {
        let log = work.join(format!("controller-{identity}.log"));
        let mut c = Controller {
            identity: identity.to_owned(),
            daemon: Daemon::new("controller", log),
            admin: String::new(),
            kubeconfig: kubeconfig.to_owned(),
            config: config.to_owned(),
        };
        c.restart()?;
        Ok(c)
    }

    pub fn restart(&mut self) -> Result<()> {
        self.admin = format!("127.0.0.1:{}", free_port()?);
        let args: Vec<String> = [
            "controller",
            "--config",
            &self.config.display().to_string(),
            "--admin-addr",
            &self.admin,
            "--namespace",
            HOME,
            "--lease-name",
            LEASE,
            "--lease-duration",
            &LEASE_SECONDS.to_string(),
            "--lease-grace",
            "1",
            "--identity",
            &self.identity,
        ]
        .map(String::from)
        .into();
        let env = [("KUBECONFIG", self.kubeconfig.as_path())];
        self.daemon
            .start(&args, &env, &self.admin, Duration::from_secs(30))
    }

    pub fn get(&self, path: &str) -> Result<(u16, String)> {
        wire::get(&self.admin, path)
    }

    /// The sum of the series `name` whose labels include `labels`; 0 when
    /// there is none yet (a labelled counter appears once incremented).
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Result<u64> {
        let (_, body) = self.get("/metrics")?;
        Ok(Metrics::parse(&body).value_or_zero(name, labels))
    }

    pub fn is_leader(&self) -> bool {
        self.metric("sandbox_webhook_controller_leader", &[])
            .is_ok_and(|v| v == 1)
    }

    pub fn running(&mut self) -> bool {
        self.daemon.running()
    }

    /// SIGKILL: the process dies without releasing anything.
    pub fn kill(&mut self) {
        self.daemon.kill();
    }

    /// SIGTERM, then wait for the exit; the exit status.
    pub fn terminate(&mut self) -> Result<std::process::ExitStatus> {
        self.daemon.terminate()
    }
}

// ---------------------------------------------------------------------------
// Kubernetes helpers

pub fn pp() -> PostParams {
    PostParams::default()
}

pub async fn namespace(client: &Client, name: &str) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
    }))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// RFC 3339, whole seconds, UTC: what the webhook writes.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A whole second at least `secs` seconds from now.
pub fn in_seconds(secs: i64) -> DateTime<Utc> {
    let t = Utc::now() + chrono::TimeDelta::seconds(secs);
    DateTime::parse_from_rfc3339(&rfc3339(t)).map_or(t, |t| t.with_timezone(&Utc))
        + chrono::TimeDelta::seconds(1)
}

/// A sandbox pod as the webhook would leave it (the webhook is not needed
/// here: the controller only reads labels, annotations and the spec).
pub fn sandbox(
    name: &str,
    labels: &Value,
    annotations: &Value,
    extra_meta: &Value,
    spec: &Value,
) -> Result<Pod> {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {format!("{P}/id"): name}, "annotations": annotations},
        "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36", "command": ["sleep", "3600"]}]},
    });
    for (k, v) in labels.as_object().into_iter().flatten() {
        pod["metadata"]["labels"][k] = v.clone();
    }
    for (k, v) in extra_meta.as_object().into_iter().flatten() {
        pod["metadata"][k] = v.clone();
    }
    for (k, v) in spec.as_object().into_iter().flatten() {
        pod["spec"][k] = v.clone();
    }
    Ok(serde_json::from_value(pod)?)
}

pub fn expires_at(at: DateTime<Utc>) -> Value {
    json!({format!("{P}/expires-at"): rfc3339(at)})
}

/// Sandbox pod `name` (with `labels`) that expires at `at`, controlled by
/// the owner that `references` (its `ownerReferences` metadata) names.
pub fn owned_expiring(
    name: &str,
    labels: &Value,
    at: DateTime<Utc>,
    references: &Value,
) -> Result<Pod> {
    sandbox(name, labels, &expires_at(at), references, &json!({}))
}

/// Creates sandbox pod `name` that expires at `at`; the pod as created.
pub async fn create_expiring(pods: &Api<Pod>, name: &str, at: DateTime<Utc>) -> Result<Pod> {
    let pod = sandbox(name, &json!({}), &expires_at(at), &json!({}), &json!({}))?;
    Ok(pods.create(&pp(), &pod).await?)
}

/// Creates sandbox pod `name` without an expiry, `spec` merged into its
/// spec; the pod as created.
pub async fn create_unexpiring(pods: &Api<Pod>, name: &str, spec: &Value) -> Result<Pod> {
    let pod = sandbox(name, &json!({}), &json!({}), &json!({}), spec)?;
    Ok(pods.create(&pp(), &pod).await?)
}

/// Renews pod `name`: its expires-at becomes `new`.
pub async fn renew(pods: &Api<Pod>, name: &str, new: DateTime<Utc>) -> Result<()> {
    let patch = json!({"metadata": {"annotations": expires_at(new)}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// An error `{what}: {stderr}` unless the command `out` is from exited 0.
pub fn succeeded(out: &std::process::Output, what: &str) -> Result<()> {
    check(
        out.status.success(),
        format!("{what}: {}", String::from_utf8_lossy(&out.stderr)),
    )
}

/// An error `what` unless object `name` of `api` still exists.
pub async fn check_still_there<K>(api: &Api<K>, name: &str, what: &str) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    check(api.get_opt(name).await?.is_some(), what)
}

/// Polls until the object is gone (404); the instant it was first seen gone.
pub async fn wait_gone<K>(api: &Api<K>, name: &str, timeout: Duration) -> Result<Instant>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let deadline = Instant::now() + timeout;
    loop {
        match api.get_opt(name).await? {
            None => return Ok(Instant::now()),
            Some(_) if Instant::now() > deadline => {
                return Err(format!("{name} still exists after {timeout:?}").into());
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// The wall-clock instant of a monotonic one taken just now-ish.
pub fn wall(at: Instant) -> DateTime<Utc> {
    let back = Instant::now().saturating_duration_since(at);
    Utc::now() - chrono::TimeDelta::from_std(back).unwrap_or_default()
}

/// Events about `pod` with `reason`, waiting up to `timeout` for `min` of them.
pub async fn events(
    client: &Client,
    ns: &str,
    pod: &str,
    reason: &str,
    min: usize,
    timeout: Duration,
) -> Result<Vec<Event>> {
    let deadline = Instant::now() + timeout;
    loop {
        let found = common::cluster::events_about(client, ns, pod, reason).await?;
        if found.len() >= min || Instant::now() > deadline {
            return Ok(found);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `sandbox-webhook diagnose` on `pod` (as stored) at `now`.
pub fn diagnose(pod: &Pod, now: DateTime<Utc>, config: &Path, work: &Path) -> Result<Value> {
    let file = work.join(format!(
        "diagnose-{}.json",
        pod.metadata.name.as_deref().unwrap_or("pod")
    ));
    std::fs::write(&file, serde_json::to_vec(pod)?)?;
    let out = Command::new(bin_path())
        .args(["diagnose", "-f"])
        .arg(&file)
        .args(["--now", &rfc3339(now), "--namespace", HOME])
        .arg("--config")
        .arg(config)
        .output()?;
    succeeded(&out, "diagnose failed")?;
    Ok(serde_json::from_slice(&out.stdout)?)
}
