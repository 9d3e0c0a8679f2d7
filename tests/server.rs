//! The real server on 127.0.0.1 port 0, spoken to over TLS: reqwest (rustls,
//! trusting a generated CA) for ordinary requests, tokio-rustls directly where
//! a test needs control of one connection's bytes.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use rustls::pki_types::ServerName;
use sandbox_webhook::certs::{Ca, Pair};
use sandbox_webhook::config::Config;
use sandbox_webhook::mutate::{Context, RandomTokens, TokenError, TokenSource};
use sandbox_webhook::server::{Handler, ServeError, Server, ServerSettings, TlsFiles};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const NOW: &str = "2026-01-02T03:04:05Z";
const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;
/// Short so reload tests finish quickly; production polls every 5 s.
const RELOAD: Duration = Duration::from_millis(200);
/// How long a test waits for something that should happen within a few
/// poll intervals before it fails.
const PATIENCE: Duration = Duration::from_secs(15);

fn fixed_now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(NOW)
        .expect("valid time")
        .to_utc()
}

// ---------------------------------------------------------------- fixtures

fn sandbox_pod(token: bool) -> Value {
    let mut annotations = json!({
        "opensandbox.io/timeout": "1h",
        "opensandbox.io/network-policy": POLICY,
    });
    if token {
        annotations["opensandbox.io/egress-auth-token"] = json!("tok-123");
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "sb-1",
            "namespace": "team-a",
            "labels": {"opensandbox.io/id": "sb-1"},
            "annotations": annotations,
        },
        "spec": {"containers": [{
            "name": "sandbox",
            "image": "python:3.12-slim",
            "command": ["python", "-m", "http.server"],
        }]},
    })
}

