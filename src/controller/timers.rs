//! One wake-up per pod at a wall-clock time (milliseconds since the Unix
//! epoch), in time order. The set holds just the time and the key (40
//! bytes a pod, in nodes of 11); the one task timer is armed for the
//! earliest, and a wake-up is only taken once the wall clock has reached
//! it, so a pod is never woken before its time by the clock that wrote
//! `expires-at`.

use std::collections::BTreeSet;

use super::cache::PodKey;

#[derive(Default)]
pub struct Timers {
    due: BTreeSet<(i64, PodKey)>,
}

impl Timers {
    /// Wakes `key` at `at`; the caller disarms any earlier wake-up of it.
    pub fn arm(&mut self, key: PodKey, at: i64) {
        self.due.insert((at, key));
    }

    /// Forgets the wake-up of `key` at `at`.
    pub fn disarm(&mut self, key: &PodKey, at: i64) {
        self.due.remove(&(at, key.clone()));
    }

    /// The first pod due at or before `now`, taken out.
    pub fn pop_due(&mut self, now: i64) -> Option<PodKey> {
        if self.due.first().is_some_and(|(at, _)| *at <= now) {
            return self.due.pop_first().map(|(_, key)| key);
        }
        None
    }

    /// The earliest wake-up armed.
    #[must_use]
    pub fn next_at(&self) -> Option<i64> {
        self.due.first().map(|(at, _)| *at)
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.due.len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn key(name: &str) -> PodKey {
        PodKey {
            namespace: Arc::from("ns"),
            name: Arc::from(name),
        }
    }

    #[test]
    fn due_in_time_order_never_before_time() {
        let mut timers = Timers::default();
        timers.arm(key("late"), 3_000);
        timers.arm(key("early"), 1_000);
        timers.arm(key("moved"), 1_500);
        timers.disarm(&key("moved"), 1_500);
        timers.arm(key("moved"), 2_000);
        // The same time for two pods keeps both.
        timers.arm(key("twin"), 2_000);
        assert_eq!((timers.len(), timers.next_at()), (4, Some(1_000)));
        assert_eq!(timers.pop_due(999), None);
        assert_eq!(timers.pop_due(1_000), Some(key("early")));
        assert_eq!(timers.pop_due(1_999), None);
        let mut at_two = [timers.pop_due(2_500), timers.pop_due(2_500)];
        at_two.sort_by(|a, b| {
            a.as_ref()
                .map(|k| &k.name)
                .cmp(&b.as_ref().map(|k| &k.name))
        });
        assert_eq!(at_two, [Some(key("moved")), Some(key("twin"))]);
        assert_eq!(timers.pop_due(2_999), None);
        // A wake-up far ahead is just a number.
        timers.arm(key("2100"), 4_102_444_800_000);
        assert_eq!(timers.pop_due(i64::MAX), Some(key("late")));
        assert_eq!(timers.pop_due(i64::MAX), Some(key("2100")));
        assert_eq!(timers.len(), 0);
    }
}
