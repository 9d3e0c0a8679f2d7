//! Against the binary:
//! - a log sink drained at 64 KiB/s, while clients at full speed make the
//!   server log faster than that: a review never waits for its log line
//!   (lines that do not fit the queue are dropped and counted);
//! - 400 connections that declare a body and stall reach their 5 s
//!   deadline together: answering them all at once must not hold the
//!   reviews of a good client (p99 50 ms).

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::attack::{GOOD_P99, Then, alone, hold, sandbox_review, sent};
use common::children;
use common::metrics::Metrics;
use common::processes::under_test;
use common::served::Served;
use common::under_attack::{Series, Target, metric, served_holding};
use common::wire::{get, post};

const SECOND: Duration = Duration::from_secs(1);

/// Reads `from` at most `per_second` bytes a second (all it can while
/// `free` is set) until it ends.
fn drain(mut from: impl Read, per_second: usize, free: &AtomicBool) {
    let slice = Duration::from_millis(50);
    let per_slice = per_second / 20;
    let mut buf = vec![0u8; 4096.min(per_slice.max(1))];
    loop {
        let started = Instant::now();
        let mut taken = 0;
        while free.load(Ordering::Relaxed) || taken < per_slice {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => taken += n,
            }
        }
        std::thread::sleep(slice.saturating_sub(started.elapsed()));
    }
}

/// contract: limits.log-queue, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_log_sink_does_not_slow_reviews() {
    let _alone = alone().await;
    let (pki, addr, admin, args) = Served::args(&["--worker-threads", "2"]);
    let mut command = Command::new(under_test());
    command
        .args(&args)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = children::spawn(command).expect("serve starts");
    let free = Arc::new(AtomicBool::new(true));
    let sink = child.stderr.take().unwrap();
    let drainer = {
        let free = free.clone();
        std::thread::spawn(move || drain(sink, 64 * 1024, &free))
    };
    let admin = admin.to_string();
    let started = Instant::now();
    while !get(&admin, "/readyz").is_ok_and(|(code, _)| code == 200) {
        assert!(started.elapsed() < 30 * SECOND, "not ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    let target = Target::new(addr, &pki);
    let control = target.control_window().await;
    // A client at full speed: a line of some 300 bytes a review, hundreds
    // of reviews a second, more than 64 KiB/s.
    let answered = Arc::new(AtomicUsize::new(0));
    let request = post("/mutate", "application/json", &sandbox_review("busy"));
    let busy = target.keep_alive(request, &answered);
    let during = "a free log sink";
    target.good_client((100, GOOD_P99), during, &control).await;
    free.store(false, Ordering::Relaxed);
    // Until the sink has fallen behind: the pipe and the queue are full,
    // and lines are being dropped (a server that waits for its log never
    // gets there, and its reviews wait instead).
    let dropped = || {
        let (_, text) = get(&admin, "/metrics").unwrap();
        Metrics::parse(&text).value("sandbox_webhook_log_lines_dropped_total", &[])
    };
    let behind = Instant::now();
    while dropped() == 0 && behind.elapsed() < 30 * SECOND {
        tokio::time::sleep(SECOND / 10).await;
    }
    eprintln!("the sink fell behind after {:?}", behind.elapsed());
    let during = "a log sink drained at 64 KiB/s";
    target.good_client((200, GOOD_P99), during, &control).await;
    let dropped = dropped();
    eprintln!(
        "{} reviews answered at full speed, {dropped} log lines dropped",
        answered.load(Ordering::Relaxed)
    );
    assert!(dropped > 0, "the sink fell behind");
    let _ = child.kill();
    let _ = child.wait();
    busy.abort();
    free.store(true, Ordering::Relaxed);
    drainer.join().unwrap();
}

/// The requests answered 503 at their deadline, before their operation was
/// read.
const DEADLINE_ERRORS: Series = (
    "sandbox_webhook_admission_requests_total",
    &[("operation", "unknown"), ("outcome", "error")],
);

/// contract: limits.request-timeout, limits.good-client
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_bodies_that_reach_their_deadline_together_do_not_slow_reviews() {
    const HOSTILE: usize = 400;
    let args = ["--worker-threads", "2", "--request-timeout", "5s"];
    let (_alone, served) = served_holding(2 * HOSTILE as u64 + 200, &args).await;
    let target = Target::served(&served);
    let control = target.control_window().await;
    let head = "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 262144\r\n\r\n{";
    let first = Instant::now();
    let stalled = hold(HOSTILE, 16, 2 * SECOND, 8, |_| {
        let bytes = head.as_bytes().to_vec();
        sent(target.addr, target.config.clone(), bytes, Then::Stalls)
    })
    .await;
    assert_eq!(stalled.len(), HOSTILE);
    let opened = first.elapsed();
    // From just before the first deadline until after the last.
    tokio::time::sleep_until((first + Duration::from_millis(4600)).into()).await;
    let during = "400 stalled bodies reaching their 5 s deadline";
    target.good_client((300, GOOD_P99), during, &control).await;
    eprintln!(
        "the stalled bodies were sent within {opened:?}; the good client ran until {:?} after the first",
        first.elapsed()
    );
    tokio::time::sleep_until((first + opened + Duration::from_millis(5500)).into()).await;
    let errors = metric(&served, DEADLINE_ERRORS);
    eprintln!("{errors} answered 503 at their deadline");
    assert!(errors >= HOSTILE as u64, "{errors} answered 503");
    drop(stalled);
}
