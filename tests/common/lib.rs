//! Helpers shared by the integration tests: one fixed clock, one `Context`
//! builder, one sandbox-pod builder, one metric reader, one test server with
//! its clients, and the binary under test; and what the benchmark examples
//! share ([`bench`]). One crate (a workspace member, a dev-dependency of
//! the main crate, which names it `common`), compiled once for every test
//! target and example.
#![allow(
    clippy::missing_panics_doc,
    clippy::missing_errors_doc,
    clippy::must_use_candidate,
    clippy::return_self_not_must_use,
    reason = "a test helper panics to fail its test and returns the suites' one \
              `Result`; its only callers are tests, which use what it returns"
)]

pub mod alloc;
pub mod args;
pub mod attack;
pub mod audit;
pub mod bench;
pub mod children;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod cluster_env;
pub mod context;
pub mod crds;
pub mod deletions;
pub mod fleet;
pub mod https;
pub mod inprocess;
pub mod load;
pub mod metrics;
pub mod opensandbox;
pub mod pods;
pub mod processes;
pub mod proxy;
pub mod requests;
pub mod reviews;
pub mod served;
pub mod server;
pub mod stats;
pub mod suite;
pub mod under_attack;
pub mod wire;
pub mod workloads;

/// The default annotation and label prefix.
pub const P: &str = "opensandbox.io";
