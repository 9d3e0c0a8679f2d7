//! The main of an end-to-end suite (`harness = false`): which scenarios run
//! and in what order, the control plane they share, each one's outcome with
//! panics caught, and the `N passed, M failed` summary.
//!
//! ```text
//! cargo test --test SUITE                     declared order
//! cargo test --test SUITE -- NAME             only names containing NAME
//! E2E_ORDER=reverse cargo test --test SUITE
//! E2E_ORDER=shuffle [E2E_SEED=N] cargo test --test SUITE
//! ```

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use futures_util::FutureExt;

use crate::processes::{Cluster, Plane, Result};

/// `scenarios![Env; module::function, ...]` defines `SCENARIOS` (the names,
/// in declared order) and `run_scenario(env, name)`. Each function is
/// `async fn(&Env or &mut Env, id: &str) -> Result<()>`, `id` being its own
/// name.
/// With `shared Env;` first, `run_scenario` takes `&Env`, so that
/// scenarios can run side by side ([`lanes`]).
#[macro_export]
macro_rules! scenarios {
    (shared $env:ty; $($module:ident :: $function:ident),* $(,)?) => {
        const SCENARIOS: &[&str] = &[$(stringify!($function)),*];

        async fn run_scenario(env: &$env, name: &str) -> Result<()> {
            match name {
                $(stringify!($function) => $module::$function(env, name).await,)*
                _ => Err(format!("no scenario {name}").into()),
            }
        }
    };
    ($env:ty; $($module:ident :: $function:ident),* $(,)?) => {
        const SCENARIOS: &[&str] = &[$(stringify!($function)),*];

        async fn run_scenario(env: &mut $env, name: &str) -> Result<()> {
            match name {
                $(stringify!($function) => $module::$function(env, name).await,)*
                _ => Err(format!("no scenario {name}").into()),
            }
        }
    };
}
pub use crate::scenarios;

/// The scenarios to run: those whose name contains one of the command-line
/// filters (all without filters), in the order `E2E_ORDER` asks for.
pub fn plan(all: &[&'static str]) -> Result<Vec<&'static str>> {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut chosen: Vec<&'static str> = all
        .iter()
        .copied()
        .filter(|n| filters.is_empty() || filters.iter().any(|f| n.contains(f.as_str())))
        .collect();
    if chosen.is_empty() {
        return Err(format!("no scenario matches {filters:?}").into());
    }
    match std::env::var("E2E_ORDER").as_deref() {
        Err(_) | Ok("" | "declared") => {}
        Ok("reverse") => chosen.reverse(),
        Ok("shuffle") => {
            let seed = match std::env::var("E2E_SEED") {
                Ok(s) => s.parse().map_err(|e| format!("E2E_SEED={s}: {e}"))?,
                Err(_) => fastrand::u64(..),
            };
            println!("e2e: shuffled with E2E_SEED={seed}");
            fastrand::Rng::with_seed(seed).shuffle(&mut chosen);
        }
        Ok(other) => {
            return Err(format!("E2E_ORDER={other}: use declared, reverse or shuffle").into());
        }
    }
    Ok(chosen)
}

/// Runs `scenario`; the failure message (its error or its panic), if any.
pub async fn outcome(scenario: impl Future<Output = Result<()>>) -> Option<String> {
    match AssertUnwindSafe(scenario).catch_unwind().await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(ToString::to_string))
                .unwrap_or_else(|| "panic".into()),
        ),
    }
}

