//! What the attack tests share: hostile connections held open on a test
//! server, and the good client whose latency says whether the server still
//! serves while they are held.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::task::JoinSet;

use crate::https::client;
use crate::pods::SandboxPod;
use crate::server::{Pki, Running, review_body, start_tuned, start_with_config, timed_review};
use crate::stats::percentile;
use crate::wire::{Tls, read_response, tls_connect};

/// How long a good client may wait for one answer, and its 99th
/// percentile (contract: limits.good-client: under 1 s, p99 50 ms or less),
/// each held as a [`Bound`].
pub const ANSWER_WITHIN: Duration = Duration::from_secs(1);
pub const P99_WITHIN: Duration = Duration::from_millis(50);

/// How many times its control window's figure a measured figure may be
/// when it is over its fixed bound.
pub const CONTROL_TIMES: u32 = 4;

/// A latency bound as every attack test holds it: the figure measured
/// during the attack is at most `within`, or at most `times` the same
/// figure measured with no attack in a control window of the same run. A
/// busy machine (a parallel build, a fresh machine's first run) slows the
/// control as much as the attack window, so only a slowdown the attack
/// causes fails; on a quiet machine the fixed bound is the one that holds.
/// [`Bound::check`] says which applied.
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    pub within: Duration,
    pub times: u32,
}

impl Bound {
    #[must_use]
    pub const fn new(within: Duration) -> Bound {
        Bound {
            within,
            times: CONTROL_TIMES,
        }
    }

    /// The larger of the two bounds, for a limit that must be set before
    /// the figure is measured (a timeout).
    #[must_use]
    pub fn limit(self, control: Duration) -> Duration {
        self.within.max(control * self.times)
    }

    /// Passes if `measured` is within either bound, printing which one
    /// applied; fails the test, naming both, if it is within neither.
    #[track_caller]
    pub fn check(self, what: &str, measured: Duration, control: Duration) {
        let relative = control * self.times;
        if measured <= self.within {
            eprintln!(
                "{what}: {measured:?} within the fixed bound of {:?} (control {control:?})",
                self.within
            );
        } else if measured <= relative {
            eprintln!(
                "{what}: {measured:?} over the fixed bound of {:?}, within {}x the control window's {control:?} ({relative:?}): the relative bound applied",
                self.within, self.times
            );
        } else {
            panic!(
                "{what}: {measured:?}, over the fixed bound of {:?} and over {}x the control window's {control:?} ({relative:?})",
                self.within, self.times
            );
        }
    }
}

/// The good client's bounds: a p99 of 50 ms, each answer within a second.
pub const GOOD_P99: Bound = Bound::new(P99_WITHIN);
pub const GOOD_ANSWER: Bound = Bound::new(ANSWER_WITHIN);

/// What the good client measured with no attack, on the same server in the
/// same run: the control window of its [`Bound`]s.
#[derive(Clone, Copy, Debug)]
pub struct Control {
    pub p99: Duration,
    pub max: Duration,
}

/// Reviews in a control window.
const CONTROL_REVIEWS: usize = 50;

/// The control window: [`good_client`]'s reviews with no attack running.
pub async fn control_window(addr: SocketAddr, config: &Arc<rustls::ClientConfig>) -> Control {
    let mut took = Vec::with_capacity(CONTROL_REVIEWS);
    for i in 0..CONTROL_REVIEWS {
        let review = sandbox_review(&format!("control-{i}"));
        let answer = timed_review(addr, config.clone(), &review).await;
        took.push(answer.unwrap_or_else(|e| panic!("control review {i} failed: {e}")));
    }
    took.sort();
    let control = Control {
        p99: percentile(&took, 0.99),
        max: took[took.len() - 1],
    };
    eprintln!(
        "control window: {CONTROL_REVIEWS} good reviews, p50 {:?}, p99 {:?}, max {:?}",
        percentile(&took, 0.5),
        control.p99,
        control.max
    );
    control
}

/// Attack tests hold thousands of connections and keep both cores busy;
/// one at a time, so that each measures its own attack only. Every test of
/// the attacks suite holds it, the ones that measure nothing too: they
/// share the binary, and would otherwise run beside one that does.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub async fn alone() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = ONE_AT_A_TIME.lock().await;
    tokio::task::spawn_blocking(previous_attack_closed)
        .await
        .expect("waiting for the previous attack's sockets");
    guard
}

/// An attack on a server's answers: this test [`alone`], a server on fresh
/// test settings (reading the configuration `yaml` when there is one), the
/// PKI that serves it (keep it: the server polls its files) and a
/// keep-alive client that trusts it.
pub async fn attacked(
    yaml: Option<&str>,
) -> (
    tokio::sync::MutexGuard<'static, ()>,
    Pki,
    Running,
    reqwest::Client,
) {
    let guard = alone().await;
    let (pki, server) = if let Some(yaml) = yaml {
        let (pki, server, _) = start_with_config(yaml).await;
        (pki, server)
    } else {
        let pki = Pki::new();
        let server = Running::start(pki.settings()).await;
        (pki, server)
    };
    let client = client(&pki);
    (guard, pki, server, client)
}