fn admission_review(uid: &str, pod: Value) -> Vec<u8> {
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

/// A CA plus a directory to put files in.
struct Pki {
    ca: Ca,
    dir: tempfile::TempDir,
}

impl Pki {
    fn new() -> Self {
        Pki {
            ca: Ca::new("test-ca", 2).expect("CA"),
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn ca_pem(&self) -> String {
        self.ca.cert_pem()
    }

    fn leaf(&self) -> Pair {
        self.ca
            .server(&["localhost".into()], &["127.0.0.1".parse().unwrap()], 1)
            .expect("leaf")
    }

    /// Writes a serving pair as `tls.crt` / `tls.key` in the directory.
    fn write_leaf(&self) -> (Pair, TlsFiles) {
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
}

fn settings(tls: TlsFiles) -> ServerSettings {
    let mut s = ServerSettings::new(tls);
    s.addr = "127.0.0.1:0".parse().unwrap();
    s.admin_addr = "127.0.0.1:0".parse().unwrap();
    s.tuning.reload_interval = RELOAD;
    s.tuning.shutdown_delay = Duration::ZERO;
    s.clock = fixed_now;
    s
}

struct Running {
    addr: SocketAddr,
    admin: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl Running {
    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    fn trigger_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    async fn shutdown(mut self) {
        self.trigger_shutdown();
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("server stops in time")
            .expect("server task")
            .expect("clean shutdown");
    }

    async fn metric(&self, series: &str) -> f64 {
        metric(self.admin, series).await
    }
}

async fn start(settings: ServerSettings) -> Running {
    let server = Server::bind(settings).await.expect("server binds");
    let (addr, admin) = (server.local_addr(), server.admin_addr());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    let running = Running {
        addr,
        admin,
        stop: Some(stop),
        task,
    };
    eventually("server ready", || async {
        admin_get(running.admin, "/readyz").await.0 == 200
    })
    .await;
    running
}

/// Polls `check` until it holds, failing the test after [`PATIENCE`].
/// Returns how long it took.
async fn eventually<F, Fut>(what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    loop {
        if check().await {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < PATIENCE,
            "timed out waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn client(ca_pem: &str) -> reqwest::Client {
    client_builder(ca_pem).build().expect("client")
}

fn client_builder(ca_pem: &str) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("CA"))
        .http1_only()
        .tls_info(true)
        .timeout(Duration::from_secs(20))
}

async fn admin_get(admin: SocketAddr, path: &str) -> (u16, String) {
    let result = reqwest::Client::new()
        .get(format!("http://{admin}{path}"))
        .timeout(Duration::from_secs(5))
        .send()
        .await;
    match result {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(_) => (0, String::new()),
    }
}

/// The value of one series (name plus labels, exactly as exposed).
async fn metric(admin: SocketAddr, series: &str) -> f64 {
    let (status, text) = admin_get(admin, "/metrics").await;
    assert_eq!(status, 200, "metrics endpoint");
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in:\n{text}"))
}

async fn post_review(client: &reqwest::Client, url: &str, body: Vec<u8>) -> reqwest::Response {
    client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request")
}

fn peer_cert(response: &reqwest::Response) -> Vec<u8> {
    response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .expect("TLS info with the peer certificate")
        .to_vec()
}

fn der(pem: &str) -> Vec<u8> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .expect("one certificate")
        .expect("PEM")
        .to_vec()
}

/// The decoded JSON patch of an AdmissionReview response.
fn patch_of(body: &[u8]) -> Value {
    let review = sandbox_webhook::review::parse_response(body).expect("AdmissionReview");
    let patch = review.response.expect("response").patch.expect("a patch");
    serde_json::from_slice(&patch).expect("JSON patch")
}

async fn assert_error(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status().as_u16(), status);
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(content_type, "application/json");
    let body: Value = response.json().await.expect("JSON error body");
    assert_eq!(body["status"], json!(status), "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );
    body
}

/// Writes `bytes` to `path` atomically (rename), as config management does.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

// ------------------------------------------------------- raw TLS helpers

async fn tls_connect(
    addr: SocketAddr,
    ca_pem: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut ca_pem.as_bytes()) {
        roots.add(cert?).expect("CA cert");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await?;
    connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

/// Reads one HTTP/1.1 response with a Content-Length body.
async fn read_response<S: AsyncReadExt + Unpin>(stream: &mut S) -> (u16, String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed before a response");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let status = head[9..12].parse().expect("status code");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().expect("length"))
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = stream.read(&mut chunk).await.expect("read");
        assert!(n > 0, "connection closed inside the body");
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[header_end..header_end + length].to_vec();
    (status, head, body)
}

// ------------------------------------------------------------------ tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_exactly_like_review_and_the_cli() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let config_path = pki.path("config.yaml");
    std::fs::write(
        &config_path,
        "egress: {image: example.com/egress:v1}\nexpiry: {maxTimeoutSeconds: 86400}\n",
    )
    .unwrap();
    let mut s = settings(files);
    s.config_path = Some(config_path.clone());
    let server = start(s).await;

    let body = admission_review("uid-same", sandbox_pod(true));
    let response = post_review(&client(&pki.ca_pem()), &server.url("/mutate"), body.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "application/json"
    );
    let served = response.bytes().await.unwrap().to_vec();

    let config = Config::load(&config_path).unwrap();
    let ctx = Context {
        config: &config,
        now: fixed_now(),
        own_namespace: None,
        tokens: &RandomTokens,
    };
    let direct = sandbox_webhook::review::review(&body, &ctx).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&served),
        String::from_utf8_lossy(&direct.body)
    );

    let input = pki.path("review.json");
    std::fs::write(&input, &body).unwrap();
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_sandbox-webhook"))
        .args(["review", "--now", NOW, "--config"])
        .arg(&config_path)
        .arg("-f")
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        cli.status.success(),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&served).trim_end(),
        String::from_utf8_lossy(&cli.stdout).trim_end()
    );

    // And it really is a mutation with the configured image.
    let patch = patch_of(&served).to_string();
    assert!(patch.contains("example.com/egress:v1"), "{patch}");
    assert_eq!(
        server
            .metric(
                r#"sandbox_webhook_admission_requests_total{operation="CREATE",outcome="mutated"}"#
            )
            .await,
        1.0
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn null_handler_allows_without_looking() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let mut s = settings(files);
    s.handler = Handler::Null;
    let server = start(s).await;

    let body = admission_review("uid-null", sandbox_pod(true));
    let response = post_review(&client(&pki.ca_pem()), &server.url("/mutate"), body.clone()).await;
    assert_eq!(response.status(), 200);
    let served = response.bytes().await.unwrap().to_vec();
    assert_eq!(served, sandbox_webhook::review::null_review(&body).unwrap());
    let review = sandbox_webhook::review::parse_response(&served).expect("AdmissionReview");
    let response = review.response.expect("response");
    assert!(response.allowed);
    assert!(response.patch.is_none());
    assert_eq!(
        server
            .metric(
                r#"sandbox_webhook_admission_requests_total{operation="CREATE",outcome="unchanged"}"#
            )
            .await,
        1.0
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_have_json_bodies() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let server = start(settings(files)).await;
    let c = client(&pki.ca_pem());
    let mutate = server.url("/mutate");

    let r = post_review(&c, &mutate, Vec::new()).await;
    let body = assert_error(r, 400).await;
    assert_eq!(body["error"], "request body is empty");
    let r = post_review(&c, &mutate, b"{not json".to_vec()).await;
    let body = assert_error(r, 400).await;
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("not an AdmissionReview")
    );
    let r = post_review(&c, &mutate, br#"{"kind":"AdmissionReview"}"#.to_vec()).await;
    assert_error(r, 400).await;

    // Content-Type: wrong, missing; parameters are fine.
    let r = c
        .post(&mutate)
        .header("content-type", "text/plain")
        .body(admission_review("u", sandbox_pod(true)))
        .send()
        .await
        .unwrap();
    assert_error(r, 415).await;
    let r = c
        .post(&mutate)
        .body(admission_review("u", sandbox_pod(true)))
        .send()
        .await
        .unwrap();
    assert_error(r, 415).await;
    let r = c
        .post(&mutate)
        .header("content-type", "application/json; charset=utf-8")
        .body(admission_review("u", sandbox_pod(true)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // (Over the limit: see `oversize_bodies_are_413`.) Exactly the limit is read (and then is not an AdmissionReview).
    let r = post_review(&c, &mutate, vec![b' '; 7 * 1024 * 1024]).await;
    assert_error(r, 400).await;

    let r = c.post(server.url("/nope")).send().await.unwrap();
    assert_error(r, 404).await;
    let r = c.get(server.url("/")).send().await.unwrap();
    assert_error(r, 404).await;
    let r = c.get(&mutate).send().await.unwrap();
    assert_eq!(r.headers()["allow"], "POST");
    assert_error(r, 405).await;

    // 400, 400, 400, 415, 415, 400 on /mutate are admission errors.
    assert_eq!(
        server
            .metric(
                r#"sandbox_webhook_admission_requests_total{operation="unknown",outcome="error"}"#
            )
            .await,
        6.0
    );
    server.shutdown().await;
}

/// Raw connections: an HTTP client that is still writing a body the server
/// has already refused sees a broken pipe instead of the 413.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_bodies_are_413() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let server = start(settings(files)).await;

    // Declared too large: refused from the headers alone, body never sent.
    let mut stream = tls_connect(server.addr, &pki.ca_pem()).await.unwrap();
    let head = format!(
        "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        7 * 1024 * 1024 + 1
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let (status, head, body) = read_response(&mut stream).await;
    assert_eq!(status, 413);
    assert!(head.contains("content-type: application/json"), "{head}");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["status"], 413);
    assert!(
        body["error"].as_str().unwrap().contains("7340032"),
        "{body}"
    );

    // No Content-Length: the limit is enforced while reading. The writer runs
    // on its own, since the server answers before the client is done.
    let stream = tls_connect(server.addr, &pki.ca_pem()).await.unwrap();
    let (mut read, mut write) = tokio::io::split(stream);
    let writer = tokio::spawn(async move {
        let head = "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        write.write_all(head.as_bytes()).await?;
        let chunk = vec![b' '; 1024 * 1024];
        for _ in 0..8 {
            write
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .await?;
            write.write_all(&chunk).await?;
            write.write_all(b"\r\n").await?;
        }
        write.write_all(b"0\r\n\r\n").await?;
        std::io::Result::Ok(())
    });
    let (status, _, body) = read_response(&mut read).await;
    assert_eq!(status, 413);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["status"], 413);
    writer.abort();
    assert_eq!(
        server
            .metric(
                r#"sandbox_webhook_admission_requests_total{operation="unknown",outcome="error"}"#
            )
            .await,
        2.0
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_hits_the_deadline() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let mut s = settings(files);
    s.tuning.request_timeout = Duration::from_millis(300);
    let server = start(s).await;
    let mut stream = tls_connect(server.addr, &pki.ca_pem()).await.unwrap();
    let head = "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
                content-length: 100\r\n\r\n{";
    stream.write_all(head.as_bytes()).await.unwrap();
    let (status, _, body) = read_response(&mut stream).await;
    assert_eq!(status, 503);
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["status"], 503);
    server.shutdown().await;
}

/// Sets up `dir` like a kubelet Secret volume: the files are symlinks
/// through `..data`, which points at a timestamped directory.
fn kubelet_swap(dir: &Path, version: &str, cert: &[u8], key: &[u8]) {
    let target = dir.join(version);
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("tls.crt"), cert).unwrap();
    std::fs::write(target.join("tls.key"), key).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(version, &tmp).unwrap();
    // The atomic step: rename over the old `..data` link.
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_rotation_via_kubelet_symlink_swap() {
    let pki = Pki::new();
    let dir = pki.path("tls");
    std::fs::create_dir(&dir).unwrap();
    let old = pki.leaf();
    kubelet_swap(
        &dir,
        "..2026_01_01_00_00_00.1",
        old.cert_pem.as_bytes(),
        old.key_pem.as_bytes(),
    );
    let files = TlsFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        client_ca: None,
    };
    let server = start(settings(files)).await;
    let url = server.url("/mutate");
    let review = || admission_review("uid-rot", sandbox_pod(true));

    // A keep-alive connection, opened before the rotation.
    let keep_alive = client(&pki.ca_pem());
    let r = post_review(&keep_alive, &url, review()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(peer_cert(&r), der(&old.cert_pem));

    let new = pki.leaf();
    kubelet_swap(
        &dir,
        "..2026_01_02_00_00_00.2",
        new.cert_pem.as_bytes(),
        new.key_pem.as_bytes(),
    );
    let latency = eventually("a new connection sees the new certificate", || async {
        // No pooling: every request is a new connection and handshake.
        let fresh = client_builder(&pki.ca_pem())
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let r = post_review(&fresh, &url, review()).await;
        r.status() == 200 && peer_cert(&r) == der(&new.cert_pem)
    })
    .await;
    eprintln!(
        "observed certificate reload latency (..data swap, poll every {RELOAD:?}): {latency:?}"
    );

    // The old connection was not dropped: it still answers, with the
    // certificate it was established with.
    let r = post_review(&keep_alive, &url, review()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(peer_cert(&r), der(&old.cert_pem));
    assert_eq!(
        server
            .metric(r#"sandbox_webhook_cert_reloads_total{result="success"}"#)
            .await,
        1.0
    );

    // A corrupt certificate: rejected, counted, the current pair stays.
    let failures = r#"sandbox_webhook_cert_reloads_total{result="failure"}"#;
    assert_eq!(server.metric(failures).await, 0.0);
    kubelet_swap(
        &dir,
        "..2026_01_03_00_00_00.3",
        b"-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n",
        new.key_pem.as_bytes(),
    );
    eventually("the failure is counted", || async {
        server.metric(failures).await == 1.0
    })
    .await;
    let fresh = client_builder(&pki.ca_pem())
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let r = post_review(&fresh, &url, review()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(peer_cert(&r), der(&new.cert_pem));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_rotation_by_replacing_files() {
    let pki = Pki::new();
    let (old, files) = pki.write_leaf();
    let server = start(settings(files.clone())).await;
    let url = server.url("/mutate");
    let review = || admission_review("uid-rot", sandbox_pod(true));
    let fresh = || {
        client_builder(&pki.ca_pem())
            .pool_max_idle_per_host(0)
            .build()
            .unwrap()
    };
    let r = post_review(&fresh(), &url, review()).await;
    assert_eq!(peer_cert(&r), der(&old.cert_pem));

    let new = pki.leaf();
    replace(&files.key, new.key_pem.as_bytes());
    replace(&files.cert, new.cert_pem.as_bytes());
    let latency = eventually("a new connection sees the new certificate", || async {
        let r = post_review(&fresh(), &url, review()).await;
        r.status() == 200 && peer_cert(&r) == der(&new.cert_pem)
    })
    .await;
    eprintln!(
        "observed certificate reload latency (file replace, poll every {RELOAD:?}): {latency:?}"
    );

    // A valid certificate with somebody else's key: refused.
    let failures = r#"sandbox_webhook_cert_reloads_total{result="failure"}"#;
    let before = server.metric(failures).await;
    let other = pki.leaf();
    replace(&files.cert, other.cert_pem.as_bytes());
    eventually("the mismatch is counted", || async {
        server.metric(failures).await == before + 1.0
    })
    .await;
    let r = post_review(&fresh(), &url, review()).await;
    assert_eq!(r.status(), 200);
    assert_eq!(peer_cert(&r), der(&new.cert_pem));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_certificate_fails_start_naming_the_file() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    std::fs::write(&files.key, "not a key").unwrap();
    let err = Server::bind(settings(files.clone()))
        .await
        .err()
        .expect("refused");
    let text = err.to_string();
    assert!(text.contains(&files.key.display().to_string()), "{text}");

    let other = pki.leaf();
    std::fs::write(&files.key, &other.key_pem).unwrap();
    let err = Server::bind(settings(files.clone()))
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("does not match"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_requires_a_client_certificate_from_the_ca() {
    let pki = Pki::new();
    let (_, mut files) = pki.write_leaf();
    let client_ca = Ca::new("apiserver-client-ca", 1).unwrap();
    std::fs::write(pki.path("client-ca.crt"), client_ca.cert_pem()).unwrap();
    files.client_ca = Some(pki.path("client-ca.crt"));
    let server = start(settings(files)).await;
    let url = server.url("/mutate");
    let review = admission_review("uid-mtls", sandbox_pod(true));

    let anonymous = client(&pki.ca_pem());
    let refused = anonymous
        .post(&url)
        .header("content-type", "application/json")
        .body(review.clone())
        .send()
        .await;
    assert!(
        refused.is_err(),
        "a client without a certificate got {refused:?}"
    );

    let identity = |pair: &Pair| {
        reqwest::Identity::from_pem(format!("{}{}", pair.cert_pem, pair.key_pem).as_bytes())
            .unwrap()
    };
    let stranger = Ca::new("someone-else", 1)
        .unwrap()
        .client("kube-apiserver", 1)
        .unwrap();
    let wrong = client_builder(&pki.ca_pem())
        .identity(identity(&stranger))
        .build()
        .unwrap();
    let refused = wrong
        .post(&url)
        .header("content-type", "application/json")
        .body(review.clone())
        .send()
        .await;
    assert!(
        refused.is_err(),
        "a certificate from another CA got {refused:?}"
    );

    let apiserver = client_ca.client("kube-apiserver", 1).unwrap();
    let trusted = client_builder(&pki.ca_pem())
        .identity(identity(&apiserver))
        .build()
        .unwrap();
    let r = post_review(&trusted, &url, review).await;
    assert_eq!(r.status(), 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_reload_applies_good_files_and_keeps_the_old_on_bad_ones() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let config_path = pki.path("config.yaml");
    std::fs::write(&config_path, "egress: {image: example.com/egress:v1}\n").unwrap();
    let mut s = settings(files);
    s.config_path = Some(config_path.clone());
    let server = start(s).await;
    let c = client(&pki.ca_pem());
    let url = server.url("/mutate");
    let egress_image = || async {
        let r = post_review(&c, &url, admission_review("uid-cfg", sandbox_pod(true))).await;
        assert_eq!(r.status(), 200);
        let patch = patch_of(&r.bytes().await.unwrap()).to_string();
        ["v1", "v2"]
            .into_iter()
            .find(|v| patch.contains(&format!("example.com/egress:{v}")))
            .expect("a known egress image")
    };
    assert_eq!(egress_image().await, "v1");

    replace(&config_path, b"egress: {image: example.com/egress:v2}\n");
    let latency = eventually("the new image is used", || async {
        egress_image().await == "v2"
    })
    .await;
    eprintln!("observed config reload latency (poll every {RELOAD:?}): {latency:?}");
    assert_eq!(
        server
            .metric(r#"sandbox_webhook_config_reloads_total{result="success"}"#)
            .await,
        1.0
    );

    let failures = r#"sandbox_webhook_config_reloads_total{result="failure"}"#;
    assert_eq!(server.metric(failures).await, 0.0);
    replace(
        &config_path,
        b"egress: {image: example.com/egress:v3, color: blue}\n",
    );
    eventually("the broken file is counted", || async {
        server.metric(failures).await == 1.0
    })
    .await;
    assert_eq!(egress_image().await, "v2");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_tls_listener() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let server = Server::bind(settings(files)).await.unwrap();
    let admin = server.admin_addr();
    // Bound, admin answering, TLS not serving yet.
    assert_eq!(admin_get(admin, "/livez").await.0, 200);
    assert_eq!(admin_get(admin, "/readyz").await.0, 503);
    assert_eq!(admin_get(admin, "/nope").await.0, 404);

    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(async move {
        let _ = stopped.await;
    }));
    eventually("ready", || async {
        admin_get(admin, "/readyz").await.0 == 200
    })
    .await;
    assert_eq!(admin_get(admin, "/livez").await.0, 200);
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_the_request_in_flight() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let mut server = start(settings(files)).await;
    let body = admission_review("uid-drain", sandbox_pod(true));
    let (first, rest) = body.split_at(body.len() / 2);

    let mut stream = tls_connect(server.addr, &pki.ca_pem()).await.unwrap();
    let head = format!(
        "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(first).await.unwrap();
    stream.flush().await.unwrap();
    let in_flight = "sandbox_webhook_requests_in_flight";
    eventually("the request is in the handler", || async {
        server.metric(in_flight).await == 1.0
    })
    .await;

    server.trigger_shutdown();
    eventually("not ready while draining", || async {
        admin_get(server.admin, "/readyz").await.0 == 503
    })
    .await;
    eventually("no new connections", || async {
        TcpStream::connect(server.addr).await.is_err()
    })
    .await;

    stream.write_all(rest).await.unwrap();
    let (status, head, body) = read_response(&mut stream).await;
    assert_eq!(status, 200);
    assert!(head.contains("connection: close"), "{head}");
    let review: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(review["response"]["uid"], "uid-drain");
    assert_eq!(review["response"]["allowed"], true);
    tokio::time::timeout(PATIENCE, server.task)
        .await
        .expect("drained in time")
        .unwrap()
        .unwrap();
}

/// Panics whenever the webhook needs a fresh egress token.
struct PanickingTokens;

impl TokenSource for PanickingTokens {
    fn token(&self) -> Result<String, TokenError> {
        panic!("token source exploded")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_answers_500_and_is_counted() {
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let mut s = settings(files);
    s.tokens = Arc::new(PanickingTokens);
    let server = start(s).await;
    let c = client(&pki.ca_pem());
    let url = server.url("/mutate");

    // No token annotation: the handler asks the token source and panics.
    let r = post_review(&c, &url, admission_review("uid-panic", sandbox_pod(false))).await;
    let body = assert_error(r, 500).await;
    assert_eq!(body["error"], "internal error");
    assert_eq!(server.metric("sandbox_webhook_panics_total").await, 1.0);
    assert_eq!(
        server.metric("sandbox_webhook_requests_in_flight").await,
        0.0
    );

    // The server (and the same keep-alive client) carry on.
    let r = post_review(&c, &url, admission_review("uid-ok", sandbox_pod(true))).await;
    assert_eq!(r.status(), 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_requests_over_32_connections() {
    const CONNECTIONS: usize = 32;
    const REQUESTS: usize = 1000;
    let pki = Pki::new();
    let (_, files) = pki.write_leaf();
    let server = start(settings(files)).await;
    let url = Arc::new(server.url("/mutate"));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();

    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        // One client with at most one connection each, used sequentially:
        // 32 keep-alive connections in all.
        let c = client_builder(&pki.ca_pem())
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let (url, next) = (url.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut ok = 0;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= REQUESTS {
                    return ok;
                }
                let uid = format!("uid-{i}");
                let r = post_review(&c, &url, admission_review(&uid, sandbox_pod(true))).await;
                assert_eq!(r.status(), 200);
                let review: Value = r.json().await.unwrap();
                assert_eq!(review["response"]["uid"], json!(uid));
                assert_eq!(review["response"]["allowed"], true);
                assert_eq!(review["response"]["patchType"], "JSONPatch");
                ok += 1;
            }
        }));
    }
    let mut answered = 0;
    for t in tasks {
        answered += t.await.expect("client task");
    }
    assert_eq!(answered, REQUESTS);
    eprintln!(
        "{REQUESTS} requests over {CONNECTIONS} connections answered in {:?} (debug build)",
        started.elapsed()
    );
    assert_eq!(
        server
            .metric(
                r#"sandbox_webhook_admission_requests_total{operation="CREATE",outcome="mutated"}"#
            )
            .await,
        REQUESTS as f64
    );
    assert_eq!(
        server.metric("sandbox_webhook_requests_in_flight").await,
        0.0
    );
    server.shutdown().await;
}
