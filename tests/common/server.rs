//! A real server on 127.0.0.1 port 0 and clients for it: a generated CA and
//! serving pair, the server running in the test's runtime, raw TLS
//! connections for tests that need control of one connection's bytes, and
//! the admin port.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use sandbox_webhook::certs::{Ca, Pair};
use sandbox_webhook::server::{ServeError, Server, ServerSettings, TlsFiles};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A CA plus a directory to put files in.
pub struct Pki {
    pub ca: Ca,
    pub dir: tempfile::TempDir,
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

    /// Test settings: loopback, port 0, fast reloads, the fixed clock.
    pub fn settings(&self) -> ServerSettings {
        let (_, files) = self.write_leaf();
        let mut s = ServerSettings::new(files);
        s.addr = "127.0.0.1:0".parse().unwrap();
        s.admin_addr = "127.0.0.1:0".parse().unwrap();
        s.tuning.reload_interval = Duration::from_millis(200);
        s.tuning.shutdown_delay = Duration::ZERO;
        s.clock = super::clock::now;
        s
    }

    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        let der = rustls_pemfile::certs(&mut self.ca.cert_pem().as_bytes())
            .next()
            .expect("a CA certificate")
            .expect("PEM");
        roots.add(der).expect("CA");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(config)
    }
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

    pub async fn metrics(&self) -> String {
        let (status, body) = admin_get(self.admin, "/metrics").await;
        assert_eq!(status, 200);
        body
    }
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
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    (status, body.unwrap_or_default())
}

pub type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// A TLS connection to the admission port that trusts the test CA.
pub async fn tls_connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").expect("server name");
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
}

/// An HTTP/1.1 POST of `body` to `path` as bytes on the wire.
pub fn post(path: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

/// A parsed HTTP/1.1 response: status, headers (lower-cased names) and body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one response with a `Content-Length` body from `stream`.
pub async fn read_response<S: AsyncReadExt + Unpin>(stream: &mut S) -> std::io::Result<Response> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0usize);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    Ok(Response {
        status,
        headers,
        body,
    })
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

/// An AdmissionReview (Pod CREATE) of `pod`, as the apiserver sends it.
pub fn review_body(uid: &str, pod: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "team-a",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:opensandbox:controller"},
            "object": pod,
            "dryRun": false,
        },
    }))
    .expect("serializable")
}
