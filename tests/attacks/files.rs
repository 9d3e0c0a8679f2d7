//! contract: limits.polled-files, config.reload, http.cert-reload
//!
//! The files the server polls, made hostile on the operator's side,
//! against the binary (`SANDBOX_WEBHOOK_UNDER_TEST` runs another build):
//! - `tls.crt` linked to `/dev/zero`: read whole, it grew until the kernel
//!   killed the process (1 GiB, an OOM kill under the chart's limit);
//! - `tls.crt` replaced by a FIFO: the poll blocked in `open` for ever, so
//!   no failure was counted and a good pair swapped in later was never
//!   applied;
//! - a 100 MB configuration: read whole and parsed (277 MiB at its peak);
//! - a configuration nested 100,000 deep: its parse is quadratic (29 s in
//!   a release build, minutes in a debug one).
//!
//! Each is now refused before it is read past 1 MiB (what a Secret or a
//! `ConfigMap` holds), or before its nesting costs anything, and counted as
//! a failed reload; the server keeps what it had and goes on polling.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::attack::Bound;
use common::served::Served;
use common::server::{replace, timed_review};
use common::under_attack::{Series, metric, served_alone};
use common::wire::tls_connect;
use tokio::sync::MutexGuard;

/// Polls every 200 ms (production: 5 s), so a reload shows within a second.
const POLL: &str = "200ms";
const PATIENCE: Duration = Duration::from_secs(15);

/// Waits until `name{labels}` reaches `at_least`, failing after
/// [`PATIENCE`], or as soon as the server's RSS passes `rss_mib`.
fn wait_for(served: &Served, series: Series, at_least: u64, rss_mib: u64) {
    wait_within(served, series, at_least, rss_mib, PATIENCE);
}

