//! Against the binary (`serve --worker-threads
//! 6`, as on a 6-core node without a CPU limit), whose resident memory
//! must stay under 200 MiB (the chart's limit is 256 MiB) while a good
//! client is still answered:
//! - clients that send a review whose large entrypoint comes back in the
//!   patch, and never read the answer (the answers are charged to the
//!   budget, and connections that leave theirs unread past the grace are
//!   closed to make room);
//! - reviews with a million-element entrypoint, six at once, on `/mutate`
//!   and `/validate` (an object no apiserver can store is refused unread;
//!   one it can is reviewed on one thread, one at a time);
//! - clients that send large reviews back to back (they run off the async
//!   workers, which keep answering small reviews within 50 ms at p99).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::attack::{Bound, Control, GOOD_P99, P99_WITHIN, Then, sent};
use common::pods::SandboxPod;
use common::requests::create_request;
use common::served::Served;
use common::under_attack::{Target, served_alone, served_holding};
use common::wire::{Tls, read_response, tls_connect};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

const RSS_WITHIN_MIB: u64 = 200;

/// A sandbox pod whose main container's command is `command`.
fn pod(command: &[&str]) -> Value {
    SandboxPod::new("sb-big")
        .namespace("team-a")
        .command(command)
        .json()
}

/// A `/mutate` request for a pod whose entrypoint annotation carries one
/// string of `len` bytes: it comes back in the patch (as the container's
/// command), base64-encoded.
fn echoed_entrypoint(len: usize) -> Vec<u8> {
    let big = "x".repeat(len);
    let entrypoint = serde_json::to_string(&["sh", "-c", big.as_str()]).unwrap();
    let pod = SandboxPod::new("sb-big")
        .namespace("team-a")
        .annotation("entrypoint", &entrypoint)
        .json();
    create_request("/mutate", "big", &pod)
}

/// A `/mutate` request for a pod whose entrypoint has `n` one-letter
/// arguments.
fn many_arguments(n: usize) -> Vec<u8> {
    let args = vec!["y"; n];
    create_request("/mutate", "many", &pod(&args))
}

/// A `/validate` request for a Deployment whose template's entrypoint has
/// `n` one-letter arguments.
fn workload_with_arguments(n: usize) -> Vec<u8> {
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "big", "namespace": "team-a"},
        "spec": {"selector": {"matchLabels": {"app": "big"}},
            "template": pod(&vec!["y"; n])},
    });
    create_request("/validate", "wl", &deployment)
}

/// `n` connections that each send `request` and never read; held open.
async fn unread(served: &Served, n: usize, request: &[u8]) -> Vec<Tls> {
    let config = served.pki.client_config();
    let mut held = Vec::with_capacity(n);
    for _ in 0..n {
        let sending = sent(served.addr, config.clone(), request.to_vec(), Then::Stalls);
        if let Ok(Ok(tls)) = tokio::time::timeout(Duration::from_secs(10), sending).await {
            held.push(tls);
        }
    }
    held
}

/// Sends `request` on `parallel` connections at once, `rounds` times, each
/// answer read whole; the statuses seen.
async fn at_once(served: &Served, parallel: usize, rounds: usize, request: &[u8]) -> Vec<u16> {
    let config = served.pki.client_config();
    let request = Arc::new(request.to_vec());
    let mut statuses = Vec::new();
    for _ in 0..rounds {
        let tasks: Vec<_> = (0..parallel)
            .map(|_| {
                let (config, request, addr) = (config.clone(), request.clone(), served.addr);
                tokio::spawn(async move {
                    let mut tls = tls_connect(addr, config).await.ok()?;
                    tls.write_all(&request).await.ok()?;
                    read_response(&mut tls).await.ok().map(|r| r.status)
                })
            })
            .collect();
        for t in tasks {
            statuses.push(t.await.unwrap().unwrap_or(0));
        }
    }
    statuses
}