/// Runs the scenarios of each lane in order, and the lanes at the same
/// time (scenarios that share nothing, each in its own namespace); each
/// scenario's failure (its panic caught) and how long it took, by name.
pub async fn lanes<E>(
    env: &E,
    lanes: &[Vec<&'static str>],
    run: impl AsyncFn(&E, &'static str) -> Result<()>,
) -> Vec<(&'static str, Option<String>, f64)> {
    let run = &run;
    let lane = async |names: &[&'static str]| {
        let mut done = Vec::with_capacity(names.len());
        for &name in names {
            let started = Instant::now();
            let failure = outcome(Box::pin(run(env, name))).await;
            done.push((name, failure, started.elapsed().as_secs_f64()));
        }
        done
    };
    futures_util::future::join_all(lanes.iter().map(|names| lane(names)))
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// A scenario's failure, else that of what restores the suite after it
/// (`what` names that in the message).
pub fn after(failure: Option<String>, what: &str, restored: Result<()>) -> Option<String> {
    match (failure, restored) {
        (None, Ok(())) => None,
        (None, Err(e)) => Some(format!("{what}: {e}")),
        (Some(f), _) => Some(f),
    }
}

/// The whole main: picks the scenarios, starts the `plane` in a
/// fresh work directory, makes the suite's environment with `setup`, runs
/// each scenario with `run` (its panics caught) and then `restore` (named
/// `what` in its failure), which puts the environment back for the next
/// one whether the scenario passed or not, stops everything and prints the
/// summary. `suite` names it in messages and in
/// the work directory, `<tmp>/sandbox-webhook-<suite>-<pid>`, which is kept
/// when anything failed.
pub fn main<E>(
    suite: &str,
    all: &[&'static str],
    plane: Plane,
    setup: impl AsyncFnOnce(&Path, &Cluster) -> Result<E>,
    mut run: impl AsyncFnMut(&mut E, &'static str) -> Result<()>,
    (what, mut restore): (&str, impl AsyncFnMut(&mut E, &'static str) -> Result<()>),
) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plan = match plan(all) {
        Ok(plan) => plan,
        Err(e) => return could_not_start(suite, &e.to_string()),
    };
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        return could_not_start(suite, "cannot build a tokio runtime");
    };
    let work = std::env::temp_dir().join(format!(
        "sandbox-webhook-{}-{}",
        suite.replace(' ', "-"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&work);
    if let Err(e) = std::fs::create_dir_all(&work) {
        return could_not_start(suite, &format!("cannot create {}: {e}", work.display()));
    }
    match plane {
        Plane::Bare => println!(
            "{suite}: starting kube-apiserver and etcd (tests/e2e/cluster.sh start --bare)"
        ),
        Plane::Up => println!(
            "{suite}: starting the whole control plane, the real node, the webhook and the controller (tests/e2e/cluster.sh up)"
        ),
        Plane::Node => println!(
            "{suite}: starting the whole control plane and the real node (tests/e2e/cluster.sh start --node)"
        ),
    }
    let started = Instant::now();
    let cluster = match Cluster::start(work.join("cluster"), plane) {
        Ok(c) => c,
        Err(e) => return could_not_start(suite, &format!("cannot start the control plane: {e}")),
    };
    println!(
        "{suite}: control plane up in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let results = runtime.block_on(async {
        let mut env = match setup(&work, &cluster).await {
            Ok(env) => env,
            Err(e) => {
                println!("test setup ... FAILED: {e}");
                return vec![("setup", Some(e.to_string()))];
            }
        };
        let mut results = Vec::new();
        for name in plan {
            let started = Instant::now();
            let failure = outcome(Box::pin(run(&mut env, name))).await;
            let failure = after(failure, what, restore(&mut env, name).await);
            match &failure {
                None => println!(
                    "test {name} ... ok ({:.1}s)",
                    started.elapsed().as_secs_f64()
                ),
                Some(e) => println!("test {name} ... FAILED: {e}"),
            }
            results.push((name, failure));
        }
        results
    });
    let stopping = Instant::now();
    drop(cluster);
    println!(
        "{suite}: control plane stopped in {:.1}s; {:.1}s in all",
        stopping.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    finish(suite, &results, &work)
}

/// The exit when the suite could not start at all.
fn could_not_start(suite: &str, what: &str) -> ExitCode {
    println!("{suite}: {what}");
    println!("0 passed, 1 failed");
    ExitCode::FAILURE
}

/// Prints the summary; keeps `work` (the logs) when anything failed and
/// removes it otherwise.
fn finish(suite: &str, results: &[(&str, Option<String>)], work: &Path) -> ExitCode {
    let failed = results.iter().filter(|(_, f)| f.is_some()).count();
    let passed = results.len() - failed;
    if failed > 0 {
        println!("{suite}: logs kept in {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(work);
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Awaits `step`; what it gave and how many seconds it took, for the
/// progress line a scenario prints about a slow step.
pub async fn timed<T>(step: impl Future<Output = Result<T>>) -> Result<(T, f64)> {
    let started = Instant::now();
    let out = step.await?;
    Ok((out, started.elapsed().as_secs_f64()))
}
