//! The product on a real node (`tests/e2e/cluster.sh start --node`): the
//! whole control plane, kwok's nodes, and one kubelet with containerd,
//! runc and a bridge of its own. The suite builds the project's image with
//! podman, imports it into the node and installs the chart with `helm
//! install`, as a platform team would; then the chart's pods and the
//! sandboxes they inject really run: containers, probes, logs, exec.
//!
//! Needs root (the node's bridge, mounts and containerd). Each scenario has
//! its own namespace, `e2e-node-<name>`, deleted (and waited for) after it,
//! so they pass in any order (`tests/common/suite.rs`: name filters,
//! `E2E_ORDER`); it prints `N passed, M failed`. `./test.sh` runs it in a
//! step of its own (`cargo test --test node_e2e`).

mod availability;
#[path = "../common/mod.rs"]
mod common;
mod expiry;
mod harness;
mod install;
mod node;
mod policy;
mod sandbox;

use std::process::ExitCode;

use common::processes::{Plane, Result};
use common::suite;
use harness::Env;

suite::scenarios![
    Env;
    install::installed_as_users_install_it,
    sandbox::sandbox_with_policy_runs,
    sandbox::restricted_sandbox_runs,
    policy::sniffing_the_probe_yields_no_token,
    policy::unicode_net_admin_is_refused,
    policy::a_policy_file_the_sandbox_writes_is_refused,
    policy::the_app_starts_after_the_rules,
    expiry::expired_sandbox_is_stopped,
    availability::rollout_restart_refuses_nothing,
    availability::rotated_certificate_is_served,
];

/// Each scenario's namespace is deleted after it.
fn main() -> ExitCode {
    let clean_up = async |env: &mut Env, name: &'static str| env.clean_up(name).await;
    suite::main(
        "node e2e",
        SCENARIOS,
        Plane::Node,
        harness::setup,
        run_scenario,
        ("cleaning up", clean_up),
    )
}
