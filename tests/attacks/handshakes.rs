//! contract: limits.handshakes, limits.good-client, limits.max-connections
//!
//! Floods of ClientHellos against the binary. Each hello costs the server
//! a key exchange and a signature (200–300 µs of a release build's CPU)
//! and its sender a connect and a write. The rate is set from what a
//! handshake costs the build under test, measured first, to [`LOAD`]
//! cores: more than the one slot that computes handshakes can take, so
//! the server must choose whose to compute. Good clients (a keep-alive
//! connection opened during the flood, and a new connection per review)
//! must be answered within their bounds, against control windows measured
//! on the same server before the flood.
//!
//! - **A thousand addresses**, each hello made unique (its random
//!   rewritten, which costs the sender nothing), each connection held
//!   open, so that more of them are open than the connection cap. With
//!   turns by address, the good client waited for a turn of every
//!   flooding address (p50 259–280 ms with 1,000 pods), and past the cap
//!   its handshakes and keep-alive connections were evicted. Now its
//!   handshakes, which finish, earn it the turn ahead of those that do not,
//!   and the connections that never sent a request are evicted first.
//! - **Replayed hellos from the good client's own address** (a hostNetwork
//!   pod, a shared NAT): they shed 80–85 % of its handshakes, from the
//!   same line. Now a hello seen before is refused before it is computed.
//! - **Unique hellos from the good client's own address**: the bound that
//!   is physical. They spend its address's credit and share its line, so
//!   its new connections are shed at no worse odds than the flood's own
//!   hellos, and a keep-alive connection, once open, is never cut; the
//!   way out is the network's (docs/security.md).
//!
//! `SANDBOX_WEBHOOK_UNDER_TEST` runs them against another build.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::attack::{Bound, GOOD_ANSWER, GOOD_P99, P99_WITHIN, sandbox_review};
use common::served::Served;
use common::server::timed_review;
use common::stats::percentile;
use common::under_attack::{Series, metric, served_holding};
use common::wire::{post, read_response, tls_connect};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

/// Handshakes one address may have waiting (the server's
/// `handshake::gate::PEER_QUEUE`).
const PEER_QUEUE: usize = 64;

/// The flood, in cores of the server's handshake work.
const LOAD: f64 = 1.3;

/// The good clients' address.
const GOOD: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The first flight of a TLS client for `localhost`: the ClientHello.
fn client_hello(config: Arc<rustls::ClientConfig>) -> Vec<u8> {
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut client = rustls::ClientConnection::new(config, name).unwrap();
    let mut hello = Vec::new();
    client.write_tls(&mut hello).unwrap();
    hello
}

/// `hello` with the first bytes of its random (bytes 11 to 43: after the
/// record and handshake headers and the version) replaced by `n`: a hello
/// no server has seen, made for nothing.
fn fresh(hello: &[u8], n: u64) -> Vec<u8> {
    let mut hello = hello.to_vec();
    hello[11..19].copy_from_slice(&n.to_le_bytes());
    hello
}

/// How a flood sends its hellos.
#[derive(Clone, Copy, Debug)]
enum Flood {
    /// The same hello from one address, each connection reset once written.
    Replayed { from: IpAddr },
    /// A unique hello from each of `addresses` addresses in turn
    /// (127.1.x.y), each connection held open until the server closes it
    /// or [`HOLD`] has passed.
    Fresh { addresses: u16 },
    /// A unique hello from `from` each time, held as with `Fresh`.
    FreshFrom { from: IpAddr },
}

/// How long a fresh flood holds each connection at most.
const HOLD: Duration = Duration::from_secs(2);

fn flooding_address(i: u64, addresses: u16) -> IpAddr {
    let [x, y] = u16::try_from(i % u64::from(addresses))
        .unwrap()
        .to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(127, 1, x, y))
}

/// What a flood counts: the hellos it wrote, and those the server
/// answered (its first flight read: the handshake was computed).
#[derive(Clone, Default)]
struct Counts {
    sent: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
}

