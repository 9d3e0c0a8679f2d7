//! The e2e main: picks and orders the scenarios, starts the control plane
//! and the shared webhook, runs each scenario (catching panics), removes its
//! webhook configurations, and prints `N passed, M failed`.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Instant;

use futures_util::FutureExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::Result;
use crate::env::{Env, check};
use crate::processes::{BIN, Cluster, Webhook};

/// `scenarios![module::function, ...]` defines `SCENARIOS` (the names, in
/// declared order) and `run_scenario(env, name)`. Each function is
/// `async fn(&Env, id: &str) -> Result<()>`, `id` being its own name.
macro_rules! scenarios {
    ($($module:ident :: $function:ident),* $(,)?) => {
        const SCENARIOS: &[&str] = &[$(stringify!($function)),*];

        async fn run_scenario(env: &env::Env, name: &str) -> Result<()> {
            match name {
                $(stringify!($function) => $module::$function(env, name).await,)*
                _ => Err(format!("no scenario {name}").into()),
            }
        }
    };
}
pub(crate) use scenarios;

/// The scenarios to run: those whose name contains one of the command-line
/// filters (all without filters), in the order `E2E_ORDER` asks for.
fn plan(all: &[&'static str]) -> Result<Vec<&'static str>> {
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

async fn setup(work: &Path, cluster: &Cluster) -> Result<Env> {
    let certs = work.join("certs");
    let status = Command::new(BIN)
        .args(["certs", "--dns", "localhost", "--ip", "127.0.0.1", "--out"])
        .arg(&certs)
        .status()?;
    check(status.success(), "sandbox-webhook certs")?;
    let ca = std::fs::read(certs.join("ca.crt"))?;
    let config = work.join("config.yaml");
    std::fs::write(&config, "{}\n")?;
    let webhook = Webhook::start(&certs, &config, work.join("webhook.log"))?;

    let kubeconfig = Kubeconfig::read_from(cluster.kubeconfig())?;
    let client_config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(client_config)?;
    Ok(Env {
        client,
        certs,
        ca,
        config,
        work: work.to_owned(),
        webhook,
    })
}

/// Runs one scenario and removes its webhook configurations; the failure
/// message, if any.
async fn run_one(env: &Env, name: &'static str) -> Option<String> {
    let outcome = AssertUnwindSafe(crate::run_scenario(env, name))
        .catch_unwind()
        .await;
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into()),
        ),
    };
    match (failure, env.clean_up(name).await) {
        (None, Ok(())) => None,
        (None, Err(e)) => Some(format!("cleaning up: {e}")),
        (Some(f), _) => Some(f),
    }
}

pub fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plan = match plan(crate::SCENARIOS) {
        Ok(plan) => plan,
        Err(e) => {
            println!("e2e: {e}");
            println!("0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let work = std::env::temp_dir().join(format!("sandbox-webhook-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("work dir");

    println!("e2e: starting kube-apiserver and etcd (tests/e2e/cluster.sh)");
    let cluster = match Cluster::start(work.join("cluster")) {
        Ok(c) => c,
        Err(e) => {
            println!("e2e: cannot start the control plane: {e}");
            println!("0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    let results = runtime.block_on(async {
        let env = match setup(&work, &cluster).await {
            Ok(env) => env,
            Err(e) => {
                println!("test setup ... FAILED: {e}");
                return vec![("setup", Some(e.to_string()))];
            }
        };
        let mut results = Vec::new();
        for name in plan {
            let t = Instant::now();
            let failure = run_one(&env, name).await;
            match &failure {
                None => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
                Some(e) => println!("test {name} ... FAILED: {e}"),
            }
            results.push((name, failure));
        }
        results
    });
    drop(cluster);
    let failed = results.iter().filter(|(_, f)| f.is_some()).count();
    let passed = results.len() - failed;
    if failed > 0 {
        println!("e2e: logs kept in {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
