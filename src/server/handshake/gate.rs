//! The handshake slots, shared fairly between the clients that wait.
//!
//! A ClientHello costs its sender nothing and the server a key exchange
//! and a signature, so a flood of them can outrun the slots however many
//! there are, and the server must choose whose handshakes to compute:
//! - **Credit first.** An address whose handshakes finish earns credit
//!   ([`super::credits`]); a handshake that arrives while its address has
//!   credit spends one and is **credited**. Credited handshakes have a
//!   slot of their own, computed at the async workers' priority; the
//!   others share another, computed at a lower priority, so however many
//!   hellos other pods send, the apiserver's handshakes wait only for each
//!   other, and the flood gets the CPU that is left.
//! - **Turns by address.** Within each class, a freed slot goes to the next
//!   address in turn (round robin), to its handshake that waited longest.
//! - **Bounded waits.** From one address, past [`PEER_QUEUE`] waiting, or
//!   when one has waited [`HANDSHAKE_WAIT`] and another arrives, its
//!   oldest is shed. Of all the handshakes without credit, past [`WAITING`]
//!   in all, or when the oldest has waited [`HANDSHAKE_WAIT`] and any other
//!   arrives, the oldest is shed: a flood from a thousand addresses, each
//!   under its own bound, is still bounded.
//!
//! Shed handshakes are closed and counted as `shed`.
//!
//! Invariant: in each class, `busy` counts the slots held by [`Slot`]s of
//! that class, and a slot is only passed from a [`Slot`] being dropped to
//! a waiter of its class marked `GRANTED` under the lock, so `busy <=
//! HANDSHAKE_SLOTS` always. `waiting` counts the waiters in its lines.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::credits::Credits;
use super::replay::Seen;

/// Handshakes computed at once in each class.
pub const HANDSHAKE_SLOTS: usize = 1;
/// How long a handshake may wait for a slot before a newer one sheds it:
/// well within the second a new client is answered in.
pub const HANDSHAKE_WAIT: Duration = Duration::from_millis(250);
/// Handshakes one address may have waiting; past it its oldest is shed.
pub const PEER_QUEUE: usize = 64;
/// Handshakes without credit that may wait in all; past it the oldest of
/// them is shed. Some 60 ms of handshakes in a release build.
pub const WAITING: usize = 256;

const WAITING_STATE: u8 = 0;
const GRANTED: u8 = 1;
const SHED: u8 = 2;
/// Its future was dropped while it waited (the connection's deadline).
const GONE: u8 = 3;

/// Which slot a handshake waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// It spent a credit of its address.
    Credited = 0,
    Uncredited = 1,
}

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

    fn waiting(&self) -> bool {
        self.state.load(Ordering::Acquire) == WAITING_STATE
    }
}

/// One class's slot and the handshakes waiting for it.
#[derive(Default)]
struct Lines {
    busy: usize,
    waiting: usize,
    /// Waiting handshakes by address, oldest first; never an empty line.
    by_peer: HashMap<IpAddr, VecDeque<Arc<Waiter>>>,
    /// The addresses with a line, in the order they are served.
    turn: VecDeque<IpAddr>,
    /// The waiters, oldest first (with some that no longer wait, skipped),
    /// for the bounds on all of them (uncredited only).
    oldest: VecDeque<(Arc<Waiter>, IpAddr)>,
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
            self.waiting -= 1;
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

    /// Takes `waiter` out of `peer`'s line; false if it was not there.
    fn remove(&mut self, peer: IpAddr, waiter: &Arc<Waiter>) -> bool {
        let Some(line) = self.by_peer.get_mut(&peer) else {
            return false;
        };
        let before = line.len();
        line.retain(|w| !Arc::ptr_eq(w, waiter));
        let removed = line.len() < before;
        if line.is_empty() {
            self.by_peer.remove(&peer);
            self.turn.retain(|p| *p != peer);
        }
        if removed {
            self.waiting -= 1;
        }
        removed
    }

