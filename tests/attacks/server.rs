//! Attacks on the real server on loopback, each while a good
//! client (a review on a fresh TLS connection, one after the other) must be
//! answered within a second with a 99th percentile of 50 ms or less. Each
//! test fails without the defence it attacks: idle connections that hold
//! every slot, and bodies that hold the body budget without sending it.

use std::time::Duration;

use common::attack::{Bound, GOOD_P99, P99_WITHIN, Then, hold, sandbox_review, sent};
use common::server::{Running, eventually};
use common::under_attack::{Attack, evicted};
use common::wire::{Tls, post, read_response};
use tokio::io::AsyncWriteExt;

const SECOND: Duration = Duration::from_secs(1);

async fn wait_metric(server: &Running, name: &str, labels: &[(&str, &str)], at_least: u64) {
    eventually(name, 20 * SECOND, || async {
        server.metric(name, labels).await >= at_least
    })
    .await;
}

/// 2,000 TLS connections that each send one request and then sit idle,
/// against the default cap of 1,024: without eviction of idle connections
/// the first 1,024 hold every slot and a new client is never accepted.
/// contract: limits.max-connections, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_that_sent_a_request_do_not_lock_out_new_clients() {
    const HOSTILE: usize = 2000;
    // The deadline is long enough for the request held in flight across
    // the attack.
    let attack = Attack::start(2 * HOSTILE as u64 + 200, |_| {}).await;
    let (server, target) = (&attack.server, &attack.target);
    let (addr, config) = (target.addr, &target.config);
    let review = post("/mutate", "application/json", &sandbox_review("in-flight"));
    let (first, rest) = review.split_at(review.len() - 1);
    let mut in_flight = sent(addr, config.clone(), first.to_vec(), Then::Stalls)
        .await
        .unwrap();
    wait_metric(server, "sandbox_webhook_requests_in_flight", &[], 1).await;

    let get = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec();
    // New ones the server closes to make room (before the first are idle
    // long enough to go first) are opened again.
    let held = hold(HOSTILE, 16, 2 * SECOND, HOSTILE, |_| {
        sent(addr, config.clone(), get.clone(), Then::ReadsTheAnswer)
    })
    .await;
    let admission = [("listener", "admission")];
    wait_metric(server, "sandbox_webhook_open_connections", &admission, 1024).await;

    let during = "2,000 idle connections";
    attack.good_client((100, GOOD_P99), during).await;
    // The oldest connection of all, but its request is in flight: not cut.
    in_flight.write_all(rest).await.unwrap();
    let answer = read_response(&mut in_flight).await.expect("answered");
    assert_eq!(answer.status, 200);
    assert_eq!(held.len(), HOSTILE, "idle connections opened");
    let evicted = evicted(server, "admission").await;
    assert!(evicted >= (HOSTILE - 1024) as u64, "{evicted} evicted");
    drop(held);
    attack.server.shutdown().await;
}

/// An attack on a server with a body budget of `budget` bytes, and `n`
/// connections that each declare a 256 KiB body, send `sent` bytes of it
/// and stall.
async fn stalled_bodies(budget: u64, n: usize, sent_bytes: usize) -> (Attack, Vec<Tls>) {
    let attack = Attack::start(2 * n as u64 + 200, |t| {
        t.max_buffered_bytes = budget;
    })
    .await;
    let (addr, config) = (attack.target.addr, &attack.target.config);
    let mut bytes = format!(
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{{",
        256 * 1024
    )
    .into_bytes();
    bytes.resize(bytes.len() + sent_bytes - 1, b' ');
    let held = hold(n, 16, 2 * SECOND, 8, |_| {
        sent(addr, config.clone(), bytes.clone(), Then::Stalls)
    })
    .await;
    assert_eq!(held.len(), n);
    (attack, held)
}

/// 400 connections that declare a 256 KiB body and send one byte: the body
/// budget is charged for what arrives, not for what is declared.
/// contract: limits.body-budget
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_declared_but_not_sent_do_not_hold_the_budget() {
    const HOSTILE: usize = 400;
    let (attack, held) = stalled_bodies(64 * 1024 * 1024, HOSTILE, 1).await;
    let server = &attack.server;
    let in_flight = "sandbox_webhook_requests_in_flight";
    wait_metric(server, in_flight, &[], HOSTILE as u64).await;

    let during = "400 stalled declared bodies";
    attack.good_client((100, GOOD_P99), during).await;
    let buffered = server
        .metric("sandbox_webhook_request_body_buffered_bytes", &[])
        .await;
    assert!(
        buffered <= HOSTILE as u64,
        "{buffered} bytes charged for {HOSTILE} bytes sent"
    );
    drop(held);
    attack.server.shutdown().await;
}

/// 64 connections that send most of a 256 KiB body and stall, more than
/// the small pool of the smallest budget holds: the slowest are shed when a
/// new body needs room.
/// contract: limits.body-budget, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_stall_after_a_burst_are_shed_for_new_ones() {
    let (attack, held) = stalled_bodies(14 * 1024 * 1024, 64, 200 * 1024).await;
    // The small pool (a quarter of 14 MiB) is full, and its holders are
    // old enough to be judged slow.
    let buffered = "sandbox_webhook_request_body_buffered_bytes";
    wait_metric(&attack.server, buffered, &[], 3 * 1024 * 1024).await;
    tokio::time::sleep(SECOND / 2).await;

    // Each good review sheds a stalled body and lets a waiting one in, which
    // reads its 200 KiB: tens of milliseconds of a debug build's CPU on a
    // busy machine. Without shedding, the reviews wait for the deadline.
    let during = "64 bodies stalled after 200 KiB";
    let bound = (100, Bound::new(4 * P99_WITHIN));
    attack.good_client(bound, during).await;
    drop(held);
    attack.server.shutdown().await;
}
