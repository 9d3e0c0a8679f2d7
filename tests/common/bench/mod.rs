//! What the cluster benchmarks (`examples/controller_bench.rs`,
//! `examples/scale/`, `examples/apiserver_modes.rs`) share.

pub mod cluster;
pub mod removals;