/// [`alone`] for a test that runs outside a runtime.
pub fn alone_blocking() -> tokio::sync::MutexGuard<'static, ()> {
    let guard = ONE_AT_A_TIME.blocking_lock();
    previous_attack_closed();
    guard
}

/// A test drops its guard before its runtime closes the thousands of
/// sockets it held; waits (up to 20 s) until this process holds few
/// descriptors again, so the next attack does not share the cores with
/// that teardown.
fn previous_attack_closed() {
    const FEW: usize = 64;
    let open = || std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count);
    let deadline = Instant::now() + Duration::from_secs(20);
    while open() > FEW && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Raises this process's soft limit on open files to the hard limit (the
/// server does the same at start), and checks that `needed` descriptors fit.
pub fn open_files_for(needed: u64) {
    let limit = sandbox_webhook::server::raise_fd_limit().expect("getrlimit/setrlimit");
    assert!(
        limit >= needed,
        "this test holds {needed} sockets; the open-files limit is {limit} (raise `ulimit -Hn`)"
    );
}

/// A test server for an attack that holds up to `files` descriptors in
/// this process ([`open_files_for`]), tuned by `tune`, with a request
/// deadline (60 s) that the attack outlasts: what keeps the good client
/// served must be the limit under test, not the deadline.
pub async fn start_for_attack(
    files: u64,
    tune: impl FnOnce(&mut sandbox_webhook::server::Tuning),
) -> (Pki, Running) {
    open_files_for(files);
    start_tuned(|t| {
        t.request_timeout = Duration::from_secs(60);
        tune(t);
    })
    .await
}

/// A sandbox pod's review, as the apiserver sends it.
pub fn sandbox_review(uid: &str) -> Vec<u8> {
    review_body(uid, &SandboxPod::new("sb-1").namespace("team-a").json())
}

/// `n` reviews, one after the other, each on a fresh TLS connection (a new
/// client each time, as the apiserver opens one when its pool is empty).
/// Fails at the first review that is refused or not answered within
/// [`GOOD_ANSWER`], then on a 99th percentile over `p99`; each against
/// `control`, measured before the attack ([`control_window`]).
pub async fn good_client(
    addr: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
    (n, p99): (usize, Bound),
    during: &str,
    control: &Control,
) {
    let answer_within = GOOD_ANSWER.limit(control.max);
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let review = sandbox_review(&format!("good-{i}"));
        let answer =
            tokio::time::timeout(answer_within, timed_review(addr, config.clone(), &review)).await;
        let Ok(answer) = answer else {
            panic!(
                "during {during}: good review {i} not answered within {answer_within:?} ({GOOD_ANSWER:?}, control max {:?})",
                control.max
            )
        };
        took.push(
            answer.unwrap_or_else(|e| panic!("during {during}: good review {i} failed: {e}")),
        );
    }
    took.sort();
    let (p50, p99_now) = (percentile(&took, 0.5), percentile(&took, 0.99));
    eprintln!(
        "during {during}: {n} good reviews, p50 {p50:?}, p99 {p99_now:?}, max {:?}",
        took[n - 1]
    );
    p99.check(
        &format!("during {during}: good reviews p99 (p50 {p50:?})"),
        p99_now,
        control.p99,
    );
}

/// Opens `n` connections with `open`, at most `parallel` at a time, each
/// given `patience`, opening another in place of one that fails (the server
/// may close a new connection to make room, and an attacker opens again);
/// gives up after `give_up` failures (a server that no longer accepts). The
/// ones opened, kept open.
pub async fn hold<F, Fut>(
    n: usize,
    parallel: usize,
    patience: Duration,
    give_up: usize,
    open: F,
) -> Vec<Tls>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = std::io::Result<Tls>> + Send + 'static,
{
    let mut opening = JoinSet::new();
    let mut held = Vec::with_capacity(n);
    let (mut tried, mut failed) = (0, 0);
    let started = Instant::now();
    loop {
        while opening.len() < parallel && held.len() + opening.len() < n && failed < give_up {
            opening.spawn(tokio::time::timeout(patience, open(tried)));
            tried += 1;
        }
        match opening.join_next().await {
            None => break,
            Some(Ok(Ok(Ok(tls)))) => held.push(tls),
            Some(_) => failed += 1,
        }
    }
    eprintln!(
        "{} of {n} hostile connections opened in {:?} ({tried} tried, {failed} failed)",
        held.len(),
        started.elapsed(),
    );
    held
}

/// How a hostile connection behaves once it has sent its bytes.
#[derive(Clone, Copy)]
pub enum Then {
    /// Reads the answer, then sits idle.
    ReadsTheAnswer,
    /// Stalls (a head and the start of a body sent).
    Stalls,
}

/// A TLS connection that has sent `bytes`, then does what `then` says.
pub async fn sent(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    bytes: Vec<u8>,
    then: Then,
) -> std::io::Result<Tls> {
    let mut tls = tls_connect(addr, config).await?;
    tls.write_all(&bytes).await?;
    tls.flush().await?;
    if let Then::ReadsTheAnswer = then {
        read_response(&mut tls).await?;
    }
    Ok(tls)
}
