//! Replays corpora in a release build: every input is checked as the fuzz
//! target checks it, and `review::review` alone is timed. libFuzzer's
//! `-timeout` counts whole seconds in an instrumented build, so the 10 ms
//! bar (a single review slower than that would mean quadratic behaviour) is
//! held here instead.
//!
//! ```sh
//! cargo run --release --example replay -- --raw corpus/review_raw \
//!     --structured corpus/review_structured --fixtures ../tests/fixtures \
//!     [--raw DIR]... [--bar-ms 10]
//! ```
//!
//! Each input is timed `RUNS` times and its fastest run counts: on a shared
//! machine the slower runs measure the neighbours, while quadratic work
//! shows in every run.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use sandbox_webhook::config::Config;
use sandbox_webhook::review;
use sandbox_webhook_fuzz::check::{self, Answer};
use sandbox_webhook_fuzz::{configs, fixtures, structured, with_context};

const RUNS: usize = 3;

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Raw,
    Structured,
    Fixtures,
}

struct Timed {
    input: PathBuf,
    config: &'static str,
    size: usize,
    time: Duration,
}

fn main() -> ExitCode {
    let mut dirs = Vec::new();
    let mut bar = Duration::from_millis(10);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next();
        match (flag.as_str(), value) {
            ("--raw", Some(d)) => dirs.push((Kind::Raw, PathBuf::from(d))),
            ("--structured", Some(d)) => dirs.push((Kind::Structured, PathBuf::from(d))),
            ("--fixtures", Some(d)) => dirs.push((Kind::Fixtures, PathBuf::from(d))),
            ("--bar-ms", Some(ms)) if ms.parse::<u64>().is_ok() => {
                bar = Duration::from_millis(ms.parse().unwrap_or(10));
            }
            _ => {
                eprintln!(
                    "usage: replay [--raw DIR]... [--structured DIR]... [--fixtures DIR]... [--bar-ms MS]"
                );
                return ExitCode::from(2);
            }
        }
    }
    match replay(&dirs, bar) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("replay: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `Ok(false)`: an invariant broke or an input was over the bar.
fn replay(dirs: &[(Kind, PathBuf)], bar: Duration) -> Result<bool, String> {
    let mut timed = Vec::new();
    let mut inputs = 0;
    let mut violations = 0;
    let mut answers = std::collections::BTreeMap::<String, usize>::new();
    let started = Instant::now();
    for (kind, dir) in dirs {
        for (input, bytes) in inputs_of(*kind, dir)? {
            inputs += 1;
            let cases: Vec<(&'static str, &Config, Vec<u8>)> = match kind {
                Kind::Raw | Kind::Fixtures => configs()
                    .all
                    .iter()
                    .map(|(name, c)| (*name, c, bytes.clone()))
                    .collect(),
                Kind::Structured => {
                    let generated = structured::generate(&bytes);
                    let (name, c) = &configs().all[generated.config];
                    vec![(*name, c, generated.body)]
                }
            };
            for (name, config, body) in cases {
                match check::check_review(&body, config) {
                    Ok(answer) => *answers.entry(describe(answer)).or_default() += 1,
                    Err(v) => {
                        violations += 1;
                        eprintln!("VIOLATION {} (configuration {name}): {v}", input.display());
                    }
                }
                timed.push(Timed {
                    input: input.clone(),
                    config: name,
                    size: body.len(),
                    time: fastest(&body, config),
                });
            }
        }
    }
    timed.sort_by_key(|t| std::cmp::Reverse(t.time));
    let total: Duration = timed.iter().map(|t| t.time).sum();
    println!(
        "replay: {inputs} inputs, {} reviews checked in {:.1?}; timed reviews sum to {:.1?}",
        timed.len(),
        started.elapsed(),
        total
    );
    for (answer, n) in &answers {
        println!("  {answer}: {n}");
    }
    println!("slowest reviews (release build, fastest of {RUNS} runs):");
    for t in timed.iter().take(5) {
        println!(
            "  {:>9.3} ms  {:>7} bytes  {:<9}  {}",
            t.time.as_secs_f64() * 1e3,
            t.size,
            t.config,
            t.input.display()
        );
    }
    let over = timed.iter().filter(|t| t.time > bar).count();
    if over > 0 {
        eprintln!("replay: {over} reviews took longer than {bar:?}");
    }
    if violations > 0 {
        eprintln!("replay: {violations} invariant violations");
    }
    Ok(over == 0 && violations == 0 && !timed.is_empty())
}

fn describe(answer: Answer) -> String {
    match answer {
        Answer::Refused => "refused (not an AdmissionReview)".into(),
        Answer::Answered(review::Outcome::Skipped(reason)) => {
            format!("skipped ({})", reason.as_str())
        }
        Answer::Answered(review::Outcome::Denied(code)) => format!("denied ({code})"),
        Answer::Answered(outcome) => outcome.as_str().into(),
    }
}

fn fastest(body: &[u8], config: &Config) -> Duration {
    with_context(config, |ctx| {
        (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                let answer = review::review(body, ctx);
                let time = start.elapsed();
                std::hint::black_box(answer.is_ok());
                time
            })
            .min()
            .unwrap_or_default()
    })
}

/// The files of a corpus directory, or the fixtures as reviews.
fn inputs_of(kind: Kind, dir: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
    if kind == Kind::Fixtures {
        return Ok(fixtures::reviews(dir)?
            .into_iter()
            .map(|(name, body)| (dir.join(name), body))
            .collect());
    }
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| match std::fs::read(&p) {
            Ok(bytes) => Ok((p, bytes)),
            Err(e) => Err(format!("{}: {e}", p.display())),
        })
        .collect()
}
