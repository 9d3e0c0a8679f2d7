//! ClientHellos seen before: a replay costs nothing to compute.
//!
//! A TLS client puts 32 fresh random bytes into every ClientHello, so no
//! client sends the same hello twice; a hello recorded once and replayed
//! on many connections repeats them. The start of each hello (its record
//! and handshake headers, its version and its random) is remembered as a
//! keyed hash, for the last [`REMEMBERED`] distinct hellos, and a hello
//! seen before is refused before any key exchange is computed for it,
//! whatever address it comes from: a replay flood from the apiserver's own
//! address (a hostNetwork pod, a shared NAT) costs the server a read and a
//! lookup. A flood that makes each hello unique is not stopped here
//! ([`super::credits`] keeps it behind the clients that finish their
//! handshakes).

use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasher, RandomState};

/// Distinct hellos remembered: some seconds of a flood at full speed, and
/// about 400 KiB.
pub const REMEMBERED: usize = 16_384;
/// Bytes of a hello that identify it: the record header (5), the handshake
/// header (4), the version (2) and the random (32).
pub const HELLO_HEAD: usize = 43;

pub(super) struct Seen {
    keys: HashSet<u64>,
    order: VecDeque<u64>,
    /// Keys that no client can aim at: a per-process random key.
    hasher: RandomState,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            keys: HashSet::with_capacity(REMEMBERED),
            order: VecDeque::with_capacity(REMEMBERED),
            hasher: RandomState::new(),
        }
    }
}

impl Seen {
    /// Remembers the hello that starts with `head` (its first
    /// [`HELLO_HEAD`] bytes, or fewer if it was shorter); false if it was
    /// seen before.
    pub fn first_time(&mut self, head: &[u8]) -> bool {
        let key = self.hasher.hash_one(head);
        if !self.keys.insert(key) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > REMEMBERED
            && let Some(oldest) = self.order.pop_front()
        {
            self.keys.remove(&oldest);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_is_refused_the_second_time_while_it_is_remembered() {
        let mut seen = Seen::default();
        let hello = |n: usize| {
            let mut head = [0u8; HELLO_HEAD];
            head[11..19].copy_from_slice(&n.to_le_bytes());
            head
        };
        assert!(seen.first_time(&hello(0)));
        assert!(!seen.first_time(&hello(0)), "replayed");
        for n in 1..=REMEMBERED {
            assert!(seen.first_time(&hello(n)));
        }
        assert!(
            seen.first_time(&hello(0)),
            "forgotten after REMEMBERED others"
        );
        assert_eq!(seen.keys.len(), REMEMBERED);
    }
}
