//! The quick suite: everything that needs neither a control plane nor a
//! latency bound, in one binary (`cargo test --test quick`, and
//! `./test.sh quick`): the golden fixtures, the properties, the CLI, the
//! server's answers to single requests in-process (`common::inprocess`, no
//! socket), the server on loopback sockets where the connection matters
//! (limits, TLS, lifecycle, observability), the layering rule and the test
//! harness's own promise.
//!
//! One binary rather than one per file: each integration test binary links
//! every dependency again. `cargo test --test quick -- server_tls` runs one
//! module's tests.

mod cli;
mod cli_config;
mod cli_diagnose;
mod cli_fixtures;
mod cli_flags;
mod cli_inject;
mod cli_manifests;
mod cli_security;
mod cli_support;
mod contract;
mod diagnose_agrees;
mod doc_references;
mod golden;
mod harness_processes;
mod layers;
mod line_cap;
mod lints;
mod properties;
mod serve_dev;
mod server_answers;
mod server_errors;
mod server_lifecycle;
mod server_limits;
mod server_observability;
mod server_support;
mod server_tls;
mod server_validate;
mod upstream_secrecy;