/// [`wait_for`] with its own patience.
fn wait_within(
    served: &Served,
    (name, labels): Series,
    at_least: u64,
    rss_mib: u64,
    patience: Duration,
) {
    let started = Instant::now();
    loop {
        let rss = common::served::rss_kib(served.pid()) / 1024;
        assert!(rss < rss_mib, "the server's RSS reached {rss} MiB");
        if metric(served, (name, labels)) >= at_least {
            eprintln!(
                "{name}{labels:?} reached {at_least} after {:?}",
                started.elapsed()
            );
            return;
        }
        assert!(
            started.elapsed() < patience,
            "{name}{labels:?} did not reach {at_least} within {patience:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// The DER of the certificate a new connection is served.
async fn served_cert(served: &Served) -> Vec<u8> {
    let tls = tls_connect(served.addr, served.pki.client_config())
        .await
        .expect("a handshake");
    tls.get_ref().1.peer_certificates().expect("a certificate")[0].to_vec()
}

fn der(pem: &str) -> Vec<u8> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .expect("a certificate")
        .expect("PEM")
        .to_vec()
}

async fn still_answers(served: &Served) {
    let review = common::attack::sandbox_review("after");
    timed_review(served.addr, served.pki.client_config(), &review)
        .await
        .expect("a review answered");
}

const CERT_RELOADS: &str = "sandbox_webhook_cert_reloads_total";
const CONFIG_RELOADS: &str = "sandbox_webhook_config_reloads_total";
const CERT_FAILURES: Series = (CERT_RELOADS, &[("result", "failure")]);
const CERT_SUCCESSES: Series = (CERT_RELOADS, &[("result", "success")]);
const CONFIG_FAILURES: Series = (CONFIG_RELOADS, &[("result", "failure")]);
const CONFIG_SUCCESSES: Series = (CONFIG_RELOADS, &[("result", "success")]);
/// 1 while the last reload of the configuration was applied, 0 once one
/// was refused.
const CONFIG_APPLIED: Series = ("sandbox_webhook_config_last_reload_success", &[]);

/// This test alone against the binary polling the configuration file it
/// returns (in the directory it returns), first written with `first`.
async fn served_with_config(
    first: &[u8],
) -> (MutexGuard<'static, ()>, Served, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, first).unwrap();
    let config_arg = config.display().to_string();
    let args = ["--reload-interval", POLL, "--config", &config_arg];
    let (alone, served) = served_alone(&args).await;
    (alone, served, dir, config)
}

/// contract: limits.polled-files
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_linked_to_dev_zero_is_refused_unread() {
    let (_alone, served) = served_alone(&["--reload-interval", POLL]).await;
    let before = served_cert(&served).await;
    let rss = common::served::rss_kib(served.pid()) / 1024;
    let cert = served.pki.path("tls.crt");
    std::fs::remove_file(&cert).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &cert).unwrap();
    // Read whole, /dev/zero never ends: the RSS bound is what fails first.
    wait_for(&served, CERT_FAILURES, 1, rss + 64);
    std::thread::sleep(Duration::from_secs(1));
    let after = common::served::rss_kib(served.pid()) / 1024;
    eprintln!("RSS {rss} MiB before, {after} MiB after a second of polls");
    assert!(after < rss + 64, "RSS {after} MiB");
    assert_eq!(
        served_cert(&served).await,
        before,
        "the pair in use is kept"
    );
    still_answers(&served).await;
}

/// contract: limits.polled-files
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_does_not_stop_certificate_rotation() {
    let (_alone, served) = served_alone(&["--reload-interval", POLL]).await;
    let cert = served.pki.path("tls.crt");
    mkfifo(&cert);
    // No writer ever comes: a blocking open waits for ever.
    wait_for(&served, CERT_FAILURES, 1, 1024);
    // Rotation goes on: a good pair written over the FIFO is applied.
    let next = served.pki.leaf();
    replace(&served.pki.path("tls.key"), next.key_pem.as_bytes());
    replace(&cert, next.cert_pem.as_bytes());
    let started = Instant::now();
    while served_cert(&served).await != der(&next.cert_pem) {
        assert!(
            started.elapsed() < PATIENCE,
            "the good pair written after the FIFO was not applied within {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "the good pair was applied {:?} after it was written",
        started.elapsed()
    );
    assert_eq!(metric(&served, CERT_SUCCESSES), 1);
}

/// A valid configuration padded with comments to `bytes`.
fn padded_config(bytes: usize) -> Vec<u8> {
    let mut text = b"prefix: opensandbox.io\n".to_vec();
    let line = format!("# {}\n", "x".repeat(97));
    while text.len() < bytes {
        text.extend_from_slice(line.as_bytes());
    }
    text
}

/// contract: limits.polled-files
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_configuration_is_refused_unread() {
    let (_alone, served, _dir, config) = served_with_config(&padded_config(100)).await;
    let rss = common::served::rss_kib(served.pid()) / 1024;
    let sampled = served.sample_rss();
    replace(&config, &padded_config(100_000_000));
    wait_for(&served, CONFIG_FAILURES, 1, 1024);
    std::thread::sleep(Duration::from_secs(1));
    eprintln!("RSS {rss} MiB before, peak {} MiB", sampled.peak_mib());
    assert!(
        sampled.peak_mib() < rss + 16,
        "a 100 MB configuration took the RSS to {} MiB",
        sampled.peak_mib()
    );
    let applied = metric(&served, CONFIG_APPLIED);
    assert_eq!(applied, 0, "the refusal is what the gauge says");
    still_answers(&served).await;
}

/// contract: limits.polled-files, limits.yaml-depth
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configuration_nested_100000_deep_is_refused_at_once() {
    let (_alone, served, _dir, config) = served_with_config(b"prefix: opensandbox.io\n").await;
    // The control window: how long a good change takes to be applied.
    let started = Instant::now();
    replace(&config, b"prefix: example.com\n");
    wait_for(&served, CONFIG_SUCCESSES, 1, 1024);
    let control = started.elapsed();
    let deep = format!(
        "excludedNamespaces: {}{}\n",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let started = Instant::now();
    replace(&config, deep.as_bytes());
    // Two polls read it, then it is refused, as fast as a good change is
    // applied once the parse is linear (29 s of CPU in a release build
    // before, minutes in a debug one).
    let bound = Bound::new(Duration::from_secs(3));
    wait_within(&served, CONFIG_FAILURES, 1, 1024, bound.limit(control));
    bound.check("the deep configuration refused", started.elapsed(), control);
    still_answers(&served).await;
}
