//! End-to-end proof of the lifecycle controller (SPEC 10, issue 12) against
//! a real kube-apiserver and etcd (`tests/e2e/cluster.sh`): two
//! `sandbox-webhook controller` replicas share a Lease; every assertion is
//! on what the apiserver stores. There is no scheduler or kubelet, so a
//! scheduling failure is written to the status subresource as kube-scheduler
//! writes it. Each scenario uses its own namespace; they run in order and
//! print `N passed, M failed`.

#[path = "controller_e2e/expiry.rs"]
mod expiry;
#[path = "controller_e2e/harness.rs"]
mod harness;
#[path = "controller_e2e/leadership.rs"]
mod leadership;
#[path = "controller_e2e/platform.rs"]
mod platform;

use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use chrono::Utc;
use futures_util::FutureExt;
use harness::*;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use serde_json::Value;

pub(crate) const SCHEDULER_MESSAGE: &str = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
pub(crate) const CAPACITY_MESSAGE: &str = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";

pub(crate) struct Env {
    client: Client,
    work: PathBuf,
    config: PathBuf,
    controllers: Vec<Controller>,
}

impl Env {
    pub(crate) fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub(crate) fn leader(&self) -> Result<&Controller> {
        let leaders: Vec<_> = self.controllers.iter().filter(|c| c.is_leader()).collect();
        check(
            leaders.len() == 1,
            format!("{} leaders, expected exactly 1", leaders.len()),
        )?;
        Ok(leaders[0])
    }

    pub(crate) async fn wait_leader(&self, timeout: Duration) -> Result<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(i) = self.controllers.iter().position(Controller::is_leader) {
                return Ok(i);
            }
            check(
                Instant::now() < deadline,
                format!("no leader within {timeout:?}"),
            )?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) fn diagnose(&self, pod: &Pod, now: chrono::DateTime<Utc>) -> Result<Value> {
        diagnose(pod, now, &self.config, &self.work)
    }
}

async fn setup(cluster: &Cluster, work: &std::path::Path) -> Result<Env> {
    let client = cluster.client().await?;
    namespace(&client, HOME).await?;
    let config = work.join("config.yaml");
    std::fs::write(&config, "{}\n")?;
    let controllers = vec![
        Controller::start("ctl-a", &cluster.kubeconfig(), &config, work)?,
        Controller::start("ctl-b", &cluster.kubeconfig(), &config, work)?,
    ];
    let env = Env {
        client,
        work: work.to_owned(),
        config,
        controllers,
    };
    env.wait_leader(Duration::from_secs(LEASE_SECONDS * 3))
        .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    env.leader()?;
    Ok(env)
}

macro_rules! scenario {
    ($results:ident, $env:expr, $f:ident) => {{
        let name = stringify!($f);
        let t = Instant::now();
        let outcome = AssertUnwindSafe($f($env)).catch_unwind().await;
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
        match &failure {
            None => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
            Some(e) => println!("test {name} ... FAILED: {e}"),
        }
        $results.push((name, failure));
    }};
}

use expiry::*;
use leadership::*;
use platform::*;

fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        println!("0 passed, 1 failed");
        return std::process::ExitCode::FAILURE;
    };
    let work = std::env::temp_dir().join(format!(
        "sandbox-webhook-controller-e2e-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&work);
    if let Err(e) = std::fs::create_dir_all(&work) {
        println!(
            "controller e2e: cannot create {}: {e}\n0 passed, 1 failed",
            work.display()
        );
        return std::process::ExitCode::FAILURE;
    }
    println!("controller e2e: starting kube-apiserver and etcd (tests/e2e/cluster.sh)");
    let cluster = match Cluster::start(work.join("cluster")) {
        Ok(c) => c,
        Err(e) => {
            println!("controller e2e: cannot start the control plane: {e}\n0 passed, 1 failed");
            return std::process::ExitCode::FAILURE;
        }
    };
    let results = runtime.block_on(async {
        let mut results: Vec<(&str, Option<String>)> = Vec::new();
        let mut env = match setup(&cluster, &work).await {
            Ok(env) => env,
            Err(e) => {
                println!("test setup ... FAILED: {e}");
                results.push(("setup", Some(e.to_string())));
                return results;
            }
        };
        scenario!(results, &env, expired_pod_is_deleted_on_time);
        scenario!(results, &env, renewed_pod_survives_its_old_time);
        scenario!(results, &env, manual_cleanup_and_invalid_stay);
        scenario!(results, &env, job_owner_is_deleted);
        scenario!(results, &env, replicaset_owner_is_left_with_a_warning);
        scenario!(results, &env, recreated_pod_is_not_hit_by_a_stale_decision);
        scenario!(results, &env, unschedulable_platform_is_reported);
        scenario!(results, &env, invalid_renewal_is_denied_by_the_policy);
        scenario!(results, &mut env, standby_takes_over_when_the_leader_dies);
        scenario!(results, &mut env, sigterm_releases_the_lease);
        scenario!(results, &mut env, delete_unschedulable_removes_the_pod);
        results
    });
    drop(cluster);
    let failed = results.iter().filter(|(_, f)| f.is_some()).count();
    let passed = results.len() - failed;
    if failed > 0 {
        println!("controller e2e: logs kept in {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
