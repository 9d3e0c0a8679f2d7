//! OpenSandbox's own server (`opensandbox-server` 1.1.1 from PyPI, the
//! pinned virtualenv of `tests/upstream/server-venv.sh`) as a process on
//! loopback, with its Kubernetes runtime and the agent-sandbox provider,
//! against a cluster's kubeconfig: a sandbox created through its REST API
//! becomes a `Sandbox` (`agents.x-k8s.io/v1beta1`) that agent-sandbox's
//! controller turns into a pod. Killed on drop, and with this process.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::children;
use crate::processes::{Result, check, check_running, free_port, repo};

/// The header the server reads its API key from (`middleware/auth.py`).
const API_KEY_HEADER: &str = "OPEN-SANDBOX-API-KEY";

/// What the server is configured with.
pub struct ServerSettings<'a> {
    pub kubeconfig: &'a Path,
    /// The one namespace its sandboxes go to (`kubernetes.namespace`).
    pub namespace: &'a str,
    pub execd_image: &'a str,
    pub egress_image: &'a str,
    /// The Sandbox template merged under what the server builds
    /// (`agent_sandbox.template_file`): where its pods may run.
    pub template: Value,
}

pub struct OpenSandboxServer {
    child: Option<Child>,
    url: String,
    api_key: String,
    log: PathBuf,
    http: reqwest::Client,
}

impl OpenSandboxServer {
    /// The virtualenv's python (built or reused by `server-venv.sh`).
    pub fn python() -> Result<PathBuf> {
        let out = Command::new(repo().join("tests/upstream/server-venv.sh"))
            .stderr(Stdio::inherit())
            .output()?;
        check(
            out.status.success(),
            format!("tests/upstream/server-venv.sh failed: {}", out.status),
        )?;
        Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
    }

    /// Writes its configuration under `work` and starts it; returns once
    /// `/health` answers (an error naming its log otherwise).
    pub async fn start(work: &Path, settings: &ServerSettings<'_>) -> Result<Self> {
        let python = Self::python()?;
        std::fs::create_dir_all(work)?;
        let port = free_port()?;
        let api_key = format!("e2e-{:016x}", fastrand::u64(..));
        let template = work.join("sandbox-template.yaml");
        // JSON is YAML.
        std::fs::write(&template, serde_json::to_vec_pretty(&settings.template)?)?;
        let config = work.join("server.toml");
        std::fs::write(
            &config,
            server_toml(settings, port, &api_key, &template, work),
        )?;
        let log = work.join("opensandbox-server.log");
        let file = std::fs::File::create(&log)?;
        let mut command = Command::new(python);
        command
            .args(["-m", "opensandbox_server.cli", "--config"])
            .arg(&config)
            .current_dir(work)
            .env("HOME", work)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        let child = children::spawn(command)?;
        let mut server = OpenSandboxServer {
            child: Some(child),
            url: format!("http://127.0.0.1:{port}"),
            api_key,
            log,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(120))
                .build()?,
        };
        server.wait_healthy(Duration::from_secs(60)).await?;
        Ok(server)
    }

    async fn wait_healthy(&mut self, patience: Duration) -> Result<()> {
        let deadline = Instant::now() + patience;
        loop {
            let log = &self.log;
            check_running(&mut self.child, |status| {
                format!(
                    "opensandbox-server exited at start ({status}):\n{}",
                    tail(log, 20)
                )
            })?;
            let health = self.http.get(format!("{}/health", self.url)).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            check(
                Instant::now() < deadline,
                format!(
                    "opensandbox-server not healthy within {patience:?}:\n{}",
                    self.log_tail(20)
                ),
            )?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last `n` lines of its log, for messages.
    pub fn log_tail(&self, n: usize) -> String {
        tail(&self.log, n)
    }

    /// A request to `<url><path>` with the API key.
    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.url))
            .header(API_KEY_HEADER, &self.api_key)
    }

    /// `POST /v1/sandboxes`: the status and the JSON answer. The server
    /// answers once the sandbox runs (or it gave up).
    pub async fn create(&self, request: &Value) -> Result<(u16, Value)> {
        answer(
            self.request(reqwest::Method::POST, "/v1/sandboxes")
                .json(request),
        )
        .await
    }

    /// `GET /v1/sandboxes/{id}`: the status and the JSON answer.
    pub async fn get(&self, id: &str) -> Result<(u16, Value)> {
        answer(self.request(reqwest::Method::GET, &format!("/v1/sandboxes/{id}"))).await
    }

    /// `DELETE /v1/sandboxes/{id}`: the status.
    pub async fn delete(&self, id: &str) -> Result<u16> {
        let r = self
            .request(reqwest::Method::DELETE, &format!("/v1/sandboxes/{id}"))
            .send()
            .await?;
        Ok(r.status().as_u16())
    }
}

/// Sends `request`: the status and the JSON answer (a JSON string of the
/// body when it is not JSON).
async fn answer(request: reqwest::RequestBuilder) -> Result<(u16, Value)> {
    let r = request.send().await?;
    let status = r.status().as_u16();
    let body = r.text().await?;
    Ok((status, serde_json::from_str(&body).unwrap_or(json!(body))))
}

/// The last `n` lines of the file `log` (empty when it cannot be read).
fn tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Drop for OpenSandboxServer {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The server's TOML: loopback only, an API key, its store under `work`,
/// the Kubernetes runtime with the agent-sandbox provider in one
/// namespace, the given execd and egress images (the node's stand-ins).
fn server_toml(
    s: &ServerSettings<'_>,
    port: u16,
    api_key: &str,
    template: &Path,
    work: &Path,
) -> String {
    let q = |v: &str| serde_json::to_string(v).unwrap_or_default();
    format!(
        r#"[server]
host = "127.0.0.1"
port = {port}
api_key = {api_key}
max_sandbox_timeout_seconds = 86400

[log]
level = "INFO"

[runtime]
type = "kubernetes"
execd_image = {execd}

[store]
type = "sqlite"
path = {store}

[kubernetes]
kubeconfig_path = {kubeconfig}
namespace = {namespace}
workload_provider = "agent-sandbox"
image_pull_policy = "IfNotPresent"
sandbox_create_timeout_seconds = 45

[agent_sandbox]
template_file = {template}

[ingress]
mode = "direct"

[egress]
image = {egress}
mode = "dns"
"#,
        api_key = q(api_key),
        execd = q(s.execd_image),
        store = q(&work.join("opensandbox.db").display().to_string()),
        kubeconfig = q(&s.kubeconfig.display().to_string()),
        namespace = q(s.namespace),
        template = q(&template.display().to_string()),
        egress = q(s.egress_image),
    )
}
