//! End-to-end: a real kube-apiserver and etcd (started by
//! `tests/e2e/cluster.sh`, envtest-style) call a real `sandbox-webhook serve`
//! process on 127.0.0.1 through `MutatingWebhookConfigurations` whose
//! `clientConfig.url` points at it. Every assertion is on the pod as stored by
//! the apiserver, read back with GET.
//!
//! The scenarios share one control plane, so this target has its own main.
//! Each scenario has its own namespaces and webhook configuration
//! (`tests/e2e/env.rs`), so they pass in any order:
//!
//! ```text
//! cargo test --test e2e                          declared order
//! cargo test --test e2e -- pod_security          only names containing it
//! E2E_ORDER=reverse cargo test --test e2e
//! E2E_ORDER=shuffle [E2E_SEED=N] cargo test --test e2e
//! ```
//!
//! (`tests/common/suite.rs` picks and orders them.)
//! It prints `N passed, M failed` and stops everything it started, also when
//! a scenario panics.

mod admission;
mod after_admission;
mod audit;
mod availability;
mod env;
mod latency;
mod pod_security;
mod preflight;
mod processes;
mod reinvocation;
mod runner;
mod selection;

pub use common::processes::Result;

common::suite::scenarios![
    env::Env;
    admission::sandbox_pod_is_stored_mutated,
    admission::network_policy_gets_native_sidecar,
    admission::egress_env_reaches_the_stored_sidecar,
    admission::invalid_pod_is_denied,
    after_admission::the_guarantee_holds_after_admission,
    selection::untouched_pods,
    admission::dry_run_stores_nothing,
    reinvocation::reinvocation_keeps_one_of_each,
    reinvocation::reinvocation_applies_a_changed_policy,
    availability::webhook_down_blocks_only_sandboxes,
    latency::latency_added_by_the_webhook,
    pod_security::pod_security_levels,
    preflight::workloads_with_denied_templates_are_refused,
    preflight::workloads_are_admitted_while_the_preflight_is_down,
    audit::decisions_are_in_the_audit_log,
    audit::opted_out_pods_are_not_sent,
];

fn main() -> std::process::ExitCode {
    runner::main()
}
