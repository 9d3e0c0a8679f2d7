//! contract: limits.handshakes, limits.good-client
//!
//! A recorded ClientHello replayed on new connections
//! against the binary, at the load of 1,000 a second on a release build
//! (each costs it 310–390 µs: a third of a core). The rate is set from
//! what a handshake costs this build, measured first, so that a debug
//! build meets the same load. Each costs the server a key
//! exchange and a signature and the attacker a connect and a write. Run
//! where they arrive, they queued ahead of reviews on every worker and the
//! listen backlog overflowed (new clients waited over a second); with a
//! bounded slot for the handshake's computation, and the oldest waiting
//! handshake shed when too many wait, a new client is still answered
//! within a second, at a p99 of 50 ms.

use crate::common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::attack::{P99_WITHIN, alone, good_client, open_files_for};
use common::served::Served;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The first flight of a TLS client for `localhost`: the ClientHello.
fn client_hello(config: Arc<rustls::ClientConfig>) -> Vec<u8> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut client = rustls::ClientConnection::new(config, name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    hello
}

/// Replays `hello` on a new connection `per_second` times a second, each
/// closed once written, until `stop`; counts them in `sent`.
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
            if let Ok(Ok(mut s)) =
                tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(addr)).await
                && s.write_all(&hello).await.is_ok()
            {
                sent.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// CPU seconds `pid` has used (user and system).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name in parentheses: state is field 3, utime 14.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    #[expect(clippy::cast_precision_loss, reason = "tick counts far below 2^52")]
    let seconds = ticks as f64 / hz as f64;
    seconds
}

/// The server's CPU time per replayed ClientHello.
async fn cost_of_a_hello(served: &Served, hello: &Arc<Vec<u8>>) -> f64 {
    const N: u32 = 300;
    let before = cpu_seconds(served.pid());
    for _ in 0..N {
        let mut s = TcpStream::connect(served.addr).await.unwrap();
        s.write_all(hello).await.unwrap();
        // Its answer (the server's flight) says the work is done.
        let mut b = [0u8; 1];
        let _ = tokio::io::AsyncReadExt::read(&mut s, &mut b).await;
    }
    (cpu_seconds(served.pid()) - before) / f64::from(N)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_client_hellos_do_not_starve_new_clients() {
    let _alone = alone().await;
    open_files_for(4000);
    let served = Served::start(&["--worker-threads", "2"]);
    let config = served.pki.client_config();
    let hello = Arc::new(client_hello(config.clone()));
    let cost = cost_of_a_hello(&served, &hello).await;
    // A third of a core, as 1,000 a second at 350 µs each; 1,000 a second
    // at most.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a positive rate under 1,000"
    )]
    let rate = ((0.35 / cost.max(1e-6)) as u32).clamp(50, 1000);
    eprintln!(
        "a replayed ClientHello costs the server {:.0} µs: {rate} a second",
        cost * 1e6
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let attack = tokio::spawn(replay(served.addr, hello, rate, stop.clone(), sent.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let during = format!("{rate} replayed ClientHellos a second");
    good_client(served.addr, &config, (150, P99_WITHIN), &during).await;
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
}
