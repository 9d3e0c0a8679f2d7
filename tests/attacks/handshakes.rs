//! A recorded ClientHello replayed on new connections from another address
//! (a pod's), against the binary. Each costs the server a key exchange and
//! a signature (200–300 µs of a release build's CPU) and the attacker a
//! connect and a write. The rate is set from what a handshake costs the
//! build under test, measured first, to [`LOAD`] cores: more than one slot
//! can compute, so the gate must shed.
//!
//! Run where they arrive, as before the handshake gate, the hellos queued
//! ahead of reviews on both workers: against that build (release, 5,000 to
//! 5,600 hellos a second) a new client's reviews had a p99 of 78–188 ms on
//! a keep-alive connection, in each of three runs. With one slot for the
//! handshake's computation, taken in turns by peer address, the same flood
//! leaves a new client answered within a second, at a p99 under 50 ms, on a
//! keep-alive connection and on a new connection per review alike.
//! `SANDBOX_WEBHOOK_UNDER_TEST` runs it against another build.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::attack::{ANSWER_WITHIN, P99_WITHIN, alone, open_files_for, sandbox_review};
use common::served::Served;
use common::server::timed_review;
use common::stats::percentile;
use common::wire::{post, read_response, tls_connect};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The flood, in cores of the server's handshake work.
const LOAD: f64 = 1.3;

/// Where the hellos come from: not the good clients' address.
const ATTACKER: SocketAddr = SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2)),
    0,
);

/// The first flight of a TLS client for `localhost`: the ClientHello.
fn client_hello(config: Arc<rustls::ClientConfig>) -> Vec<u8> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut client = rustls::ClientConnection::new(config, name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    hello
}

/// Replays `hello` on a new connection from 127.0.0.2 `per_second` times a
/// second, each reset once written (no `TIME_WAIT` left to exhaust the
/// ports), until `stop`; counts them in `sent`.
async fn replay(
    addr: SocketAddr,
    hello: Arc<Vec<u8>>,
    per_second: u32,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let hello = hello.clone();
        let sent = sent.clone();
        tokio::spawn(async move {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(ATTACKER).unwrap();
            socket.set_zero_linger().unwrap();
            if let Ok(Ok(mut s)) =
                tokio::time::timeout(Duration::from_secs(2), socket.connect(addr)).await
                && s.write_all(&hello).await.is_ok()
            {
                sent.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// CPU seconds `pid` has used, summed over its threads to the nanosecond
/// (`schedstat`: the tick counts of `stat` are 10 ms coarse).
fn cpu_seconds(pid: u32) -> f64 {
    let mut ns = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let Ok(stat) = std::fs::read_to_string(task.unwrap().path().join("schedstat")) else {
            continue; // a thread that has just exited
        };
        ns += stat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
    }
    #[expect(clippy::cast_precision_loss, reason = "nanoseconds far below 2^52")]
    let seconds = ns as f64 / 1e9;
    seconds
}

/// The server's CPU time per replayed ClientHello: the least of three
/// rounds, the one least disturbed by the rest of the machine.
async fn cost_of_a_hello(served: &Served, hello: &Arc<Vec<u8>>) -> f64 {
    const N: u32 = 200;
    let mut least = f64::MAX;
    for _ in 0..3 {
        let before = cpu_seconds(served.pid());
        for _ in 0..N {
            let mut s = TcpStream::connect(served.addr).await.unwrap();
            s.write_all(hello).await.unwrap();
            // Its answer (the server's flight) says the work is done.
            let mut b = [0u8; 1];
            let _ = tokio::io::AsyncReadExt::read(&mut s, &mut b).await;
        }
        least = least.min((cpu_seconds(served.pid()) - before) / f64::from(N));
    }
    least
}

/// How a good client connects.
#[derive(Clone, Copy, Debug)]
enum Client {
    /// One keep-alive connection, opened during the flood (the apiserver's
    /// usual case).
    KeepAlive,
    /// A new connection for each review (its case after a connection closed).
    NewConnections,
}

/// A review every 20 ms for `window`, each answered within
/// [`ANSWER_WITHIN`] or the test fails; their latencies, sorted.
async fn reviews(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    window: Duration,
    client: Client,
) -> Vec<Duration> {
    let mut took = Vec::new();
    let mut conn = None;
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    while started.elapsed() < window {
        tick.tick().await;
        let review = sandbox_review(&format!("good-{}", took.len()));
        let one = async {
            if let Client::NewConnections = client {
                return timed_review(addr, config.clone(), &review).await;
            }
            let began = Instant::now();
            let tls = match conn.as_mut() {
                Some(tls) => tls,
                None => conn.insert(
                    tls_connect(addr, config.clone())
                        .await
                        .map_err(|e| e.to_string())?,
                ),
            };
            tls.write_all(&post("/mutate", "application/json", &review))
                .await
                .map_err(|e| e.to_string())?;
            let response = read_response(tls).await.map_err(|e| e.to_string())?;
            match response.status {
                200 => Ok(began.elapsed()),
                status => Err(format!("status {status}")),
            }
        };
        match tokio::time::timeout(ANSWER_WITHIN, one).await {
            Ok(Ok(t)) => took.push(t),
            Ok(Err(e)) => panic!("{client:?}: review {} failed: {e}", took.len()),
            Err(tokio::time::error::Elapsed { .. }) => panic!(
                "{client:?}: review {} not answered within {ANSWER_WITHIN:?}",
                took.len()
            ),
        }
    }
    took.sort();
    took
}

/// contract: limits.handshakes, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_client_hellos_do_not_starve_new_clients() {
    let _alone = alone().await;
    open_files_for(4000);
    let served = Served::start(&["--worker-threads", "2"]);
    let config = served.pki.client_config();
    let hello = Arc::new(client_hello(config.clone()));
    let cost = cost_of_a_hello(&served, &hello).await;
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a positive rate, clamped"
    )]
    let rate = ((LOAD / cost.max(1e-6)) as u32).clamp(50, 20_000);
    eprintln!(
        "a replayed ClientHello costs the server {:.0} µs: {rate} a second",
        cost * 1e6
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let attack = tokio::spawn(replay(served.addr, hello, rate, stop.clone(), sent.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let window = Duration::from_secs(5);
    let clients = [Client::KeepAlive, Client::NewConnections].map(|client| {
        (
            client,
            tokio::spawn(reviews(served.addr, config.clone(), window, client)),
        )
    });
    let mut p99s = Vec::new();
    for (client, took) in clients {
        let took = took.await.unwrap();
        let p99 = percentile(&took, 0.99);
        eprintln!(
            "{client:?} during {rate} replayed ClientHellos a second: {} reviews, p50 {:?}, p99 {p99:?}, max {:?}",
            took.len(),
            percentile(&took, 0.5),
            took[took.len() - 1]
        );
        p99s.push((client, p99));
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    attack.await.unwrap();
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    let replayed = sent.load(Ordering::Relaxed) as f64 / (took.as_secs_f64() + 1.0);
    eprintln!("{replayed:.0} hellos a second replayed");
    assert!(
        replayed > f64::from(rate) / 2.0,
        "the attack ran at {replayed:.0}/s"
    );
    for (client, p99) in p99s {
        assert!(p99 <= P99_WITHIN, "{client:?}: good reviews p99 {p99:?}");
    }
}
