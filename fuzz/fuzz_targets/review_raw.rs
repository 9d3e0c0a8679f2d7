//! Any bytes as an `AdmissionReview` body, under every fuzz configuration.
//! Seeded with the fixtures (see `cargo run --example seeds`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use sandbox_webhook_fuzz::{check, configs};

fuzz_target!(|body: &[u8]| {
    for (name, config) in &configs().all {
        if let Err(violation) = check::check_review(body, config) {
            panic!("configuration {name}: {violation}");
        }
    }
});
