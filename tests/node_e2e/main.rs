//! The product on a real node (`tests/e2e/cluster.sh start --node`): the
//! whole control plane, kwok's nodes, one kubelet with containerd, runc and
//! a bridge of its own, and agent-sandbox (its CRDs and controller). The suite builds the project's image with
//! podman, imports it into the node and installs the chart with `helm
//! install`, as a platform team would; then the chart's pods and the
//! sandboxes they inject really run: containers, probes, logs, exec.
//!
//! Needs root (the node's bridge, mounts and containerd). Each scenario has
//! its own namespace, `e2e-node-<name>`, deleted (and waited for) after it,
//! so they pass in any order (`tests/common/suite.rs`: name filters,
//! `E2E_ORDER`); it prints `N passed, M failed`. `./test.sh` runs it in a
//! step of its own (`cargo test --test node_e2e`).

mod agent;
mod availability;
mod expiry;
mod harness;
mod install;
mod node;
mod owners;
mod policy;
mod pool;
mod preflight;
mod sandbox;
mod server;

use std::collections::HashMap;
use std::process::ExitCode;

use common::processes::{Plane, Result};
use common::suite;
use harness::Env;

suite::scenarios![
    shared Env;
    install::installed_as_users_install_it,
    sandbox::sandbox_with_policy_runs,
    sandbox::restricted_sandbox_runs,
    policy::sniffing_the_probe_yields_no_token,
    policy::unicode_net_admin_is_refused,
    policy::a_policy_file_the_sandbox_writes_is_refused,
    policy::the_app_starts_after_the_rules,
    expiry::expired_sandbox_is_stopped,
    server::stack_server_sandbox_runs,
    server::stack_server_sandbox_deleted,
    owners::stack_expired_sandbox_is_shut_down,
    owners::stack_expired_sandbox_is_suspended,
    pool::stack_pool_and_claimed_pods_are_injected,
    preflight::stack_preflight_refuses_a_denied_sandbox,
    availability::rollout_restart_refuses_nothing,
    availability::rotated_certificate_is_served,
];

/// The stack scenarios (`stack_*`) that the plan holds run together, at the
/// first of them, as lanes: these two, each needing the controller's
/// `ownerActions` to itself at its pod's expiry (the second changes it with
/// `helm upgrade` once the first is over, and sets it back:
/// `owners::OwnerTurns`), beside the others in order, none of which
/// creates a sandbox that expires while they run. Their expiries then
/// overlap each other and the rest. Each still has its own namespace,
/// result and time (the suite reports the group's wall time at the first of
/// them).
const OWNER_LANE: [&str; 2] = [
    "stack_expired_sandbox_is_shut_down",
    "stack_expired_sandbox_is_suspended",
];

/// Each scenario's namespace is deleted after it.
fn main() -> ExitCode {
    let stack: Vec<&'static str> = suite::plan(SCENARIOS)
        .unwrap_or_default()
        .into_iter()
        .filter(|name| name.starts_with("stack_"))
        .collect();
    let mut results: Option<HashMap<&'static str, Option<String>>> = None;
    let run = async |env: &mut Env, name: &'static str| -> Result<()> {
        if !stack.contains(&name) || stack.len() < 2 {
            return run_scenario(env, name).await;
        }
        let found = if let Some(found) = &mut results {
            found
        } else {
            let (owners, rest): (Vec<_>, Vec<_>) =
                stack.iter().partition(|n| OWNER_LANE.contains(n));
            if owners.len() == OWNER_LANE.len() {
                env.owners.run_together();
            }
            let mut lanes: Vec<Vec<&'static str>> = owners.into_iter().map(|n| vec![n]).collect();
            lanes.push(rest);
            println!("    the stack scenarios run as lanes at once: {lanes:?}");
            let done = suite::lanes(&*env, &lanes, run_scenario).await;
            for (scenario, failure, secs) in &done {
                let said = failure.as_deref().map_or("ok", |_| "FAILED");
                println!("    {scenario}: {said} in {secs:.1}s");
            }
            results.insert(done.into_iter().map(|(n, f, _)| (n, f)).collect())
        };
        match found.remove(name) {
            Some(None) => Ok(()),
            Some(Some(failure)) => Err(failure.into()),
            None => Err(format!("{name} did not run with the stack").into()),
        }
    };
    let clean_up = async |env: &mut Env, name: &'static str| env.clean_up(name).await;
    suite::main(
        "node e2e",
        SCENARIOS,
        Plane::Node,
        harness::setup,
        run,
        ("cleaning up", clean_up),
    )
}