    /// `peer`'s line, first bounded as a handshake arrives; with `in_all`,
    /// the bounds on all of this class's waiting handshakes too.
    fn admit(&mut self, peer: IpAddr, me: &Arc<Waiter>, wait: Duration, in_all: bool) {
        let now = me.since;
        let line = self.by_peer.entry(peer).or_default();
        if line.is_empty() {
            self.turn.push_back(peer);
        }
        let mut shed = Vec::new();
        while let Some(oldest) = line.front()
            && (line.len() >= PEER_QUEUE || now - oldest.since >= wait)
            && let Some(oldest) = line.pop_front()
        {
            shed.push(oldest);
        }
        line.push_back(me.clone());
        self.waiting = self.waiting + 1 - shed.len();
        for oldest in shed {
            oldest.settle(SHED);
        }
        if !in_all {
            return;
        }
        self.oldest.push_back((me.clone(), peer));
        while let Some((oldest, peer)) = self.oldest.front() {
            let (oldest, peer) = (oldest.clone(), *peer);
            if oldest.waiting() && self.waiting <= WAITING && now - oldest.since < wait {
                break;
            }
            self.oldest.pop_front();
            if oldest.waiting() && self.remove(peer, &oldest) {
                oldest.settle(SHED);
            }
        }
    }
}

#[derive(Default)]
struct State {
    classes: [Lines; 2],
    credits: Credits,
}

/// The handshake slots, the handshakes waiting for one, and what the gate
/// knows of their senders.
pub(crate) struct Gate {
    state: Mutex<State>,
    seen: Mutex<Seen>,
    /// [`HANDSHAKE_WAIT`], but for tests.
    wait: Duration,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            state: Mutex::default(),
            seen: Mutex::default(),
            wait: HANDSHAKE_WAIT,
        }
    }
}

