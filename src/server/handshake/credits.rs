//! Turns ahead of the others, earned by finishing handshakes.
//!
//! Before its handshake, a client is only an address, and nothing in a
//! ClientHello tells the apiserver's from a copy: the server spends a key
//! exchange and a signature on either. What does tell them apart is what
//! comes after: the apiserver finishes its handshakes (with mTLS, only a
//! holder of a client certificate can), a flood of hellos does not (it
//! would have to do a key exchange of its own for each). So each address
//! earns a credit for every handshake of it that finished, up to
//! [`CREDIT_CAP`], and spends one for every handshake of it that is
//! computed ahead of the addresses without credit. The apiserver, whose
//! handshakes all finish, keeps its credit and waits only for the
//! handshake being computed, however many other addresses send hellos; a
//! flood earns no turn ahead it has not paid for with a whole handshake.
//!
//! Invariant: at most [`PROVEN_ADDRESSES`] addresses are remembered, each
//! with 1 to [`CREDIT_CAP`] credits.

use std::collections::HashMap;
use std::net::IpAddr;

/// The most turns ahead an address can hold: a burst of new connections
/// from the apiserver (its pool refilled after connections closed).
pub const CREDIT_CAP: u8 = 8;
/// The most addresses remembered; past it the one with the fewest credits
/// is forgotten for a new one.
pub const PROVEN_ADDRESSES: usize = 4096;

#[derive(Default)]
pub(super) struct Credits {
    by_peer: HashMap<IpAddr, u8>,
}

impl Credits {
    /// Spends one of `peer`'s credits; false if it had none.
    pub fn spend(&mut self, peer: IpAddr) -> bool {
        let Some(credits) = self.by_peer.get_mut(&peer) else {
            return false;
        };
        *credits -= 1;
        if *credits == 0 {
            self.by_peer.remove(&peer);
        }
        true
    }

    /// A handshake of `peer` finished: `n` more credits, up to the cap.
    pub fn earn(&mut self, peer: IpAddr, n: u8) {
        if let Some(credits) = self.by_peer.get_mut(&peer) {
            *credits = credits.saturating_add(n).min(CREDIT_CAP);
            return;
        }
        if self.by_peer.len() >= PROVEN_ADDRESSES {
            // A scan, only when a new address finishes a handshake with the
            // table full: each costs its sender a whole handshake.
            if let Some(poorest) = self
                .by_peer
                .iter()
                .min_by_key(|(_, credits)| **credits)
                .map(|(peer, _)| *peer)
            {
                self.by_peer.remove(&poorest);
            }
        }
        self.by_peer.insert(peer, n.min(CREDIT_CAP));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credits_are_earned_by_finished_handshakes_and_spent_by_turns_ahead() {
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let mut credits = Credits::default();
        assert!(!credits.spend(a));
        for _ in 0..20 {
            credits.earn(a, 1);
        }
        for _ in 0..CREDIT_CAP {
            assert!(credits.spend(a));
        }
        assert!(!credits.spend(a), "capped");
        // A full table forgets the poorest for a new address.
        credits.earn(a, 2);
        for i in 0..PROVEN_ADDRESSES - 1 {
            let [x, y] = u16::try_from(i).unwrap().to_be_bytes();
            credits.earn(IpAddr::from([10, 1, x, y]), 1);
        }
        credits.earn(b, 1);
        assert!(credits.by_peer.contains_key(&a) && credits.by_peer.contains_key(&b));
        assert_eq!(credits.by_peer.len(), PROVEN_ADDRESSES);
    }
}
