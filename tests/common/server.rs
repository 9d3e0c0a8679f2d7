//! A real server on 127.0.0.1 port 0 and clients for it: a generated CA and
//! serving pair, the server running in the test's runtime, raw TLS
//! connections for tests that need control of one connection's bytes, and
//! the admin port.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sandbox_webhook::certs::{Ca, Pair};
use sandbox_webhook::server::{ServeError, Server, ServerSettings, TlsFiles, Tuning};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::pods::SandboxPod;
use crate::wire::client_config;
pub use crate::wire::{Response, post, read_response, tls_connect};

/// A CA plus a directory to put files in.
pub struct Pki {
    pub ca: Ca,
    pub dir: tempfile::TempDir,
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

impl Pki {
    pub fn new() -> Self {
        Pki {
            ca: Ca::new("test-ca", 2).expect("CA"),
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn leaf(&self) -> Pair {
        self.ca
            .server(&["localhost".into()], &["127.0.0.1".parse().unwrap()], 1)
            .expect("leaf")
    }

    /// A serving pair valid from `from` to `until` days from today (UTC,
    /// from the start of each day): in the past, or in the future.
    pub fn leaf_valid(&self, from: i64, until: i64) -> Pair {
        let day = |n: i64| chrono::Utc::now().date_naive() + chrono::TimeDelta::days(n);
        let ip = "127.0.0.1".parse().unwrap();
        self.ca
            .server_valid(&["localhost".into()], &[ip], day(from), day(until))
            .expect("leaf")
    }

    /// Writes a serving pair as `tls.crt` / `tls.key` in the directory.
    pub fn write_leaf(&self) -> (Pair, TlsFiles) {
        let pair = self.leaf();
        std::fs::write(self.path("tls.crt"), &pair.cert_pem).unwrap();
        std::fs::write(self.path("tls.key"), &pair.key_pem).unwrap();
        let files = TlsFiles {
            cert: self.path("tls.crt"),
            key: self.path("tls.key"),
            client_ca: None,
        };
        (pair, files)
    }

    /// [`test_settings`] for a fresh serving pair in the directory.
    pub fn settings(&self) -> ServerSettings {
        let (_, files) = self.write_leaf();
        test_settings(files)
    }

    /// [`Pki::settings`] reading (and reloading) the configuration file
    /// `config.yaml`, first written with `yaml`; and the file's path.
    pub fn settings_with_config(&self, yaml: &str) -> (ServerSettings, PathBuf) {
        let path = self.path("config.yaml");
        std::fs::write(&path, yaml).unwrap();
        let mut settings = self.settings();
        settings.config_path = Some(path.clone());
        (settings, path)
    }

    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        client_config(self.ca.cert_pem().as_bytes()).expect("a client configuration")
    }
}

/// How often a test server polls its certificate and configuration files;
/// short so reload tests finish quickly (production polls every 5 s).
pub const RELOAD: Duration = Duration::from_millis(200);

/// How long a test waits for something that should happen within a few
/// reload polls before it fails.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// Test settings for `files`: loopback, port 0, fast reloads, no shutdown
/// delay, the fixed clock.
pub fn test_settings(files: TlsFiles) -> ServerSettings {
    let mut s = ServerSettings::new(files);
    s.addr = "127.0.0.1:0".parse().unwrap();
    s.admin_addr = "127.0.0.1:0".parse().unwrap();
    s.tuning.reload_interval = RELOAD;
    s.tuning.shutdown_delay = Duration::ZERO;
    s.clock = crate::clock::now;
    s
}

/// Writes `bytes` to `path` atomically (rename), as config management does.
pub fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

pub struct Running {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    pub task: JoinHandle<Result<(), ServeError>>,
}

impl Running {
    pub async fn start(settings: ServerSettings) -> Running {
        let server = Server::bind(settings).await.expect("server binds");
        let (addr, admin) = (server.local_addr(), server.admin_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.serve(async {
            let _ = stopped.await;
        }));
        let running = Running {
            addr,
            admin,
            stop: Some(stop),
            task,
        };
        // Serving once /readyz says so.
        eventually("ready", Duration::from_secs(10), || async {
            admin_get(admin, "/readyz").await.0 == 200
        })
        .await;
        running
    }