/// Sends `hello` as `flood` says, `per_second` times a second until
/// `stop`, and counts them.
async fn flood(
    addr: SocketAddr,
    hello: Arc<Vec<u8>>,
    (flood, per_second): (Flood, u32),
    stop: Arc<AtomicBool>,
    counts: Counts,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1) / per_second);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        n += 1;
        let (hello, counts) = (hello.clone(), counts.clone());
        tokio::spawn(async move {
            let (from, bytes, hold) = match flood {
                Flood::Replayed { from } => (from, hello.to_vec(), Duration::ZERO),
                Flood::Fresh { addresses } => {
                    (flooding_address(n, addresses), fresh(&hello, n), HOLD)
                }
                Flood::FreshFrom { from } => (from, fresh(&hello, n), HOLD),
            };
            let socket = TcpSocket::new_v4().unwrap();
            socket.bind(SocketAddr::new(from, 0)).unwrap();
            // A reset, not a close: no TIME_WAIT to run out of ports.
            socket.set_zero_linger().unwrap();
            let patience = Duration::from_secs(2);
            let Ok(Ok(mut s)) = tokio::time::timeout(patience, socket.connect(addr)).await else {
                return;
            };
            if s.write_all(&bytes).await.is_err() {
                return;
            }
            counts.sent.fetch_add(1, Ordering::Relaxed);
            // Held (the server's flight read, never answered) until the
            // server closes it.
            let mut sink = [0u8; 4096];
            let holding = async {
                if matches!(s.read(&mut sink).await, Ok(n) if n > 0) {
                    counts.answered.fetch_add(1, Ordering::Relaxed);
                    while matches!(s.read(&mut sink).await, Ok(n) if n > 0) {}
                }
            };
            let _ = tokio::time::timeout(hold, holding).await;
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

/// The server's CPU time per unique ClientHello: the least of three
/// rounds, the one least disturbed by the rest of the machine. From an
/// address of its own, which the good clients do not share.
async fn cost_of_a_hello(served: &Served, hello: &[u8]) -> f64 {
    const N: u32 = 200;
    let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)), 0);
    let mut least = f64::MAX;
    for round in 0..3 {
        let before = cpu_seconds(served.pid());
        for i in 0..N {
            let socket = TcpSocket::new_v4().unwrap();
            socket.bind(from).unwrap();
            socket.set_zero_linger().unwrap();
            let mut s = socket.connect(served.addr).await.unwrap();
            let n = u64::from(round * N + i) | 1 << 63;
            s.write_all(&fresh(hello, n)).await.unwrap();
            // Its answer (the server's flight) says the work is done.
            let mut b = [0u8; 1];
            let _ = s.read(&mut b).await;
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
/// `answer_within` or the test fails (or, given `failed`, a failure to
/// open a connection is counted there); the latencies of those answered,
/// sorted.
async fn reviews(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    (window, client): (Duration, Client),
    answer_within: Duration,
    failed: Option<Arc<AtomicUsize>>,
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
        let answer = tokio::time::timeout(answer_within, one).await;
        // Only a failure to open a connection may be counted: a review on
        // a keep-alive connection already open must be answered.
        if let (Some(failed), Ok(Err(_)) | Err(_), None) = (&failed, &answer, &conn) {
            failed.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        match answer {
            Ok(Ok(t)) => took.push(t),
            Ok(Err(e)) => panic!("{client:?}: review {} failed: {e}", took.len()),
            Err(tokio::time::error::Elapsed { .. }) => panic!(
                "{client:?}: review {} not answered within {answer_within:?}",
                took.len()
            ),
        }
    }
    took.sort();
    took
}

/// The time `n` hellos take at `cost` seconds of CPU each.
fn cost_of(n: usize, cost: f64) -> Duration {
    #[expect(clippy::cast_precision_loss, reason = "a small count")]
    Duration::from_secs_f64(n as f64 * cost)
}

/// Connections the server closed to make room at its cap.
const EVICTED: Series = (
    "sandbox_webhook_connections_evicted_total",
    &[("listener", "admission")],
);

/// Hellos the server did not compute: shed when their address's line was
/// full, or refused unread as seen before.
const HANDSHAKE_FAILURES: &str = "sandbox_webhook_tls_handshake_failures_total";
const SHED: Series = (HANDSHAKE_FAILURES, &[("reason", "shed")]);
const REPLAYED: Series = (HANDSHAKE_FAILURES, &[("reason", "replayed")]);

/// What the good clients and the flood did during the attack window.
struct Through {
    /// Of each client ([`Client::KeepAlive`], then
    /// [`Client::NewConnections`]): reviews answered, and failed.
    reviews: [(usize, usize); 2],
    /// The flood's hellos: sent, and answered by the server.
    hellos: (usize, usize),
}

/// The good clients' control windows, then `kind` at [`LOAD`] cores while
/// they run for 5 s; each client's p99 held against its control. With
/// `may_fail`, a review that fails is counted, not fatal.
#[expect(
    clippy::too_many_lines,
    reason = "the controls, the flood and the comparison, in the order they run"
)]
async fn good_clients_through(served: &Served, kind: Flood, may_fail: bool) -> Through {
    const CLIENTS: [Client; 2] = [Client::KeepAlive, Client::NewConnections];
    let config = served.pki.client_config();
    let hello = Arc::new(client_hello(config.clone()));
    let cost = cost_of_a_hello(served, &hello).await;
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a positive rate, clamped"
    )]
    let rate = ((LOAD / cost.max(1e-6)) as u32).clamp(50, 20_000);
    eprintln!(
        "a unique ClientHello costs the server {:.0} µs: {rate} a second",
        cost * 1e6
    );
    // The control windows: each client for a second, with no flood. Their
    // handshakes finish, as the apiserver's do.
    let mut controls = Vec::new();
    for client in CLIENTS {
        let second = (Duration::from_secs(1), client);
        let took = reviews(served.addr, config.clone(), second, 10 * second.0, None).await;
        let (p99, max) = (percentile(&took, 0.99), took[took.len() - 1]);
        eprintln!(
            "{client:?} control window: {} reviews, p99 {p99:?}, max {max:?}",
            took.len()
        );
        controls.push((p99, max));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Counts::default();
    // On a runtime and thread of its own, so the good clients' tasks do
    // not queue behind its thousands, and at a lower priority: on loopback
    // the attacker shares the server's cores, where a pod elsewhere would
    // spend its own (the rate it reaches is checked below).
    let attack = {
        let (addr, stop, counts) = (served.addr, stop.clone(), counts.clone());
        std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions; setpriority changes this
            // thread's priority only.
            unsafe {
                let tid = libc::id_t::try_from(libc::gettid()).unwrap();
                libc::setpriority(libc::PRIO_PROCESS, tid, 10);
            }
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(flood(addr, hello, (kind, rate), stop, counts));
        })
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let window = Duration::from_secs(5);
    let clients = CLIENTS
        .into_iter()
        .zip(&controls)
        .map(|(client, &(p99, max))| {
            let within = GOOD_ANSWER.limit(max);
            let failed = may_fail.then(Arc::<AtomicUsize>::default);
            let during = (window, client);
            let took = reviews(served.addr, config.clone(), during, within, failed.clone());
            (client, p99, tokio::spawn(took), failed)
        })
        .collect::<Vec<_>>();
    let mut p99s = Vec::new();
    let mut answered = [(0, 0); 2];
    for (i, (client, control, took, failed)) in clients.into_iter().enumerate() {
        let took = took.await.unwrap();
        let failed = failed.map_or(0, |f| f.load(Ordering::Relaxed));
        let p99 = percentile(&took, 0.99);
        eprintln!(
            "{client:?} during {rate} hellos a second ({kind:?}): {} reviews ({failed} failed), p50 {:?}, p99 {p99:?}, max {:?}",
            took.len(),
            percentile(&took, 0.5),
            took[took.len() - 1]
        );
        answered[i] = (took.len(), failed);
        p99s.push((client, p99, control));
    }
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    attack.join().unwrap();
    let hellos = (
        counts.sent.load(Ordering::Relaxed),
        counts.answered.load(Ordering::Relaxed),
    );
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    let flooded = hellos.0 as f64 / (took.as_secs_f64() + 1.0);
    eprintln!(
        "{flooded:.0} hellos a second sent, {} of {} answered by the server",
        hellos.1, hellos.0
    );
    assert!(
        flooded > f64::from(rate) / 2.0,
        "the attack ran at {flooded:.0}/s"
    );
    for (client, p99, control) in p99s {
        let what = format!("{client:?}: good reviews p99");
        if may_fail && let Client::NewConnections = client {
            // Those answered waited in their address's line with the
            // flood's: at most its bound of hellos ahead.
            let line = cost_of(PEER_QUEUE, cost);
            let bound = Bound {
                within: P99_WITHIN,
                times: 2,
            };
            eprintln!(
                "{what}: held against its control plus a line of {PEER_QUEUE} hellos ({line:?})"
            );
            bound.check(&what, p99, control + line);
        } else {
            GOOD_P99.check(&what, p99, control);
        }
    }
    Through {
        reviews: answered,
        hellos,
    }
}

