//! Helpers shared by the integration tests: one fixed clock, one `Context`
//! builder, one sandbox-pod builder, one metric reader, one test server with
//! its clients, and the binary under test.
//!
#![allow(
    dead_code,
    reason = "every test binary compiles its own copy of this module and uses only part of it"
)]

pub mod attack;
pub mod audit;
pub mod children;
pub mod cli;
pub mod clock;
pub mod cluster;
pub mod context;
pub mod crds;
pub mod events;
pub mod https;
pub mod inprocess;
pub mod load;
pub mod metrics;
pub mod opensandbox;
pub mod pods;
pub mod processes;
pub mod proxy;
pub mod reviews;
pub mod served;
pub mod server;
pub mod stats;
pub mod suite;
pub mod wire;
pub mod workloads;

/// The default annotation and label prefix.
pub const P: &str = "opensandbox.io";
