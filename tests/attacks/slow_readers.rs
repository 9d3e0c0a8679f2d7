//! Connections that pipeline reviews and read their
//! answers one TLS record every 5 s, over a pod network's packet size
//! (MSS 1400) and a small receive window, more of them than the cap. Their
//! answers wait unread (the write blocks, or the kernel holds the bytes),
//! which kept them from ever being evicted, so a new client waited for a
//! slot for seconds. An answer left unread past the grace makes its
//! connection evictable like an idle one: a new client is answered within
//! a second at a p99 of 50 ms. Meanwhile clients that read their answers
//! at once (as the apiserver's Go client does), some 150 KB long, lose no
//! review they were answered, however much eviction goes on around them.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::attack::{GOOD_P99, hold, sandbox_review};
use common::pods::SandboxPod;
use common::server::review_body;
use common::under_attack::{Attack, evicted};
use common::wire::{Load, Tls, post, tls_over};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const SECOND: Duration = Duration::from_secs(1);
const CAP: u32 = 256;

/// A review whose answer is about 150 KB: its entrypoint, 110 KB, comes
/// back in the patch.
fn large_answer(uid: &str) -> Vec<u8> {
    let big = "x".repeat(110_000);
    let pod = SandboxPod::new("sb-1")
        .namespace("team-a")
        .command(&["sh", &big])
        .json();
    post("/mutate", "application/json", &review_body(uid, &pod))
}

/// A TLS connection with a pod network's MSS and a small receive buffer,
/// that has sent `bytes`.
async fn slow_reader(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    bytes: Arc<Vec<u8>>,
) -> std::io::Result<Tls> {
    let socket = TcpSocket::new_v4()?;
    socket.set_recv_buffer_size(4096)?;
    let mss: libc::c_int = 1400;
    // SAFETY: TCP_MAXSEG takes an int, passed with its size, on this socket.
    let set = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&raw const mss).cast(),
            u32::try_from(size_of::<libc::c_int>()).unwrap_or(4),
        )
    };
    assert_eq!(set, 0, "TCP_MAXSEG");
    let tcp = socket.connect(addr).await?;
    let mut tls = tls_over(tcp, config).await?;
    tls.write_all(&bytes).await?;
    Ok(tls)
}

/// contract: limits.answers, limits.write-timeout, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_do_not_hold_the_slots_and_no_answered_review_is_lost() {
    const HOSTILE: usize = 300;
    let attack = Attack::start(2 * HOSTILE as u64 + 400, |t| {
        t.max_connections = CAP;
    })
    .await;
    let target = &attack.target;

    // Clients that read at once, until the end: a review with a 150 KB
    // answer, then normal ones, on keep-alive connections.
    let answered = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..4)
        .map(|i| {
            let request = if i % 2 == 0 {
                large_answer(&format!("reader-{i}"))
            } else {
                post(
                    "/mutate",
                    "application/json",
                    &sandbox_review(&format!("reader-{i}")),
                )
            };
            target.keep_alive(request, &answered)
        })
        .collect();

    // The slow readers: 150 reviews pipelined.
    let mut pipelined = Vec::new();
    for i in 0..150 {
        pipelined.extend(post(
            "/mutate",
            "application/json",
            &sandbox_review(&format!("p-{i}")),
        ));
    }
    let pipelined = Arc::new(pipelined);
    // New ones the server closes to make room are opened again.
    let held = hold(HOSTILE, 16, 5 * SECOND, HOSTILE, |_| {
        slow_reader(target.addr, target.config.clone(), pipelined.clone())
    })
    .await;
    assert_eq!(held.len(), HOSTILE, "slow readers opened");
    // Each reads one record every 5 s.
    let trickle: Vec<_> = held
        .into_iter()
        .map(|mut tls| {
            tokio::spawn(async move {
                let mut record = vec![0u8; 16 * 1024];
                for _ in 0..3 {
                    tokio::time::sleep(5 * SECOND).await;
                    if !matches!(tls.read(&mut record).await, Ok(n) if n > 0) {
                        break;
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(2 * SECOND).await;

    let during = "300 slow readers with 150 reviews pipelined each";
    attack.good_client((100, GOOD_P99), during).await;
    let evicted = evicted(&attack.server, "admission").await;
    eprintln!("{evicted} connections evicted");
    assert!(evicted > 0);

    // The readers stop when the listener closes; each counts what it wrote
    // whole and was never answered.
    attack.server.shutdown().await;
    let mut load = Load::default();
    for r in readers {
        load = load + r.await.unwrap();
    }
    for t in trickle {
        t.abort();
    }
    eprintln!(
        "readers: {} answered, {} lost ({} in all)",
        load.answered,
        load.lost,
        answered.load(Ordering::Relaxed)
    );
    assert!(load.answered > 100, "the readers were served");
    assert_eq!(load.lost, 0, "answered reviews lost");
}