/// contract: limits.handshakes, limits.good-client, limits.max-connections
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_hellos_from_a_thousand_addresses_do_not_hold_up_clients_that_finish_theirs() {
    let (_alone, served) = served_holding(16_000, &["--worker-threads", "2"]).await;
    good_clients_through(&served, Flood::Fresh { addresses: 1000 }, false).await;
    let (evicted, shed) = (metric(&served, EVICTED), metric(&served, SHED));
    eprintln!("{evicted} connections evicted, {shed} handshakes shed");
    assert!(evicted > 0, "the flood held more connections than the cap");
}

/// contract: limits.handshakes, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_hellos_from_the_clients_own_address_do_not_shed_its_handshakes() {
    let (_alone, served) = served_holding(4000, &["--worker-threads", "2"]).await;
    good_clients_through(&served, Flood::Replayed { from: GOOD }, false).await;
    let replayed = metric(&served, REPLAYED);
    eprintln!("{replayed} replayed hellos refused unread");
}

/// A flood of unique hellos from the good client's own address (a
/// hostNetwork pod on the apiserver's node, a NAT they share) is what no
/// order of work can separate from the good client: its hellos look the
/// same, come from the same address and spend that address's credit, and
/// at [`LOAD`] cores more of them arrive than the handshake thread can
/// compute. So some are shed, and the good client's new connections take
/// the same odds as the flood's own hellos, no worse; a keep-alive
/// connection, once open, is never cut. The way out is the network's:
/// docs/security.md, "What only the network can stop".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_hellos_from_the_clients_own_address_shed_its_new_connections_no_more_than_theirs() {
    let (_alone, served) = served_holding(16_000, &["--worker-threads", "2"]).await;
    let through = good_clients_through(&served, Flood::FreshFrom { from: GOOD }, true).await;
    let [(_, keep_alive_failed), (answered, failed)] = through.reviews;
    let (sent, computed) = through.hellos;
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    let (good, flood) = (
        failed as f64 / (answered + failed) as f64,
        1.0 - computed as f64 / sent as f64,
    );
    eprintln!(
        "from one address: {:.0} % of the good client's new connections failed, {:.0} % of the flood's hellos were not computed",
        good * 100.0,
        flood * 100.0
    );
    // The keep-alive connection's handshakes take those odds too (a
    // review on it once open never fails: `reviews`).
    eprintln!("{keep_alive_failed} keep-alive connections failed to open");
    assert!(
        good <= flood + 0.1,
        "the good client's new connections failed more often ({good:.2}) than the flood's hellos ({flood:.2})"
    );
}