/// A slot held; freed (or passed on) when dropped.
pub(crate) struct Slot<'a> {
    gate: &'a Gate,
    pub class: Class,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.gate.lock().classes[self.class as usize].free_one();
    }
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the hello that starts with `head` is new ([`super::replay`]).
    pub fn first_time(&self, head: &[u8]) -> bool {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .first_time(head)
    }

    /// A handshake from `peer` of `class` finished: it earns a credit, and
    /// a credited one has the credit it spent back.
    pub fn finished(&self, peer: IpAddr, class: Class) {
        let n = if class == Class::Credited { 2 } else { 1 };
        self.lock().credits.earn(peer, n);
    }

    /// A slot for a handshake from `peer`, of the class its credit says, or
    /// `None` when it was shed while it waited.
    pub async fn slot(&self, peer: IpAddr) -> Option<Slot<'_>> {
        let (me, class) = {
            let mut state = self.lock();
            let class = if state.credits.spend(peer) {
                Class::Credited
            } else {
                Class::Uncredited
            };
            let lines = &mut state.classes[class as usize];
            if lines.busy < HANDSHAKE_SLOTS && lines.waiting == 0 {
                lines.busy += 1;
                return Some(Slot { gate: self, class });
            }
            let me = Arc::new(Waiter {
                since: Instant::now(),
                state: AtomicU8::new(WAITING_STATE),
                notify: Notify::new(),
            });
            lines.admit(peer, &me, self.wait, class == Class::Uncredited);
            (me, class)
        };
        // Whatever ends the wait (granted, shed, or this future dropped at
        // the connection's deadline), the guard leaves the lines consistent.
        let mut waiting = Waiting {
            gate: self,
            peer,
            class,
            me,
            claimed: false,
        };
        loop {
            let notified = waiting.me.notify.notified();
            match waiting.me.state.load(Ordering::Acquire) {
                GRANTED => {
                    waiting.claimed = true;
                    return Some(Slot { gate: self, class });
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
    class: Class,
    me: Arc<Waiter>,
    /// The granted slot now belongs to a [`Slot`].
    claimed: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.claimed {
            return;
        }
        let mut state = self.gate.lock();
        let lines = &mut state.classes[self.class as usize];
        match self.me.state.load(Ordering::Acquire) {
            // Granted after its future was dropped: the slot goes on.
            GRANTED => lines.free_one(),
            WAITING_STATE => {
                lines.remove(self.peer, &self.me);
                self.me.state.store(GONE, Ordering::Release);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::task::JoinHandle;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    /// A gate whose handshakes have waited too long after 20 ms.
    fn gate_with_a_short_wait() -> Arc<Gate> {
        Arc::new(Gate {
            wait: Duration::from_millis(20),
            ..Gate::default()
        })
    }

    /// Asks for a slot for `peer` in a task of its own, which ends with
    /// whether the slot was granted.
    fn ask(gate: &Arc<Gate>, peer: IpAddr) -> JoinHandle<bool> {
        let gate = gate.clone();
        tokio::spawn(async move { gate.slot(peer).await.is_some() })
    }

    /// Queues one handshake from each of `lasts`, in that order: each, once
    /// served, records its address in `order` and holds its slot for one
    /// more turn of the scheduler.
    async fn queue_recording(
        gate: &Arc<Gate>,
        order: &Arc<Mutex<Vec<u8>>>,
        lasts: &[u8],
    ) -> Vec<JoinHandle<()>> {
        let mut tasks = Vec::new();
        for &last in lasts {
            let (gate, order) = (gate.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let slot = gate.slot(ip(last)).await;
                order.lock().unwrap().push(last);
                tokio::task::yield_now().await;
                drop(slot);
            }));
            tokio::task::yield_now().await;
        }
        tasks
    }

    #[tokio::test]
    async fn a_full_line_sheds_the_handshake_that_waited_longest() {
        let gate = Arc::new(Gate::default());
        let busy = gate.slot(ip(2)).await.expect("a free slot");
        let mut waiting = Vec::new();
        for _ in 0..=PEER_QUEUE {
            waiting.push(ask(&gate, ip(2)));
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
        let gate = gate_with_a_short_wait();
        let _busy = gate.slot(ip(2)).await.expect("a free slot");
        let first = ask(&gate, ip(2));
        tokio::task::yield_now().await;
        tokio::time::sleep(gate.wait).await;
        let second = ask(&gate, ip(2));
        assert!(!first.await.unwrap(), "shed once it waited too long");
        assert!(!second.is_finished(), "the newer one waits");
    }

    #[tokio::test]
    async fn addresses_take_turns_for_a_freed_slot() {
        let gate = Arc::new(Gate::default());
        let busy = gate.slot(ip(2)).await.expect("a free slot");
        let order = Arc::new(Mutex::new(Vec::new()));
        // A flood from one address, then one handshake from another.
        let tasks = queue_recording(&gate, &order, &[2, 2, 2, 2, 1]).await;
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
        let abandoned = ask(&gate, ip(3));
        tokio::task::yield_now().await;
        let next = ask(&gate, ip(4));
        tokio::task::yield_now().await;
        // The slot is granted to the first waiter, which is dropped before
        // it runs again (its connection's deadline).
        drop(busy);
        abandoned.abort();
        assert!(abandoned.await.is_err(), "dropped before it took the slot");
        assert!(next.await.unwrap(), "the slot reached the next waiter");
        assert_eq!(gate.lock().classes[1].busy, 0, "and came back free");
    }
    #[tokio::test]
    async fn a_credited_handshake_does_not_wait_for_the_others() {
        let gate = Arc::new(Gate::default());
        gate.finished(ip(1), Class::Uncredited);
        let busy = gate.slot(ip(9)).await.expect("a free slot");
        assert_eq!(busy.class, Class::Uncredited);
        let order = Arc::new(Mutex::new(Vec::new()));
        // A flood from many addresses without credit...
        let mut tasks = queue_recording(&gate, &order, &[2, 3, 4, 5, 6]).await;
        // ...and the credited address: its slot is free at once.
        let credited = gate.slot(ip(1)).await.expect("the credited slot");
        assert_eq!(credited.class, Class::Credited);
        // Its credit spent, its next handshake waits with the others.
        tasks.extend(queue_recording(&gate, &order, &[1]).await);
        drop(credited);
        drop(busy);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [2, 3, 4, 5, 6, 1]);
    }

    #[tokio::test]
    async fn the_waits_of_addresses_without_credit_are_bounded_in_all() {
        let gate = gate_with_a_short_wait();
        let _busy = gate.slot(ip(9)).await.expect("a free slot");
        // One from each of WAITING + 1 addresses: the oldest is shed.
        let mut waiting = Vec::new();
        for i in 0..=WAITING {
            let [x, y] = u16::try_from(i).unwrap().to_be_bytes();
            waiting.push(ask(&gate, IpAddr::from([10, 0, x, y])));
            tokio::task::yield_now().await;
        }
        let oldest = waiting.remove(0);
        assert!(!oldest.await.unwrap(), "shed past WAITING in all");
        assert_eq!(gate.lock().classes[1].waiting, WAITING);
        // Waited too long, and another arrives from another address.
        tokio::time::sleep(gate.wait).await;
        let newest = ask(&gate, ip(200));
        for w in waiting {
            assert!(!w.await.unwrap(), "shed once it waited too long");
        }
        assert!(!newest.is_finished(), "the newer one waits");
        // A credited address does not wait for them at all.
        gate.finished(ip(201), Class::Uncredited);
        assert!(
            ask(&gate, ip(201)).await.unwrap(),
            "the credited slot, at once"
        );
    }
}
