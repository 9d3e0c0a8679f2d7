//! Processes and helpers for the controller's end-to-end test: the control
//! plane of `tests/e2e/cluster.sh`, `sandbox-webhook controller` replicas,
//! and small Kubernetes helpers. Everything started is stopped on drop.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

pub type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

pub const BIN: &str = env!("CARGO_BIN_EXE_sandbox-webhook");
pub const P: &str = "opensandbox.io";
/// The controllers' own namespace, where their Lease lives.
pub const HOME: &str = "e2e-ctl-home";
pub const LEASE: &str = "sandbox-webhook-controller";
/// Short, so failover is quick to prove; the chart's default is 15 s.
pub const LEASE_SECONDS: u64 = 4;

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn check(cond: bool, what: impl Into<String>) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(what.into().into())
    }
}

/// The control plane; stopped on drop, by PID, whatever happened.
pub struct Cluster {
    pub dir: PathBuf,
}

impl Cluster {
    pub fn start(dir: PathBuf) -> Result<Self> {
        let status = Command::new(repo().join("tests/e2e/cluster.sh"))
            .arg("start")
            .arg(&dir)
            .stdout(Stdio::null())
            .status()?;
        let cluster = Cluster { dir };
        check(
            status.success(),
            format!("cluster.sh start failed: {status}"),
        )?;
        Ok(cluster)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }

    pub async fn client(&self) -> Result<Client> {
        let kubeconfig = Kubeconfig::read_from(self.kubeconfig())?;
        let config =
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Client::try_from(config)?)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("tests/e2e/cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .status();
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One `sandbox-webhook controller` replica; killed on drop.
pub struct Controller {
    pub identity: String,
    child: Option<Child>,
    admin_port: u16,
    kubeconfig: PathBuf,
    config: PathBuf,
    log: PathBuf,
}

impl Controller {
    pub fn start(identity: &str, kubeconfig: &Path, config: &Path, work: &Path) -> Result<Self> {
        let mut c = Controller {
            identity: identity.to_owned(),
            child: None,
            admin_port: 0,
            kubeconfig: kubeconfig.to_owned(),
            config: config.to_owned(),
            log: work.join(format!("controller-{identity}.log")),
        };
        c.restart()?;
        Ok(c)
    }

    pub fn restart(&mut self) -> Result<()> {
        self.admin_port = free_port()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(BIN)
            .arg("controller")
            .arg("--config")
            .arg(&self.config)
            .args(["--admin-addr", &format!("127.0.0.1:{}", self.admin_port)])
            .args(["--namespace", HOME, "--lease-name", LEASE])
            .args([
                "--lease-duration",
                &LEASE_SECONDS.to_string(),
                "--lease-grace",
                "1",
            ])
            .args(["--identity", &self.identity])
            .env("KUBECONFIG", &self.kubeconfig)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!(
                    "controller exited at start: {status}; see {}",
                    self.log.display()
                )
                .into());
            }
            if self.get("/readyz").is_ok_and(|(code, _)| code == 200) {
                return Ok(());
            }
            check(Instant::now() < deadline, "controller not ready within 30s")?;
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn get(&self, path: &str) -> Result<(u16, String)> {
        http_get(&format!("127.0.0.1:{}", self.admin_port), path)
    }

    pub fn metric(&self, name_and_labels: &str) -> Result<f64> {
        let (_, body) = self.get("/metrics")?;
        Ok(metric_value(&body, name_and_labels).unwrap_or(0.0))
    }

    pub fn is_leader(&self) -> bool {
        self.metric("sandbox_webhook_controller_leader")
            .is_ok_and(|v| v == 1.0)
    }

    pub fn running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// SIGKILL: the process dies without releasing anything.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM, then wait for the exit; the exit status.
    pub fn terminate(&mut self) -> Result<std::process::ExitStatus> {
        let mut c = self.child.take().ok_or("not running")?;
        let pid = i32::try_from(c.id())?;
        // SAFETY: signalling a child process this test started and still owns.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = c.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                return Err("controller did not exit within 20s of SIGTERM".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Plain-HTTP GET on the admin port.
fn http_get(host: &str, path: &str) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("bad status line")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// The value of the series that starts with `name_and_labels` exactly.
pub fn metric_value(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(name_and_labels)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
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
    DateTime::parse_from_rfc3339(&rfc3339(t))
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or(t)
        + chrono::TimeDelta::seconds(1)
}

/// A sandbox pod as the webhook would leave it (the webhook is not needed
/// here: the controller only reads labels, annotations and the spec).
pub fn sandbox(
    name: &str,
    labels: Value,
    annotations: Value,
    extra_meta: Value,
    spec: Value,
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
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let deadline = Instant::now() + timeout;
    loop {
        let found: Vec<Event> = api
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(pod)
            })
            .collect();
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
    let out = Command::new(BIN)
        .args(["diagnose", "-f"])
        .arg(&file)
        .args(["--now", &rfc3339(now), "--namespace", HOME])
        .arg("--config")
        .arg(config)
        .output()?;
    check(
        out.status.success(),
        format!("diagnose failed: {}", String::from_utf8_lossy(&out.stderr)),
    )?;
    Ok(serde_json::from_slice(&out.stdout)?)
}
