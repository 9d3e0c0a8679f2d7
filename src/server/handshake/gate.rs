//! The handshake slots, shared fairly between the addresses that wait.
//!
//! A replayed ClientHello costs its sender nothing and the server a key
//! exchange and a signature, so a flood from one pod can outrun the slot
//! however large it is. Waiting in one line, a new client's handshake
//! would then wait behind the flood and be shed with it. So handshakes wait
//! in a line per peer address, and a freed slot goes to the next address in
//! turn (round robin), to the handshake that has waited longest there. The
//! apiserver's handshakes then wait for one turn of the addresses that
//! flood, not for their backlog.
//!
//! Each address's line is bounded: a handshake that has waited
//! [`HANDSHAKE_WAIT`] is shed (closed, counted as `shed`) when another
//! arrives from its address, and past [`PEER_QUEUE`] waiting the oldest is
//! shed. The number of lines is bounded by the connection cap.
//!
//! Invariant: `busy` counts the slots held by [`Slot`]s, and a slot is only
//! passed from a [`Slot`] being dropped to a waiter marked `GRANTED` under
//! the lock, so `busy <= HANDSHAKE_SLOTS` always.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Handshakes computed at once.
pub const HANDSHAKE_SLOTS: usize = 1;
/// How long a handshake may wait for a slot before a newer one from its
/// address sheds it: well within the second a new client is answered in.
pub const HANDSHAKE_WAIT: Duration = Duration::from_millis(250);
/// Handshakes one address may have waiting; past it its oldest is shed.
pub const PEER_QUEUE: usize = 64;

const WAITING: u8 = 0;
const GRANTED: u8 = 1;
const SHED: u8 = 2;

/// One handshake waiting for a slot.
struct Waiter {
    since: Instant,
    state: AtomicU8,
    notify: Notify,
}

impl Waiter {
    /// Marks it (under the gate's lock) and wakes it.
    fn settle(&self, state: u8) {
        self.state.store(state, Ordering::Release);
        self.notify.notify_one();
    }
}

#[derive(Default)]
struct Lines {
    busy: usize,
    /// Waiting handshakes by address, oldest first; never an empty line.
    by_peer: HashMap<IpAddr, VecDeque<Arc<Waiter>>>,
    /// The addresses with a line, in the order they are served.
    turn: VecDeque<IpAddr>,
}

impl Lines {
    /// Gives a freed slot to the next address's oldest handshake; false if
    /// none waits (the slot is then free).
    fn pass_on(&mut self) -> bool {
        while let Some(peer) = self.turn.pop_front() {
            let Some(line) = self.by_peer.get_mut(&peer) else {
                continue;
            };
            let Some(next) = line.pop_front() else {
                self.by_peer.remove(&peer);
                continue;
            };
            if line.is_empty() {
                self.by_peer.remove(&peer);
            } else {
                self.turn.push_back(peer);
            }
            next.settle(GRANTED);
            return true;
        }
        false
    }

    /// A slot given up: passed on, or free.
    fn free_one(&mut self) {
        if !self.pass_on() {
            self.busy = self.busy.saturating_sub(1);
        }
    }

    fn remove(&mut self, peer: IpAddr, waiter: &Arc<Waiter>) {
        if let Some(line) = self.by_peer.get_mut(&peer) {
            line.retain(|w| !Arc::ptr_eq(w, waiter));
            if line.is_empty() {
                self.by_peer.remove(&peer);
                self.turn.retain(|p| *p != peer);
            }
        }
    }
}

/// The handshake slots and the handshakes waiting for one.
pub(crate) struct Gate {
    lines: Mutex<Lines>,
    /// [`HANDSHAKE_WAIT`], but for tests.
    wait: Duration,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            lines: Mutex::default(),
            wait: HANDSHAKE_WAIT,
        }
    }
}

