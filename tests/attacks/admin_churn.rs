//! contract: limits.admin-connections
//!
//! Admin-connection churn at the admin cap. Clients open
//! admin connections as fast as they can and hold each briefly, so a new
//! one arrives at the cap all the time; a kubelet-like prober sends
//! `GET /livez` on a fresh connection (`Connection: close`, as the
//! kubelet's probes do). Closing the oldest connection at the cap cut
//! probes in flight (three failed probes in a row restart the pod); the
//! admin port now evicts as the admission port does, idle connections
//! first and never one with a request on its way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::attack::{Bound, alone, open_files_for};
use common::server::start_tuned;
use common::under_attack::evicted;
use tokio::net::TcpStream;

/// One kubelet-like probe, blocking (the kubelet writes its request as
/// soon as it is connected): its status, or what went wrong.
fn probe(admin: SocketAddr, within: Duration) -> Result<u16, String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(within))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /livez HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status line in {text:?}"))
}

/// Opens connections to `admin` in a loop, each held until `held` newer
/// ones were opened by this task; counts them in `opened`.
async fn churn(admin: SocketAddr, held: usize, stop: Arc<AtomicBool>, opened: Arc<AtomicUsize>) {
    let mut ring = std::collections::VecDeque::with_capacity(held);
    while !stop.load(Ordering::Relaxed) {
        if let Ok(s) = TcpStream::connect(admin).await {
            opened.fetch_add(1, Ordering::Relaxed);
            if ring.len() == held {
                ring.pop_front();
            }
            ring.push_back(s);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_are_never_cut_under_admin_connection_churn() {
    const PROBES: usize = 1000;
    let _alone = alone().await;
    open_files_for(1000);
    let (_pki, server) = start_tuned(|t| t.admin_max_connections = 64).await;
    let admin = server.admin;
    // The control window: probes with no churn. Each probe under churn must
    // be answered within a second, or 4 times the slowest of these.
    let control = std::thread::spawn(move || {
        (0..50)
            .map(|_| {
                let started = Instant::now();
                assert_eq!(probe(admin, Duration::from_secs(10)), Ok(200));
                started.elapsed()
            })
            .max()
            .unwrap()
    })
    .join()
    .unwrap();
    let within = Bound::new(Duration::from_secs(1)).limit(control);
    eprintln!("control window: 50 probes, the slowest {control:?}; each probe within {within:?}");
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let churners: Vec<_> = (0..32)
        .map(|_| tokio::spawn(churn(admin, 16, stop.clone(), opened.clone())))
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    let prober = std::thread::spawn(move || {
        let mut failed = Vec::new();
        for _ in 0..PROBES {
            match probe(admin, within) {
                Ok(200) => {}
                Ok(status) => failed.push(format!("status {status}")),
                Err(e) => failed.push(e),
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        failed
    });
    while !prober.is_finished() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let failed = prober.join().unwrap();
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for c in churners {
        c.await.unwrap();
    }
    let churned = opened.load(Ordering::Relaxed);
    let evicted = evicted(&server, "admin").await;
    eprintln!(
        "{PROBES} probes in {took:?} while {churned} admin connections were opened ({evicted} evicted): {} failed {:?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    assert!(
        evicted > 1000,
        "the churn reached the cap: {evicted} evicted"
    );
    assert!(
        failed.is_empty(),
        "{} of {PROBES} probes failed",
        failed.len()
    );
    server.shutdown().await;
}
