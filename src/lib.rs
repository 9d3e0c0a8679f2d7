//! sandbox-webhook: a mutating admission webhook that completes OpenSandbox
//! sandbox pods at admission.
//!
//! [`mutate`] is the pure decision; [`review`] wraps it in `AdmissionReview`
//! JSON; the server, TLS, configuration loading and the CLI are thin layers
//! around those two. The lifecycle controller's decisions are [`lifecycle`],
//! likewise pure, and [`controller`] is its Kubernetes runtime.

// First, and `#[macro_use]`: the crate's readers share the scaffolding of
// `json::visit`, and a macro is visible only after its module.
#[macro_use]
pub mod json;

pub(crate) mod admin;
pub mod case_runner;
pub mod certs;
pub mod cli;
pub mod config;
pub mod controller;
pub(crate) mod duration;
pub mod files;
pub mod lifecycle;
pub mod manifest;
pub mod mutate;
pub mod review;
pub mod server;
pub mod workload;
pub(crate) mod yaml_depth;
