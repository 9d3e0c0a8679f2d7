//! The processes a run starts: the control plane (`cluster.sh`) and
//! `sandbox-webhook serve`. Each is stopped on drop, whatever happened.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::Result;

pub const BIN: &str = env!("CARGO_BIN_EXE_sandbox-webhook");
/// The `--namespace` of every webhook the tests start: always excluded.
pub const OWN_NAMESPACE: &str = "e2e-webhook-home";

pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The control plane; stopped on drop, by PID.
pub struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    pub fn start(dir: PathBuf) -> Result<Self> {
        let status = Command::new(repo().join("tests/e2e/cluster.sh"))
            .arg("start")
            .arg(&dir)
            .stdout(Stdio::null())
            .status()?;
        // Constructed before the check so a half-started plane is stopped too.
        let cluster = Cluster { dir };
        if !status.success() {
            return Err(format!("cluster.sh start failed: {status}").into());
        }
        Ok(cluster)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
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

/// A `sandbox-webhook serve` process; killed on drop.
pub struct Webhook {
    child: Option<Child>,
    args: Vec<String>,
    port: u16,
    admin_port: u16,
    log: PathBuf,
}

impl Webhook {
    pub fn start(certs: &Path, config: &Path, log: PathBuf) -> Result<Self> {
        let port = free_port()?;
        let admin_port = free_port()?;
        let args = vec![
            "serve".to_owned(),
            "--config".to_owned(),
            config.display().to_string(),
            "--tls-cert".to_owned(),
            certs.join("tls.crt").display().to_string(),
            "--tls-key".to_owned(),
            certs.join("tls.key").display().to_string(),
            "--addr".to_owned(),
            format!("127.0.0.1:{port}"),
            "--admin-addr".to_owned(),
            format!("127.0.0.1:{admin_port}"),
            "--namespace".to_owned(),
            OWN_NAMESPACE.to_owned(),
        ];
        let mut w = Webhook {
            child: None,
            args,
            port,
            admin_port,
            log,
        };
        w.restart()?;
        Ok(w)
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    pub fn restart(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(BIN)
            .args(&self.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        let ready = format!("http://127.0.0.1:{}/readyz", self.admin_port);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!(
                    "webhook exited at start: {status}; see {}",
                    self.log.display()
                )
                .into());
            }
            if http_get(&ready).is_ok_and(|(code, _)| code == 200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("webhook not ready within 20s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn metrics(&self) -> Result<crate::common::metrics::Metrics> {
        let (code, body) = http_get(&format!("http://127.0.0.1:{}/metrics", self.admin_port))?;
        if code != 200 {
            return Err(format!("/metrics answered {code}").into());
        }
        Ok(crate::common::metrics::Metrics::parse(&body))
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Plain-HTTP GET for the admin port, without pulling in a client stack.
fn http_get(url: &str) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").ok_or("http only")?;
    let (host, path) = rest.split_once('/').ok_or("no path")?;
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
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