    pub fn trigger_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    pub async fn shutdown(mut self) {
        self.trigger_shutdown();
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("server stops")
            .expect("server task")
            .expect("clean shutdown");
    }

    /// `https://127.0.0.1:PORT{path}` on the admission port.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    pub async fn metrics(&self) -> String {
        let (status, body) = admin_get(self.admin, "/metrics").await;
        assert_eq!(status, 200);
        body
    }

    /// The value of the one series `name` with exactly `labels`.
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        Metrics::parse(&self.metrics().await).value(name, labels)
    }
}

/// A server on fresh test settings with `tune` applied to their tuning, and
/// the PKI that serves and trusts it.
pub async fn start_tuned(tune: impl FnOnce(&mut Tuning)) -> (Pki, Running) {
    let pki = Pki::new();
    let mut settings = pki.settings();
    tune(&mut settings.tuning);
    let server = Running::start(settings).await;
    (pki, server)
}

/// A server on fresh test settings that reads (and reloads) the
/// configuration file `config.yaml`, first written with `yaml`; its PKI and
/// the file's path.
pub async fn start_with_config(yaml: &str) -> (Pki, Running, PathBuf) {
    let pki = Pki::new();
    let (settings, path) = pki.settings_with_config(yaml);
    let server = Running::start(settings).await;
    (pki, server, path)
}

/// Polls `check` until it holds, failing the test after `patience`.
pub async fn eventually<F, Fut>(what: &str, patience: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return started.elapsed();
        }
        assert!(started.elapsed() < patience, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One plain HTTP/1.1 GET on a fresh connection to the admin port; status
/// 0 when the connection fails.
pub async fn admin_get(admin: SocketAddr, path: &str) -> (u16, String) {
    let Ok(mut stream) = TcpStream::connect(admin).await else {
        return (0, String::new());
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return (0, String::new());
    }
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (status, body) = crate::wire::status_and_body(&text);
    (status.unwrap_or(0), body)
}

/// Asserts that `response` has the header `name` with exactly `value`.
#[track_caller]
pub fn assert_header(response: &Response, name: &str, value: &str) {
    assert_eq!(
        response.header(name),
        Some(value),
        "{name} in {:?}",
        response.headers
    );
}

/// One review on a fresh TLS connection; how long it took, or the error.
pub async fn timed_review(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    body: &[u8],
) -> Result<Duration, String> {
    let started = Instant::now();
    let mut tls = tls_connect(addr, config).await.map_err(|e| e.to_string())?;
    tls.write_all(&post("/mutate", "application/json", body))
        .await
        .map_err(|e| e.to_string())?;
    let response = read_response(&mut tls).await.map_err(|e| e.to_string())?;
    if response.status != 200 {
        return Err(format!("status {}", response.status));
    }
    let answer: Value = serde_json::from_slice(&response.body).map_err(|e| e.to_string())?;
    if answer["response"]["allowed"] != json!(true) {
        return Err(format!("not allowed: {answer}"));
    }
    Ok(started.elapsed())
}

/// An `AdmissionReview` (Pod CREATE) of `pod`, as the apiserver sends it.
pub fn review_body(uid: &str, pod: &Value) -> Vec<u8> {
    crate::reviews::review(uid, "team-a", "CREATE", pod, None)
}

/// A review of a sandbox pod with an egress policy, so the webhook adds the
/// egress sidecar; with `token`, the pod brings its own egress token, without
/// it the webhook asks its token source for one.
pub fn egress_review(uid: &str, token: bool) -> Vec<u8> {
    let policy = r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;
    let mut pod = SandboxPod::new("sb-1")
        .namespace("team-a")
        .annotation("timeout", "1h")
        .annotation("network-policy", policy);
    if token {
        pod = pod.annotation("egress-auth-token", "tok-123");
    }
    review_body(uid, &pod.json())
}