/// Large reviews run one at a time, up to a second each in a debug build:
/// those queued past their 5 s deadline are answered 503, the others 200.
fn answered_or_queued_past_the_deadline(paths: &[&Vec<u16>]) {
    for statuses in paths {
        assert!(statuses.contains(&200), "{statuses:?}");
        assert!(
            statuses.iter().all(|s| [200, 503].contains(s)),
            "{statuses:?}"
        );
    }
}

fn check_rss(during: &str, rss: &common::served::Rss) {
    eprintln!(
        "during {during}: RSS {} MiB before, peak {} MiB",
        rss.before_kib / 1024,
        rss.peak_mib()
    );
    assert!(
        rss.peak_mib() < RSS_WITHIN_MIB,
        "during {during}: peak RSS {} MiB",
        rss.peak_mib()
    );
}

/// A good client's 20 reviews, each answered in time and their p99 within
/// four times the bound, while `held` (unread answers) are held.
async fn good_client_beside(target: &Target, held: &str, control: &Control) {
    let bound = (20, Bound::new(4 * P99_WITHIN));
    target.good_client(bound, held, control).await;
}

/// contract: limits.answers, limits.body-budget, limits.object-size
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_left_unread_do_not_take_the_memory() {
    let (_alone, served) = served_holding(1000, &["--worker-threads", "6"]).await;
    let target = Target::served(&served);
    let control = target.control_window().await;
    let rss = served.sample_rss();
    // The figure of the report: 54 answers of a 6 MB entrypoint, never read. No
    // apiserver can store that pod, so it is refused before it is read.
    let held = unread(&served, 54, &echoed_entrypoint(6_000_000)).await;
    good_client_beside(&target, "54 unread 6 MB answers", &control).await;
    check_rss("54 unread answers of 6 MB entrypoints", &rss);
    drop(held);
    // Just under the annotation limit: 250 KB entrypoints, answered with
    // 340 KB each; 400 of them are 136 MB of answers, never read.
    let held = unread(&served, 400, &echoed_entrypoint(250_000)).await;
    good_client_beside(&target, "400 unread 340 KB answers", &control).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    check_rss("400 unread answers of 250 KB entrypoints", &rss);
    drop(held);
}

/// contract: limits.object-size, limits.large-reviews
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_with_a_million_arguments_do_not_take_the_memory() {
    let (_alone, served) = served_alone(&["--worker-threads", "6"]).await;
    let rss = served.sample_rss();
    // The figure of the report: six 6.9 MiB reviews at once, on both paths.
    let mutate = at_once(&served, 6, 2, &many_arguments(1_000_000)).await;
    let validate = at_once(&served, 6, 2, &workload_with_arguments(1_000_000)).await;
    check_rss("six million-argument reviews at once", &rss);
    answered_or_queued_past_the_deadline(&[&mutate, &validate]);
    // Just under the limit of values: read and reviewed.
    let started = Instant::now();
    let mutate = at_once(&served, 6, 2, &many_arguments(95_000)).await;
    let validate = at_once(&served, 6, 2, &workload_with_arguments(95_000)).await;
    eprintln!("24 reviews of 95,000 arguments in {:?}", started.elapsed());
    check_rss("six 95,000-argument reviews at once", &rss);
    answered_or_queued_past_the_deadline(&[&mutate, &validate]);
}

/// contract: limits.large-reviews, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_reviews_back_to_back_do_not_slow_small_ones() {
    let (_alone, served) = served_alone(&["--worker-threads", "2"]).await;
    let target = Target::served(&served);
    let control = target.control_window().await;
    // Clients at full speed, each a large review after another on a
    // keep-alive connection, until the good client is done.
    let answered = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..4)
        .map(|_| target.keep_alive(many_arguments(95_000), &answered))
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = "4 clients sending 95,000-argument reviews back to back";
    target.good_client((100, GOOD_P99), during, &control).await;
    for c in clients {
        c.abort();
    }
    let answered = answered.load(Ordering::Relaxed);
    eprintln!("{answered} large reviews answered meanwhile");
    assert!(answered > 0);
}
