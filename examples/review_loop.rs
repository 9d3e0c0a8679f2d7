//! Runs `review::review` (or `review::null_review`) on one body N times in a
//! loop, for profilers: callgrind's instruction counts are stable across runs
//! where wall time on a shared machine is not. See docs/performance.md.
//!
//! ```sh
//! CARGO_PROFILE_RELEASE_DEBUG=true CARGO_PROFILE_RELEASE_STRIP=false \
//!     cargo build --release --example review_loop
//! valgrind --tool=callgrind target/release/examples/review_loop \
//!     bench/reviews/pod-10k.json 100 [null]
//! ```
//!
//! Instructions per review: (count for N) − (count for 0), divided by N.

use std::process::ExitCode;

use chrono::{DateTime, Utc};
use sandbox_webhook::config::Config;
use sandbox_webhook::mutate::{Context, FixedToken};
use sandbox_webhook::review;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(Ok(n))) = (args.first(), args.get(1).map(|s| s.parse::<usize>())) else {
        eprintln!("usage: review_loop BODY.json N [null]");
        return ExitCode::from(2);
    };
    let null = args.get(2).is_some_and(|s| s == "null");
    let body = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let config = Config::default();
    let tokens = FixedToken("benchTokenBenchTokenBenchToken00".into());
    let now = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::days(20_454);
    let ctx = Context {
        config: &config,
        now,
        own_namespace: None,
        tokens: &tokens,
    };
    let mut bytes = 0;
    for _ in 0..n {
        let answer = if null {
            review::null_review(&body).map(|b| b.len())
        } else {
            review::review(&body, &ctx).map(|r| r.body.len())
        };
        match answer {
            Ok(len) => bytes += len,
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("{n} reviews, {bytes} response bytes");
    ExitCode::SUCCESS
}
