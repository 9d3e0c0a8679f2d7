//! Bytes decoded into a well-formed sandbox Pod CREATE (see
//! `sandbox_webhook_fuzz::structured`), under the configuration they pick.

#![no_main]

use libfuzzer_sys::fuzz_target;
use sandbox_webhook_fuzz::{check, configs, structured};

fuzz_target!(|data: &[u8]| {
    let generated = structured::generate(data);
    let (name, config) = &configs().all[generated.config];
    if let Err(violation) = check::check_review(&generated.body, config) {
        panic!(
            "configuration {name}: {violation}\nreview: {}",
            String::from_utf8_lossy(&generated.body)
        );
    }
});
