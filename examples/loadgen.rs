//! A small rate-limited HTTPS load generator for bench/run.sh: Debian has
//! wrk (which only saturates) but not wrk2 (which holds a rate), and latency
//! is only meaningful below saturation.
//!
//! `--connections` keep-alive HTTP/1.1 connections over TLS each POST the
//! body on a fixed schedule so that together they send `--rate` requests per
//! second. When a connection falls behind because the server answered late,
//! latency is measured from when the request was *due*, not when it was sent,
//! so a stalled server cannot hide its queueing (wrk2's correction for
//! coordinated omission); otherwise from when it was sent, so this process's
//! 1 ms timer granularity is not billed to the server. `--rate 0` sends as
//! fast as responses come back. `--requests N` sends N requests in all
//! (spread evenly over the connections) and then stops, whatever the
//! duration: `bench/server_profile.sh` counts a server's instructions over
//! two such runs and takes the difference per request.
//!
//! Prints one line: `requests=… errors=… seconds=… rps=… p50_us=… p90_us=…
//! p99_us=… max_us=…`; exits 1 if any request failed.
//!
//! ```sh
//! cargo run --release --example loadgen -- --addr 127.0.0.1:8443 \
//!     --ca certs/dev/ca.crt --body bench/reviews/pod-10k.json --rate 2500
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

struct Args {
    addr: SocketAddr,
    ca: String,
    body: String,
    connections: u32,
    rate: f64,
    duration: Duration,
    requests: Option<u64>,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        addr: "127.0.0.1:8443".parse().unwrap(),
        ca: "certs/dev/ca.crt".into(),
        body: String::new(),
        connections: 32,
        rate: 0.0,
        duration: Duration::from_secs(10),
        requests: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let bad = |_| format!("bad value for {flag}: {value}");
        match flag.as_str() {
            "--addr" => a.addr = value.parse().map_err(|_| format!("bad --addr {value}"))?,
            "--ca" => a.ca = value,
            "--body" => a.body = value,
            "--connections" => a.connections = value.parse().map_err(bad)?,
            "--rate" => a.rate = value.parse().map_err(|_| format!("bad --rate {value}"))?,
            "--requests" => a.requests = Some(value.parse().map_err(bad)?),
            "--duration" => {
                a.duration = Duration::from_secs_f64(
                    value
                        .parse()
                        .map_err(|_| format!("bad --duration {value}"))?,
                );
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.body.is_empty() || a.connections == 0 {
        return Err("usage: loadgen --body FILE [--addr A] [--ca FILE] [--connections N] [--rate R] [--duration S | --requests N]".into());
    }
    Ok(a)
}

#[derive(Default)]
struct Tally {
    latencies_us: Vec<u32>,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    fn error(&mut self, e: impl std::fmt::Display) {
        self.errors += 1;
        self.first_error.get_or_insert_with(|| e.to_string());
    }
}

async fn connection(
    args: Arc<Args>,
    connector: TlsConnector,
    body: Bytes,
    index: u32,
    start: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let tcp = match TcpStream::connect(args.addr).await {
        Ok(t) => t,
        Err(e) => {
            tally.error(e);
            return tally;
        }
    };
    let _ = tcp.set_nodelay(true);
    let name = ServerName::IpAddress(args.addr.ip().into());
    let tls = match connector.connect(name, tcp).await {
        Ok(t) => t,
        Err(e) => {
            tally.error(e);
            return tally;
        }
    };
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(tls)).await {
        Ok(pair) => pair,
        Err(e) => {
            tally.error(e);
            return tally;
        }
    };
    tokio::spawn(conn);

    // Connection k sends at start + (k / n + i) × interval: evenly spread.
    let interval =
        (args.rate > 0.0).then(|| Duration::from_secs_f64(f64::from(args.connections) / args.rate));
    // With --requests, this connection's share of them and no time limit.
    let share = args.requests.map(|n| {
        let (each, rest) = (
            n / u64::from(args.connections),
            n % u64::from(args.connections),
        );
        each + u64::from(u64::from(index) < rest)
    });
    let end = start + args.duration;
    let mut i = 0u32;
    let mut previous_done = start;
    loop {
        let due = match interval {
            Some(iv) => {
                start + iv.mul_f64(f64::from(i) + f64::from(index) / f64::from(args.connections))
            }
            None => Instant::now(),
        };
        let done = match share {
            Some(share) => u64::from(i) >= share,
            None => due >= end,
        };
        if done {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        // The clock starts when the request was due, unless the previous
        // response came in time and only this process's timer (1 ms
        // granularity) woke late: that delay is ours, not the server's.
        let woke = Instant::now();
        let clock = if previous_done <= due { woke } else { due };
        i += 1;
        let request = Request::post("/mutate")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(body.clone()))
            .expect("request");
        match sender.send_request(request).await {
            Ok(response) => {
                let status = response.status();
                match response.into_body().collect().await {
                    Ok(_) if status.is_success() => {
                        previous_done = Instant::now();
                        let us = previous_done.duration_since(clock).as_micros();
                        tally
                            .latencies_us
                            .push(u32::try_from(us).unwrap_or(u32::MAX));
                    }
                    Ok(_) => tally.error(format!("HTTP {status}")),
                    Err(e) => tally.error(e),
                }
            }
            Err(e) => {
                tally.error(e);
                break;
            }
        }
    }
    tally
}

fn main() -> std::process::ExitCode {
    let args = match args() {
        Ok(a) => Arc::new(a),
        Err(e) => {
            eprintln!("loadgen: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let body = Bytes::from(std::fs::read(&args.body).expect("read --body"));
    let mut roots = rustls::RootCertStore::empty();
    let pem = std::fs::read(&args.ca).expect("read --ca");
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        roots.add(cert.expect("CA PEM")).expect("CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = TlsConnector::from(Arc::new(config));

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (tally, seconds) = runtime.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = (0..args.connections)
            .map(|k| {
                tokio::spawn(connection(
                    args.clone(),
                    connector.clone(),
                    body.clone(),
                    k,
                    start,
                ))
            })
            .collect();
        let mut all = Tally::default();
        for task in tasks {
            let t = task.await.expect("connection task");
            all.latencies_us.extend(t.latencies_us);
            all.errors += t.errors;
            if all.first_error.is_none() {
                all.first_error = t.first_error;
            }
        }
        (all, start.elapsed().as_secs_f64())
    });

    let mut lat = tally.latencies_us;
    lat.sort_unstable();
    #[expect(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a sample count is exact in f64, and with p in [0, 1] the rounded index is a whole number in [0, len - 1]"
    )]
    let pct = |p: f64| -> u32 {
        if lat.is_empty() {
            return 0;
        }
        lat[((lat.len() - 1) as f64 * p).round() as usize]
    };
    #[expect(
        clippy::cast_precision_loss,
        reason = "a request count is exact in f64"
    )]
    let rps = lat.len() as f64 / seconds;
    println!(
        "requests={} errors={} seconds={seconds:.2} rps={rps:.0} p50_us={} p90_us={} p99_us={} max_us={}",
        lat.len(),
        tally.errors,
        pct(0.50),
        pct(0.90),
        pct(0.99),
        lat.last().copied().unwrap_or(0),
    );
    if let Some(e) = tally.first_error {
        eprintln!("loadgen: {} failed requests; first: {e}", tally.errors);
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}
