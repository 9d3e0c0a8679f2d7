//! A configuration file rewritten in place, in two writes
//! 30 ms apart, while reviews are answered. A poll that falls between the
//! two writes reads a half file that is a valid configuration (the execd
//! image changed, the egress section not written yet, so the built-in
//! egress image); applying it answers reviews that mix the two versions.
//! A change is applied only once two polls in a row read it, so every
//! answer is one version or the other.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::https::{client, patch_of, post_review};
use common::server::{egress_review, start_with_config};

/// The config file of version `v`, whole, and the first of its two writes.
fn version(v: u32) -> (String, String) {
    let execd = format!("execd:\n  image: example.com/execd:v{v}\n");
    let whole = format!("{execd}egress:\n  image: example.com/egress:v{v}\n");
    (whole, execd)
}

/// The (execd, egress) versions an answer's patch injects: `None` for an
/// image of neither (the built-in one).
fn versions(patch: &str) -> (Option<u32>, Option<u32>) {
    let find = |what: &str| (0..4).find(|v| patch.contains(&format!("example.com/{what}:v{v}\"")));
    (find("execd"), find("egress"))
}

/// Rewrites the configuration file at `path` `times` times, between
/// versions 1 and 2, each as a tool that truncates the file and writes it
/// in two parts would; then clears `rewriting`.
fn rewrite_in_place(path: &Path, times: u32, rewriting: &AtomicBool) {
    for i in 0..times {
        let (whole, first) = version(1 + i % 2);
        std::fs::write(path, &first).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        std::fs::write(path, &whole).unwrap();
        // Stable long enough for two polls, then rewritten at a random
        // phase of the poll.
        std::thread::sleep(Duration::from_millis(420 + fastrand::u64(0..200)));
    }
    rewriting.store(false, Ordering::Release);
}

/// contract: config.reload
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_rewritten_in_place_is_never_applied_half_written() {
    const REWRITES: u32 = 40;
    let _alone = common::attack::alone().await;
    let (pki, server, path) = start_with_config(&version(0).0).await;
    let rewriting = Arc::new(AtomicBool::new(true));
    let writer = std::thread::spawn({
        let rewriting = rewriting.clone();
        move || rewrite_in_place(&path, REWRITES, &rewriting)
    });
    let c = client(&pki);
    let url = server.url("/mutate");
    let (mut answers, mut mixed, mut changed) = (0, Vec::new(), 0);
    let mut last = None;
    while rewriting.load(Ordering::Acquire) {
        let r = post_review(&c, &url, egress_review(&format!("cfg-{answers}"), true)).await;
        assert_eq!(r.status(), 200);
        let seen = versions(&patch_of(&r.bytes().await.unwrap()).to_string());
        answers += 1;
        if seen.0.is_none() || seen.0 != seen.1 {
            mixed.push(seen);
        }
        changed += usize::from(last.is_some_and(|l| l != seen));
        last = Some(seen);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    writer.join().unwrap();
    eprintln!(
        "{answers} answers during {REWRITES} in-place rewrites, {changed} changes of version seen"
    );
    assert!(
        changed >= 5,
        "the rewrites were applied ({changed} changes)"
    );
    assert!(
        mixed.is_empty(),
        "{} of {answers} answers mixed two versions (execd, egress): {:?}",
        mixed.len(),
        &mixed[..mixed.len().min(10)]
    );
    server.shutdown().await;
}
