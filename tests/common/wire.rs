//! HTTP/1.1 as bytes on the wire, without a client stack: a TLS connection
//! that trusts a CA, a request, one response read back, a keep-alive client
//! at full speed, and a blocking GET for admin ports. No `unwrap`: the
//! examples (`examples/attack.rs`, the cluster benchmarks) use it too.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// A rustls client configuration that trusts the certificates in `ca_pem`.
pub fn client_config(ca_pem: &[u8]) -> Result<Arc<rustls::ClientConfig>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut &ca_pem[..]) {
        roots.add(cert?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth(),
    ))
}

/// A TLS connection to `addr` that expects the server name `localhost`.
pub async fn tls_connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
) -> std::io::Result<Tls> {
    tls_over(TcpStream::connect(addr).await?, config).await
}

/// TLS over a TCP connection already open, expecting `localhost`.
pub async fn tls_over(tcp: TcpStream, config: Arc<rustls::ClientConfig>) -> std::io::Result<Tls> {
    let name = ServerName::try_from("localhost").map_err(std::io::Error::other)?;
    tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
}

/// An HTTP/1.1 POST of `body` to `path`.
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

    /// Whether the server said it closes the connection after this answer.
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// Reads one response with a `Content-Length` body from `stream`.
pub async fn read_response<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<Response> {
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

/// A blocking plain-HTTP GET of `path` on `host` (`127.0.0.1:PORT`, an
/// admin port) on a fresh connection; the status and the body.
pub fn get(host: &str, path: &str) -> Result<(u16, String), Error> {
    get_with(host, path, &[])
}

/// [`get`] with extra request `headers`.
pub fn get_with(host: &str, path: &str, headers: &[(&str, &str)]) -> Result<(u16, String), Error> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    let extra: String = headers
        .iter()
        .flat_map(|(k, v)| [*k, ": ", *v, "\r\n"])
        .collect();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (code, body) = status_and_body(&text);
    Ok((code.ok_or("bad status line")?, body))
}

/// The status code (`None`: no valid status line) and the body of an
/// HTTP/1.1 response read whole.
pub fn status_and_body(response: &str) -> (Option<u16>, String) {
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok());
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

/// What one keep-alive client saw until the server stopped accepting.
#[derive(Debug, Default, Clone, Copy)]
pub struct Load {
    pub answered: usize,
    /// Written whole and never answered: what Go's client (the
    /// apiserver's) reports as a failed admission, as it does not retry a
    /// POST.
    pub lost: usize,
}

impl std::ops::Add for Load {
    type Output = Load;
    fn add(self, other: Load) -> Load {
        Load {
            answered: self.answered + other.answered,
            lost: self.lost + other.lost,
        }
    }
}

/// A client at full speed: `request` after `request` on a keep-alive
/// connection, a new connection when an answer says `Connection: close` (as
/// Go's client does), until a connection cannot be opened (the listener is
/// closed). Each answer also counts in `answered`.
pub async fn keep_alive_client(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    request: Vec<u8>,
    answered: Arc<AtomicUsize>,
) -> Load {
    let mut load = Load::default();
    let mut conn: Option<Tls> = None;
    loop {
        if let Some(tls) = conn.as_mut()
            && closed_by_server(tls).await
        {
            conn = None;
        }
        let tls = match conn.as_mut() {
            Some(tls) => tls,
            None => match tls_connect(addr, config.clone()).await {
                Ok(tls) => conn.insert(tls),
                Err(_) => return load,
            },
        };
        let written = async {
            tls.write_all(&request).await?;
            tls.flush().await
        }
        .await;
        if written.is_err() {
            // Nothing may have reached the server; Go would not count it.
            conn = None;
            continue;
        }
        if let Ok(response) = read_response(tls).await {
            load.answered += 1;
            answered.fetch_add(1, Ordering::Relaxed);
            if response.closes() {
                conn = None;
            }
        } else {
            load.lost += 1;
            conn = None;
        }
    }
}

/// Whether the server has closed `tls` while it sat idle: an end or an
/// error is ready to read. Go's transport keeps reading every idle
/// connection, so it sees such a close before it reuses the connection and
/// opens another instead; only a close that crosses the next request on
/// the wire fails it.
async fn closed_by_server(tls: &mut Tls) -> bool {
    let mut byte = [0u8; 1];
    let mut buf = ReadBuf::new(&mut byte);
    // One poll of a read: pending means open and quiet.
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *tls).poll_read(cx, &mut buf).is_ready()))
        .await
}

/// `VmRSS` of `pid` in KiB; 0 once it is gone.
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
