//! Helpers shared by the integration tests: one fixed clock, one `Context`
//! builder, one sandbox-pod builder and one metric reader.
//!
//! Every test binary compiles its own copy of this module and uses only part
//! of it, so unused items are expected here.
#![allow(dead_code)]

pub mod clock;
pub mod context;
pub mod metrics;
pub mod pods;
pub mod server;
pub mod workloads;

/// The default annotation and label prefix.
pub const P: &str = "opensandbox.io";
