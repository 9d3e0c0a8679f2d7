//! The mutation core against what any admission webhook must do anyway.
//!
//! For each review body (`bench/reviews/`, written by `bench/make_reviews.py`):
//! - `kube_baseline`: parse into kube's `AdmissionReview<DynamicObject>` and
//!   serialize an allowed response without a patch (what the kube-rs
//!   admission example does before deciding anything);
//! - `null_review`: this crate's envelope parse, object skipped, allowed
//!   response without a patch (the cheapest honest webhook);
//! - `review`: the full webhook: parse, decide, patch, serialize.
//!
//! Run: `cargo bench --bench mutation`; bench/run.sh turns the output into
//! ratios.

use std::hint::black_box;
use std::path::Path;

use chrono::{DateTime, Utc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use sandbox_webhook::config::Config;
use sandbox_webhook::mutate::{Context, FixedToken};
use sandbox_webhook::review;

/// The one list of cases, shared with `bench/make_reviews.py` and `bench/run.sh`.
const CASES: &str = include_str!("../bench/cases.txt");

fn cases() -> impl Iterator<Item = &'static str> {
    CASES
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

fn load(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("bench/reviews")
        .join(format!("{name}.json"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run bench/make_reviews.py)", path.display()))
}

fn kube_baseline(body: &[u8]) -> Vec<u8> {
    let review: AdmissionReview<DynamicObject> = serde_json::from_slice(body).unwrap();
    let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
    serde_json::to_vec(&AdmissionResponse::from(&request).into_review()).unwrap()
}

fn bench(c: &mut Criterion) {
    let config = Config::default();
    let tokens = FixedToken("benchTokenBenchTokenBenchToken00".into());
    let now: DateTime<Utc> = DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&Utc);
    let ctx = Context {
        config: &config,
        now,
        own_namespace: None,
        tokens: &tokens,
    };
    let mut group = c.benchmark_group("admission");
    for name in cases() {
        let body = load(name);
        // The full path must really mutate, or the comparison means nothing.
        let out = review::review(&body, &ctx).unwrap();
        assert_eq!(out.outcome, review::Outcome::Mutated, "{name}");
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::new("kube_baseline", name), &body, |b, body| {
            b.iter(|| kube_baseline(black_box(body)));
        });
        group.bench_with_input(BenchmarkId::new("null_review", name), &body, |b, body| {
            b.iter(|| review::null_review(black_box(body)).unwrap());
        });
        group.bench_with_input(BenchmarkId::new("review", name), &body, |b, body| {
            b.iter(|| review::review(black_box(body), &ctx).unwrap());
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
