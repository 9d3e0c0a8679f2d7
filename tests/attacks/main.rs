//! The attack tests: a hostile client against the real server on loopback,
//! each proving one bound, most while a good client must still be answered
//! within its latency bound. Every test takes `common::attack::alone()`, so
//! they run one at a time and each measures its own attack only
//! (`cargo test --test attacks`; `-- stalls` runs one module's).

mod admin_churn;
mod answers;
mod cli_files;
mod config_rewrite;
mod files;
mod handshakes;
mod large_reviews;
mod memory;
mod null_object;
mod policy_targets;
mod server;
mod slow_readers;
mod spoofed_containers;
mod stalls;
mod type_names;
mod undo_policy;
mod warnings;