/// A slot held; freed (or passed on) when dropped.
pub(crate) struct Slot<'a> {
    gate: &'a Gate,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.gate.release();
    }
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, Lines> {
        self.lines.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn release(&self) {
        self.lock().free_one();
    }

    /// A slot for a handshake from `peer`, or `None` when it was shed while
    /// it waited.
    pub async fn slot(&self, peer: IpAddr) -> Option<Slot<'_>> {
        let me = {
            let mut lines = self.lock();
            if lines.busy < HANDSHAKE_SLOTS && lines.turn.is_empty() {
                lines.busy += 1;
                return Some(Slot { gate: self });
            }
            let now = Instant::now();
            let me = Arc::new(Waiter {
                since: now,
                state: AtomicU8::new(WAITING),
                notify: Notify::new(),
            });
            let lines = &mut *lines;
            let line = lines.by_peer.entry(peer).or_default();
            if line.is_empty() {
                lines.turn.push_back(peer);
            }
            while let Some(oldest) = line.front()
                && (line.len() >= PEER_QUEUE || now - oldest.since >= self.wait)
                && let Some(oldest) = line.pop_front()
            {
                oldest.settle(SHED);
            }
            line.push_back(me.clone());
            me
        };
        // Whatever ends the wait (granted, shed, or this future dropped at
        // the connection's deadline), the guard leaves the lines consistent.
        let mut waiting = Waiting {
            gate: self,
            peer,
            me,
            claimed: false,
        };
        loop {
            let notified = waiting.me.notify.notified();
            match waiting.me.state.load(Ordering::Acquire) {
                GRANTED => {
                    waiting.claimed = true;
                    return Some(Slot { gate: self });
                }
                SHED => return None,
                _ => notified.await,
            }
        }
    }
}

/// A handshake's place in its line while it waits.
struct Waiting<'a> {
    gate: &'a Gate,
    peer: IpAddr,
    me: Arc<Waiter>,
    /// The granted slot now belongs to a [`Slot`].
    claimed: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.claimed {
            return;
        }
        let mut lines = self.gate.lock();
        match self.me.state.load(Ordering::Acquire) {
            // Granted after its future was dropped: the slot goes on.
            GRANTED => lines.free_one(),
            WAITING => lines.remove(self.peer, &self.me),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[tokio::test]
    async fn a_full_line_sheds_the_handshake_that_waited_longest() {
        let gate = Arc::new(Gate::default());
        let busy = gate.slot(ip(2)).await.expect("a free slot");
        let mut waiting = Vec::new();
        for _ in 0..=PEER_QUEUE {
            let gate = gate.clone();
            waiting.push(tokio::spawn(
                async move { gate.slot(ip(2)).await.is_some() },
            ));
            tokio::task::yield_now().await;
        }
        let oldest = waiting.remove(0);
        assert!(!oldest.await.unwrap(), "shed");
        drop(busy);
        for w in waiting {
            assert!(w.await.unwrap(), "each gets the slot in turn");
        }
    }

    #[tokio::test]
    async fn a_handshake_that_waited_too_long_is_shed_by_the_next() {
        let gate = Arc::new(Gate {
            wait: Duration::from_millis(20),
            ..Gate::default()
        });
        let _busy = gate.slot(ip(2)).await.expect("a free slot");
        let first = tokio::spawn({
            let gate = gate.clone();
            async move { gate.slot(ip(2)).await.is_some() }
        });
        tokio::task::yield_now().await;
        tokio::time::sleep(gate.wait).await;
        let second = tokio::spawn({
            let gate = gate.clone();
            async move { gate.slot(ip(2)).await.is_some() }
        });
        assert!(!first.await.unwrap(), "shed once it waited too long");
        assert!(!second.is_finished(), "the newer one waits");
    }

    #[tokio::test]
    async fn addresses_take_turns_for_a_freed_slot() {
        let gate = Arc::new(Gate::default());
        let busy = gate.slot(ip(2)).await.expect("a free slot");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // A flood from one address, then one handshake from another.
        for last in [2, 2, 2, 2, 1] {
            let (gate, order) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let slot = gate.slot(ip(last)).await;
                order.lock().unwrap().push(last);
                tokio::task::yield_now().await;
                drop(slot);
            }));
            tokio::task::yield_now().await;
        }
        drop(busy);
        for t in tasks {
            t.await.unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(order[..2], [2, 1], "the other address is served second");
    }

    #[tokio::test]
    async fn a_waiter_dropped_when_granted_passes_the_slot_on() {
        let gate = Arc::new(Gate::default());
        let busy = gate.slot(ip(2)).await.expect("a free slot");
        let abandoned = tokio::spawn({
            let gate = gate.clone();
            async move { gate.slot(ip(3)).await.is_some() }
        });
        tokio::task::yield_now().await;
        let next = tokio::spawn({
            let gate = gate.clone();
            async move { gate.slot(ip(4)).await.is_some() }
        });
        tokio::task::yield_now().await;
        // The slot is granted to the first waiter, which is dropped before
        // it runs again (its connection's deadline).
        drop(busy);
        abandoned.abort();
        assert!(abandoned.await.is_err(), "dropped before it took the slot");
        assert!(next.await.unwrap(), "the slot reached the next waiter");
        assert_eq!(gate.lock().busy, 0, "and came back free");
    }
}
