//! A pod's author chooses how many annotation keys it
//! has. 60,000 misspelled keys drew 60,000 warnings (a 5.67 MiB answer), and
//! 60,000 keys just off the known names under the prefix took 94 times as
//! long as the same number outside it. Both against the real server on
//! loopback. A pod whose annotations exceed Kubernetes'
//! 256 KiB is denied before it is read (no API server admits it), so the
//! attack here is the most keys that fit under that limit.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::P;
use common::https::post_review;
use common::pods::SandboxPod;
use common::server::{Running, review_body};
use serde_json::Value;

/// How many keys an attacking pod carries: about 230 KB of annotations,
/// under the 256 KiB a pod may have.
const KEYS: usize = 6_000;

/// The names after `<prefix>/` that the webhook reads.
const KNOWN: [&str; 17] = sandbox_webhook::mutate::ANNOTATION_NAMES;

/// A small deterministic generator, so every run sends the same keys.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        usize::try_from(self.0 >> 33).unwrap() % below
    }

    fn symbol(&mut self) -> u8 {
        b"abcdefghijklmnopqrstuvwxyz0123456789-"[self.next(37)]
    }
}

/// `count` distinct misspellings of `credential-proxy`: one or two letters
/// replaced by another.
fn typos(count: usize) -> Vec<String> {
    let mut rng = Lcg(7);
    let mut out = BTreeSet::new();
    while out.len() < count {
        let mut name = b"credential-proxy".to_vec();
        for _ in 0..2 {
            let at = rng.next(name.len());
            let c = rng.symbol();
            if c != name[at] {
                name[at] = c;
            }
        }
        if name != b"credential-proxy" {
            out.insert(String::from_utf8(name).unwrap());
        }
    }
    out.into_iter().collect()
}

/// `count` names just off the known ones, as an attacker would choose them
/// to reach the edit distance: names as long as a known one, known names
/// with three letters changed or added, their letters shuffled, and plain
/// random names.
fn near_misses(count: usize) -> Vec<String> {
    let mut rng = Lcg(24);
    (0..count)
        .map(|i| {
            let known = KNOWN[i % KNOWN.len()].as_bytes();
            let mut name = known.to_vec();
            match i % 4 {
                0 => {
                    for _ in 0..3 {
                        let at = rng.next(name.len());
                        name[at] = rng.symbol();
                    }
                }
                1 => {
                    for _ in 0..3 {
                        let at = rng.next(name.len() + 1);
                        name.insert(at, rng.symbol());
                    }
                }
                2 => {
                    for at in (1..name.len()).rev() {
                        name.swap(at, rng.next(at + 1));
                    }
                }
                _ => {
                    let len = 2 + rng.next(18);
                    name = (0..len).map(|_| rng.symbol()).collect();
                }
            }
            // Every other group of four in capitals (the check ignores
            // case), and the index after a dot so that keys are distinct.
            let mut name = String::from_utf8(name).unwrap();
            if i / 4 % 2 == 1 {
                name = name.to_uppercase();
            }
            format!("{name}.{i}")
        })
        .collect()
}

/// A sandbox pod whose annotations are `prefix/name` for each name.
fn pod_with(prefix: &str, names: &[String]) -> SandboxPod {
    let mut pod = SandboxPod::new("sb-1").namespace("team-a");
    for name in names {
        pod = pod.raw_annotation(&format!("{prefix}/{name}"), "x");
    }
    pod
}

async fn review(c: &reqwest::Client, server: &Running, body: &[u8]) -> (Duration, Value) {
    let started = Instant::now();
    let r = post_review(c, &server.url("/mutate"), body.to_vec()).await;
    assert_eq!(r.status(), 200);
    let bytes = r.bytes().await.expect("an answer");
    let took = started.elapsed();
    (took, serde_json::from_slice(&bytes).expect("JSON"))
}

/// contract: warning.cap
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_ten_warnings_and_how_many_more() {
    let (_alone, _pki, server, c) = common::attack::attacked(None).await;
    let names = typos(KEYS);
    let pod = pod_with(P, &names).annotation("expires-at", "2000-01-01T00:00:00Z");
    let started = Instant::now();
    let r = post_review(&c, &server.url("/mutate"), review_body("u-w", &pod.json())).await;
    assert_eq!(r.status(), 200);
    let bytes = r.bytes().await.unwrap();
    eprintln!(
        "{KEYS} misspelled keys: {} bytes answered in {:?}",
        bytes.len(),
        started.elapsed()
    );
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let warnings: Vec<&str> = answer["response"]["warnings"]
        .as_array()
        .expect("warnings")
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert_eq!(warnings.len(), 11, "{warnings:#?}");
    // The expiry first: one warning, and the one that matters most.
    assert!(warnings[0].contains("is already past"), "{}", warnings[0]);
    for w in &warnings[1..10] {
        assert!(
            w.contains("did you mean opensandbox.io/credential-proxy?"),
            "{w}"
        );
    }
    assert_eq!(warnings[10], format!("and {} more warnings", KEYS - 9));
    assert!(bytes.len() < 16 * 1024, "{} bytes", bytes.len());

    // Under the cap, every warning is there and no count is added.
    let pod = pod_with(P, &typos(3));
    let (_, answer) = review(&c, &server, &review_body("u-3", &pod.json())).await;
    let warnings = answer["response"]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 3, "{answer}");
    server.shutdown().await;
}

/// The median of `times`.
fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// How much longer reviews of `names` under the prefix take than of the
/// same names, as long, under a prefix of the same length that is not the
/// webhook's (only the prefix check runs for those): the ratio of the
/// medians of 7 of each, sent alternately so that load from other
/// processes falls on both alike.
async fn cost_against_elsewhere(c: &reqwest::Client, server: &Running, names: &[String]) -> f64 {
    let elsewhere = "opensandbox.ix";
    assert_eq!(elsewhere.len(), P.len());
    let attack = review_body("u-a", &pod_with(P, names).json());
    let control = review_body("u-c", &pod_with(elsewhere, names).json());
    assert_eq!(attack.len(), control.len());
    let (_, answer) = review(c, server, &attack).await;
    let warned = answer["response"]["warnings"]
        .as_array()
        .map_or(0, Vec::len);
    assert!(warned <= 11, "{warned} warnings");
    review(c, server, &control).await;
    let (mut under, mut outside) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        under.push(review(c, server, &attack).await.0);
        outside.push(review(c, server, &control).await.0);
    }
    let (under, outside) = (median(under), median(outside));
    let ratio = under.as_secs_f64() / outside.as_secs_f64();
    eprintln!(
        "{} keys under the prefix: {under:?}, outside it: {outside:?} (medians), ratio {ratio:.2}",
        names.len()
    );
    ratio
}

/// contract: warning.typo-cost
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_under_the_prefix_cost_at_most_three_times_keys_elsewhere() {
    let (_alone, _pki, server, c) = common::attack::attacked(None).await;
    for (what, names) in [
        // The attack: every key a misspelling, each drawing a warning.
        ("misspelled keys", typos(KEYS)),
        // Keys chosen to get past the cheap checks to the edit distance.
        ("near misses", near_misses(KEYS)),
    ] {
        let ratio = cost_against_elsewhere(&c, &server, &names).await;
        assert!(ratio <= 3.0, "{what} cost {ratio:.2} times keys elsewhere");
    }
    server.shutdown().await;
}
