//! The whole product on a whole control plane (`tests/e2e/cluster.sh up`):
//! etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
//! nodes (3 linux/amd64, 2 linux/arm64, 1 tainted windows/amd64), and the
//! real node (a kubelet with containerd, tainted: only the README's sandbox
//! goes there); this binary's webhook and controller on the host; the
//! chart's own objects (rendered by `helm template`) wiring them in. Pods
//! are written by the controller-manager, bound by the scheduler, run and
//! removed by kwok or the kubelet, so nothing here writes a status field by
//! hand.
//!
//! Each scenario has its own namespace, `e2e-cl-<name>`, deleted (and waited
//! for) after it, so they pass in any order (`tests/common/suite.rs`: name
//! filters, `E2E_ORDER`); it prints `N passed, M failed`.

mod drift;
mod expiry;
mod harness;
mod nodes;
mod platform;
mod real_node;
mod releases;
mod revisions;
mod rollout;
mod workloads;

use std::process::ExitCode;

use common::processes::{Plane, Result};
use common::suite;
use harness::Env;

suite::scenarios![
    Env;
    workloads::workloads_pods_are_injected_once,
    platform::platforms_land_on_their_nodes,
    expiry::expiry_follows_owners,
    nodes::deleted_node_takes_its_timers,
    rollout::rollout_under_load_refuses_nothing,
    real_node::readme_sandbox_runs_on_the_real_node,
    revisions::two_releases_side_by_side,
    drift::escaped_and_stale_sandboxes_are_reported,
];

/// Each scenario's namespace is deleted after it.
fn main() -> ExitCode {
    let clean_up = async |env: &mut Env, name: &'static str| env.clean_up(name).await;
    suite::main(
        "cluster e2e",
        SCENARIOS,
        Plane::Up,
        harness::setup,
        run_scenario,
        ("cleaning up", clean_up),
    )
}
