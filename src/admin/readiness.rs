//! Whether a process answers `/readyz` with 200, set by the process and
//! read by its admin port.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether `/readyz` answers 200. `serve`: false until the TLS listener
/// serves, and false again as soon as shutdown begins. The controller: true
/// once it has a client and takes part in the election.
#[derive(Clone, Default)]
pub(crate) struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}
