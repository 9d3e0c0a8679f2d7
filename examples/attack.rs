//! Attacks a running `sandbox-webhook serve` on loopback the way a client
//! that is not the apiserver can (SPEC 9), while a well-behaved probe sends
//! one review on a fresh TLS connection every 100 ms. Prints one line of
//! figures per attack, so a build before and after a change can be compared
//! with the same script (bench/attack.sh runs both).
//!
//! ```text
//! cargo run --release --example attack -- ATTACK ADDR ADMIN_ADDR CA_PEM PID
//! ```
//!
//! ATTACK: raw-tcp | idle-after-request | trickle | stalled-bodies |
//! declared-bodies | admin-flood | pipeline | early-close | shutdown |
//! shutdown-load. Every loop here is bounded in count and time, and only
//! loopback addresses are accepted.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::wire::{
    Error, Load, Tls, client_config, keep_alive_client, post, read_response, rss_kib,
    tls_connect as connect,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const ATTACK_SECONDS: u64 = 8;
const BODY: usize = 7 * 1024 * 1024;

struct Target {
    addr: SocketAddr,
    admin: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    pid: u32,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [attack, addr, admin, ca, pid] = args.as_slice() else {
        return Err("usage: attack ATTACK ADDR ADMIN_ADDR CA_PEM PID".into());
    };
    let (addr, admin): (SocketAddr, SocketAddr) = (addr.parse()?, admin.parse()?);
    if !addr.ip().is_loopback() || !admin.ip().is_loopback() {
        return Err("only loopback targets".into());
    }
    let target = Target {
        addr,
        admin,
        tls: client_config(&std::fs::read(ca)?)?,
        pid: pid.parse()?,
    };
    let rss_before = rss_kib(target.pid);
    let rss_peak = Arc::new(std::sync::atomic::AtomicU64::new(rss_before));
    let sampler = {
        let (peak, pid) = (rss_peak.clone(), target.pid);
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss_kib(pid), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let attacker = match attack.as_str() {
        "raw-tcp" => tokio::spawn(raw_tcp(target.addr)),
        "idle-after-request" => tokio::spawn(hold_tls(
            target.addr,
            target.tls.clone(),
            (1100, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec()),
            true,
        )),
        "declared-bodies" => tokio::spawn(hold_tls(
            target.addr,
            target.tls.clone(),
            (400, declared_body_head()),
            false,
        )),
        "trickle" => tokio::spawn(trickle(target.addr, target.tls.clone())),
        "stalled-bodies" => tokio::spawn(stalled_bodies(target.addr, target.tls.clone())),
        "admin-flood" => tokio::spawn(raw_tcp(target.admin)),
        "pipeline" => tokio::spawn(pipeline(target.addr, target.tls.clone())),
        "early-close" => {
            let failures = early_close(target.addr, target.tls.clone()).await;
            println!(
                "{attack}: {failures} of 50 reviews after an early 415 failed on the reused connection"
            );
            return Ok(());
        }
        "shutdown-load" => {
            let load = shutdown_load(&target).await?;
            println!(
                "{attack}: 32 keep-alive clients at full speed, SIGTERM after 2 s: {} answered, {} written and never answered",
                load.answered, load.lost
            );
            return Ok(());
        }
        "shutdown" => {
            // SAFETY: kill only sends a signal.
            unsafe { libc::kill(i32::try_from(target.pid)?, libc::SIGTERM) };
            tokio::spawn(async { String::from("SIGTERM sent at the start") })
        }
        other => return Err(format!("unknown attack {other}").into()),
    };
    // Let the attack take hold, then probe while it runs.
    tokio::time::sleep(Duration::from_secs(if attack == "shutdown" {
        0
    } else {
        2
    }))
    .await;
    // The admin flood is judged by what the kubelet sees: its probes.
    let kind = if attack == "admin-flood" {
        ProbeKind::Readyz
    } else {
        ProbeKind::Review
    };
    let probe = probe(&target, kind, Duration::from_secs(ATTACK_SECONDS - 3)).await;
    let held = attacker.await.unwrap_or_default();
    sampler.abort();
    let peak = rss_peak.load(std::sync::atomic::Ordering::Relaxed);
    println!(
        "{attack}: {kind:?} probe {} ok / {} failed, p50 {:?}, max {:?}; server RSS {} MiB -> peak {} MiB; {held}",
        probe.ok,
        probe.failed,
        probe.p50,
        probe.max,
        rss_before / 1024,
        peak / 1024
    );
    Ok(())
}

struct Probe {
    ok: usize,
    failed: usize,
    p50: Duration,
    max: Duration,
}

#[derive(Clone, Copy, Debug)]
enum ProbeKind {
    /// A review on a fresh TLS connection to the admission port.
    Review,
    /// `GET /readyz` on a fresh plain connection to the admin port.
    Readyz,
}

/// A fresh-connection probe every 100 ms; one slower than 1 s fails.
async fn probe(target: &Target, kind: ProbeKind, for_: Duration) -> Probe {
    let body = review_request();
    let started = Instant::now();
    let mut times = Vec::new();
    let mut failed = 0;
    while started.elapsed() < for_ {
        let t = Instant::now();
        let result = tokio::time::timeout(Duration::from_secs(1), async {
            match kind {
                ProbeKind::Review => {
                    let mut tls = connect(target.addr, target.tls.clone()).await?;
                    tls.write_all(&body).await?;
                    read_status(&mut tls).await
                }
                ProbeKind::Readyz => {
                    let mut tcp = TcpStream::connect(target.admin).await?;
                    tcp.write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
                        .await?;
                    read_status(&mut tcp).await
                }
            }
        })
        .await;
        match result {
            Ok(Ok(200)) => times.push(t.elapsed()),
            _ => failed += 1,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    times.sort();
    Probe {
        ok: times.len(),
        failed,
        p50: times.get(times.len() / 2).copied().unwrap_or_default(),
        max: times.last().copied().unwrap_or_default(),
    }
}

/// 1,100 connections that never send a byte, held for the attack.
async fn raw_tcp(addr: SocketAddr) -> String {
    let mut held = Vec::new();
    for _ in 0..1100 {
        // A full accept queue delays a connect rather than refusing it, so
        // the timeout is generous: the flood is meant to reach its count.
        match tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await {
            Ok(Ok(s)) => held.push(s),
            _ => break,
        }
    }
    tokio::time::sleep(Duration::from_secs(ATTACK_SECONDS)).await;
    let mut alive = 0;
    for s in &mut held {
        let mut b = [0u8; 1];
        if tokio::time::timeout(Duration::from_millis(1), s.read(&mut b))
            .await
            .is_err()
        {
            alive += 1;
        }
    }
    format!("{} opened, {alive} still open at the end", held.len())
}

/// `count` TLS connections (32 opening at a time) that each send `bytes`,
/// read the answer when `answered`, and are then held for the attack: 1,100
/// that each sent a GET sit idle; 400 that declared a 256 KiB body and sent
/// one byte stall.
async fn hold_tls(
    addr: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    (count, bytes): (usize, Vec<u8>),
    answered: bool,
) -> String {
    let gate = Arc::new(tokio::sync::Semaphore::new(32));
    let mut tasks = Vec::with_capacity(count);
    for _ in 0..count {
        let Ok(permit) = gate.clone().acquire_owned().await else {
            break;
        };
        let (tls, bytes) = (tls.clone(), bytes.clone());
        tasks.push(tokio::spawn(async move {
            let opened = tokio::time::timeout(Duration::from_secs(2), async {
                let mut s = connect(addr, tls).await?;
                s.write_all(&bytes).await?;
                if answered {
                    read_response(&mut s).await?;
                }
                Ok::<_, std::io::Error>(s)
            })
            .await;
            drop(permit);
            let mut s = opened.ok()?.ok()?;
            tokio::time::sleep(Duration::from_secs(ATTACK_SECONDS)).await;
            // Still open unless the server closed it (evicted, or answered).
            let mut b = [0u8; 1];
            let read = tokio::time::timeout(Duration::from_millis(1), s.read(&mut b)).await;
            Some(read.is_err())
        }));
    }
    let (mut opened, mut alive) = (0, 0);
    for t in tasks {
        if let Ok(Some(open)) = t.await {
            opened += 1;
            alive += usize::from(open);
        }
    }
    format!("{opened} of {count} opened, {alive} still open at the end")
}

/// A request that declares a 256 KiB body and sends its first byte.
fn declared_body_head() -> Vec<u8> {
    b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 262144\r\n\r\n{"
        .to_vec()
}

/// 32 keep-alive clients at full speed, SIGTERM after 2 s; what they saw
/// until the server stopped accepting.
async fn shutdown_load(target: &Target) -> Result<Load, Error> {
    let answered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let clients: Vec<_> = (0..32)
        .map(|_| {
            tokio::spawn(keep_alive_client(
                target.addr,
                target.tls.clone(),
                review_request(),
                answered.clone(),
            ))
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    // SAFETY: kill only sends a signal.
    unsafe { libc::kill(i32::try_from(target.pid)?, libc::SIGTERM) };
    let mut load = Load::default();
    for client in clients {
        let seen = tokio::time::timeout(Duration::from_secs(30), client).await;
        load = load + seen.map_err(|_| "a client still connected 30 s after SIGTERM")??;
    }
    Ok(load)
}

/// 1,024 TLS connections that send a request head one byte a second.
async fn trickle(addr: SocketAddr, tls: Arc<rustls::ClientConfig>) -> String {
    let mut tasks = Vec::new();
    for _ in 0..1024 {
        let tls = tls.clone();
        tasks.push(tokio::spawn(async move {
            let Ok(mut s) = connect(addr, tls).await else {
                return false;
            };
            let started = Instant::now();
            for b in b"POST /mutate HTTP/1.1\r\nX-Slow: ".iter().cycle() {
                if started.elapsed() > Duration::from_secs(ATTACK_SECONDS) {
                    return true;
                }
                if s.write_all(&[*b]).await.is_err() || s.flush().await.is_err() {
                    return false;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            true
        }));
    }
    let mut alive = 0;
    for t in tasks {
        alive += usize::from(t.await.unwrap_or(false));
    }
    format!("{alive} of 1024 tricklers still connected after {ATTACK_SECONDS} s")
}

/// 32 connections that send all but the last byte of a 7 MiB body.
async fn stalled_bodies(addr: SocketAddr, tls: Arc<rustls::ClientConfig>) -> String {
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let tls = tls.clone();
        tasks.push(tokio::spawn(async move {
            let Ok(mut s) = connect(addr, tls).await else { return };
            let head = format!("POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n");
            let _ = s.write_all(head.as_bytes()).await;
            let chunk = vec![b' '; 64 * 1024];
            let deadline = Instant::now() + Duration::from_secs(ATTACK_SECONDS);
            let mut sent = 0;
            while sent + chunk.len() < BODY && Instant::now() < deadline {
                match tokio::time::timeout_at(deadline.into(), s.write_all(&chunk)).await {
                    Ok(Ok(())) => sent += chunk.len(),
                    _ => break,
                }
            }
            tokio::time::sleep_until(deadline.into()).await;
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    "32 bodies of 7 MiB stalled one byte short".into()
}

/// One connection that pipelines reviews and never reads the answers.
async fn pipeline(addr: SocketAddr, tls: Arc<rustls::ClientConfig>) -> String {
    let Ok(s) = connect(addr, tls).await else {
        return "connect failed".into();
    };
    let (mut reader, mut writer) = tokio::io::split(s);
    let one = review_request();
    let deadline = Instant::now() + Duration::from_secs(ATTACK_SECONDS + 12);
    let mut written = 0usize;
    for _ in 0..3000 {
        match tokio::time::timeout_at(deadline.into(), writer.write_all(&one)).await {
            Ok(Ok(())) => written += 1,
            _ => break,
        }
    }
    tokio::time::sleep_until(deadline.into()).await;
    // Answers the server wrote before closing are still in the socket, so
    // drain them: the connection was closed if that ends in EOF or a reset,
    // held if the server is still there (it writes more, or waits).
    let mut b = vec![0u8; 64 * 1024];
    let drain_until = Instant::now() + Duration::from_secs(10);
    let alive = loop {
        match tokio::time::timeout(Duration::from_millis(500), reader.read(&mut b)).await {
            Ok(Ok(0) | Err(_)) => break false,
            Ok(Ok(_)) if Instant::now() < drain_until => {}
            Ok(Ok(_)) | Err(_) => break true,
        }
    };
    format!(
        "{written} requests pipelined; connection {} after {} s",
        if alive {
            "still held"
        } else {
            "closed by the server"
        },
        ATTACK_SECONDS + 12
    )
}

/// On one connection, reused unless the server says `Connection: close`
/// (as Go's net/http does, which does not retry a POST): a 415 with a body
/// larger than one read of the server (so not drained), then a review, 50
/// times.
/// Returns how many reviews failed.
async fn early_close(addr: SocketAddr, tls: Arc<rustls::ClientConfig>) -> usize {
    let review = review_request();
    let unread = 64 * 1024;
    let mut early = format!(
        "POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {unread}\r\n\r\n"
    )
    .into_bytes();
    early.resize(early.len() + unread, b' ');
    let mut failures = 0;
    let mut conn: Option<Tls> = None;
    for _ in 0..50 {
        for (request, is_review) in [(&early, false), (&review, true)] {
            if conn.is_none() {
                conn = connect(addr, tls.clone()).await.ok();
            }
            let Some(s) = conn.as_mut() else {
                failures += usize::from(is_review);
                continue;
            };
            let outcome = async {
                s.write_all(request).await?;
                read_response(s).await
            }
            .await;
            if let Ok(response) = outcome {
                if is_review && response.status != 200 {
                    failures += 1;
                }
                if response.closes() {
                    conn = None;
                }
            } else {
                failures += usize::from(is_review);
                conn = None;
            }
        }
    }
    failures
}

fn review_request() -> Vec<u8> {
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"probe","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"team-a","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"sb","namespace":"team-a","labels":{"opensandbox.io/id":"sb"}},"spec":{"containers":[{"name":"sandbox","image":"busybox:1.36","command":["sleep","3600"]}]}}}}"#;
    post("/mutate", "application/json", body)
}

async fn read_status<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<u16> {
    Ok(read_response(s).await?.status)
}
