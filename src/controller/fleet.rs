//! The leader's state between events: the cache of sandbox pods, a timer
//! per pending expiry, what has been done for each pod, and the writes
//! decided but not yet started. It does no I/O: [`super::runtime`] feeds it
//! the watch's events, the timers that fire and the writes that end, and
//! starts the writes it decides.
//!
//! Every decision is `crate::lifecycle::decide` on the cached facts at
//! that moment; this file only carries its [`Action`] out. A timer only names a pod; when it fires the pod is read from the
//! cache again, so a renewal, a deletion or a recreated pod in between is
//! seen, and the apiserver checks the UID of every write besides.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use kube::runtime::watcher::Event;

use super::actions::PodRef;
use super::cache::{Cache, Cached, PodKey, key_of};
use super::timers::Timers;
use crate::config::Config;
use crate::lifecycle::{self, Action, DriftState, History, PodFacts, SandboxPod, Uid, Version};
pub use crate::lifecycle::{Mark, Write};

/// A failed write is retried after this, doubling up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// The longest the loop sleeps before it reads the wall clock again, so a
/// clock step forward (a resumed VM, NTP) delays no removal by more.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// What the decisions are made with, fixed for the controller's life.
pub struct Rules {
    pub config: Config,
    /// The controller's own namespace, ignored like the excluded ones.
    pub own_namespace: Option<String>,
    /// The type of the controller's pod condition.
    pub condition_type: String,
}

impl Rules {
    #[must_use]
    pub fn new(config: Config, own_namespace: Option<String>) -> Self {
        Rules {
            condition_type: lifecycle::condition_type(&config),
            config,
            own_namespace,
        }
    }
}

/// The loop's bookkeeping for one cached pod.
#[derive(Default)]
pub struct Work {
    /// When its timer is armed for (Unix milliseconds).
    timer: Option<i64>,
    /// Only for pods a write was made or decided for.
    handled: Option<Box<Handled>>,
    /// Its drift Event: 0 (none yet), [`DRIFT_QUEUED`], [`DRIFT_WRITING`]
    /// or [`DRIFT_REPORTED`].
    drift: u8,
}

/// The pod waits in the drift queue (once: a key queued for a pod since
/// replaced by another of its name finds this unset and is dropped).
const DRIFT_QUEUED: u8 = 1;
/// Its drift Event is being written.
const DRIFT_WRITING: u8 = 2;
/// Its drift Event is recorded: once per pod (contract: drift.events).
const DRIFT_REPORTED: u8 = 3;

/// Drift Events written at once. They are reports, not removals: after a
/// configuration change every sandbox may be stale at once, and these few
/// at a time leave the apiserver, and the writes' permits, to expiry.
const DRIFT_EVENTS_AT_ONCE: usize = 4;

/// What has been done for a pod already, and its retry delay.
#[derive(Default)]
struct Handled {
    history: History,
    retry: Option<Duration>,
}

/// A write to start, for the pod it names.
pub struct Start {
    pub key: PodKey,
    pub pod: PodRef,
    pub write: Write,
}

/// What a finished write reports back.
pub struct Done {
    pub key: PodKey,
    pub uid: Uid,
    pub mark: Mark,
    /// `false`: the write failed and is retried.
    pub ok: bool,
    /// The pod's `resourceVersion` the write was decided on.
    pub version: Option<Version>,
}

pub struct Fleet {
    rules: Arc<Rules>,
    cache: Cache<Work>,
    timers: Timers,
    /// The pods (by UID) a write is running for; they are decided again
    /// when it ends.
    in_flight: HashSet<Uid>,
    started: Vec<Start>,
    /// Audited sandboxes by drift state (`DriftState::ALL`'s order).
    drift: [usize; DriftState::ALL.len()],
    /// Pods whose drift Event waits for one of the few writes it may use.
    drift_waiting: VecDeque<PodKey>,
    drift_writing: usize,
}

impl Fleet {
    #[must_use]
    pub fn new(rules: Arc<Rules>) -> Self {
        Fleet {
            rules,
            cache: Cache::default(),
            timers: Timers::default(),
            in_flight: HashSet::new(),
            started: Vec::new(),
            drift: [0; DriftState::ALL.len()],
            drift_waiting: VecDeque::new(),
            drift_writing: 0,
        }
    }

    /// Audited sandboxes per drift state, in `DriftState::ALL`'s order.
    #[must_use]
    pub fn drift_counts(&self) -> [usize; DriftState::ALL.len()] {
        self.drift
    }

    /// Whether the drift audit counts and warns of the pod.
    fn audited(&self, facts: &PodFacts) -> bool {
        let rules = &self.rules;
        lifecycle::is_audited(facts, &rules.config, rules.own_namespace.as_deref())
    }

    /// Where `facts`' sandbox is counted: its drift state, if audited.
    fn drift_slot(&self, facts: &PodFacts) -> Option<usize> {
        self.audited(facts).then(|| facts.drift.state.index())
    }

    /// Counts `facts`' sandbox out of its drift state.
    fn untally(&mut self, facts: &PodFacts) {
        if let Some(slot) = self.drift_slot(facts) {
            self.drift[slot] = self.drift[slot].saturating_sub(1);
        }
    }

    /// Queues the pod's drift Event, unless it has one or needs none.
    fn queue_drift(&mut self, key: &PodKey) {
        let Some(cached) = self.cache.get(key) else {
            return;
        };
        let warns = lifecycle::drift::warns(
            cached.facts.drift,
            cached.facts.deleting,
            self.audited(&cached.facts),
        );
        if !warns || cached.work.drift != 0 {
            return;
        }
        if let Some(cached) = self.cache.get_mut(key) {
            cached.work.drift |= DRIFT_QUEUED;
            self.drift_waiting.push_back(key.clone());
        }
    }

    /// Starts the waiting drift Events the few writes allow.
    fn start_drift(&mut self) {
        while self.drift_writing < DRIFT_EVENTS_AT_ONCE {
            let Some(key) = self.drift_waiting.pop_front() else {
                return;
            };
            let Some(cached) = self.cache.get(&key) else {
                continue;
            };
            if cached.work.drift != DRIFT_QUEUED {
                continue;
            }
            let drift = cached.facts.drift;
            let warns = lifecycle::drift::warns(
                cached.facts.drift,
                cached.facts.deleting,
                self.audited(&cached.facts),
            );
            if let Some(cached) = self.cache.get_mut(&key) {
                cached.work.drift = if warns { DRIFT_WRITING } else { 0 };
            }
            if warns {
                self.drift_writing += 1;
                self.push_start(&key, Write::drift(drift, &self.rules.config));
            }
        }
    }

    /// Sandbox pods in the cache.
    #[must_use]
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Timers armed.
    #[must_use]
    pub fn timers(&self) -> usize {
        self.timers.len()
    }

    /// The writes decided since the last call, for the caller to start;
    /// each one's [`Done`] goes to [`Fleet::finished`].
    pub fn take_started(&mut self) -> Vec<Start> {
        self.start_drift();
        std::mem::take(&mut self.started)
    }

    /// The next pod whose timer fires, taken out of the timers (the
    /// caller passes it to [`Fleet::on_timer`]); pending while none is
    /// armed. Cancel-safe: a pod is taken only when the future returns it.
    pub async fn next_due(&mut self) -> PodKey {
        loop {
            let now = Utc::now().timestamp_millis();
            if let Some(key) = self.timers.pop_due(now) {
                return key;
            }
            let Some(at) = self.timers.next_at() else {
                return std::future::pending().await;
            };
            let wait = Duration::from_millis(u64::try_from(at - now).unwrap_or(0));
            tokio::time::sleep(wait.min(MAX_SLEEP)).await;
        }
    }

    /// A timer fired.
    pub fn on_timer(&mut self, key: &PodKey) {
        if let Some(cached) = self.cache.get_mut(key) {
            cached.work.timer = None;
            self.evaluate(key);
        }
    }

    pub fn on_event(&mut self, event: Event<SandboxPod>) {
        match event {
            Event::Apply(pod) | Event::InitApply(pod) => {
                let rules = &self.rules;
                let Some(applied) = self.cache.apply(&pod, &rules.config, &rules.condition_type)
                else {
                    return;
                };
                if let Some(previous) = &applied.previous {
                    self.untally(previous);
                }
                let slot = self
                    .cache
                    .get(&applied.key)
                    .and_then(|c| self.drift_slot(&c.facts));
                if let Some(slot) = slot {
                    self.drift[slot] += 1;
                }
                if let Some(old) = applied.replaced {
                    self.drop_work(&applied.key, &old);
                }
                self.queue_drift(&applied.key);
                self.evaluate(&applied.key);
            }
            Event::Delete(pod) => {
                if let Some(key) = key_of(&pod)
                    && let Some(cached) = self.cache.remove(&key)
                {
                    self.gone(&key, &cached);
                }
            }
            Event::Init => self.cache.begin_relist(),
            // Pods deleted while the watch was down have no Delete event.
            Event::InitDone => {
                for (key, cached) in self.cache.end_relist() {
                    self.gone(&key, &cached);
                }
                self.cache.sweep();
                // A wave of drift Events (a configuration change) leaves
                // its queue's room behind.
                if self.drift_waiting.is_empty() {
                    self.drift_waiting.shrink_to_fit();
                }
            }
        }
    }

    /// `key` left the cache: its timer goes, and the pods that waited for
    /// it to expire (the same owner) may go now.
    fn gone(&mut self, key: &PodKey, cached: &Cached<Work>) {
        self.untally(&cached.facts);
        let owner = cached.facts.owner.clone();
        self.drop_work(key, &cached.work);
        if let Some(owner) = owner {
            let waiting: Vec<PodKey> = self.cache.siblings(&owner.uid, key).cloned().collect();
            for sibling in &waiting {
                self.evaluate(sibling);
            }
        }
    }

    fn drop_work(&mut self, key: &PodKey, work: &Work) {
        if let Some(at) = work.timer {
            self.timers.disarm(key, at);
        }
    }

    fn cancel(&mut self, key: &PodKey) {
        if let Some(at) = self.cache.get_mut(key).and_then(|c| c.work.timer.take()) {
            self.timers.disarm(key, at);
        }
    }

    /// Wakes for `key` at `at` (wall clock); an earlier timer for the same
    /// pod is replaced.
    fn schedule(&mut self, key: &PodKey, at: DateTime<Utc>) {
        let Some(cached) = self.cache.get_mut(key) else {
            return;
        };
        let at = at.timestamp_millis();
        if cached.work.timer == Some(at) {
            return;
        }
        if let Some(old) = cached.work.timer.replace(at) {
            self.timers.disarm(key, old);
        }
        self.timers.arm(key.clone(), at);
    }

    fn start(&mut self, key: &PodKey, write: Write) {
        let Some(cached) = self.cache.get(key) else {
            return;
        };
        self.in_flight.insert(cached.uid.clone());
        self.push_start(key, write);
    }

    /// The write for the cached pod `key`, to be started.
    fn push_start(&mut self, key: &PodKey, write: Write) {
        let Some(cached) = self.cache.get(key) else {
            return;
        };
        let pod = PodRef {
            namespace: Arc::clone(&key.namespace),
            name: Arc::clone(&key.name),
            uid: cached.uid.clone(),
            resource_version: cached.resource_version.clone(),
        };
        self.started.push(Start {
            key: key.clone(),
            pod,
            write,
        });
    }

    fn evaluate(&mut self, key: &PodKey) {
        let Some(cached) = self.cache.get(key) else {
            return;
        };
        // The write's end decides again.
        if self.in_flight.contains(&cached.uid) {
            return;
        }
        let rules = &self.rules;
        let history = cached.work.handled.as_deref().map(|h| &h.history);
        let siblings = cached.facts.owner.iter().flat_map(|owner| {
            self.cache
                .siblings(&owner.uid, key)
                .filter_map(|k| self.cache.get(k))
                .map(|c| &c.facts)
        });
        let decision = lifecycle::decide(
            &cached.facts,
            &rules.config,
            rules.own_namespace.as_deref(),
            history.unwrap_or(&History::default()),
            siblings,
            Utc::now(),
        );
        if decision.reported
            && let Some(cached) = self.cache.get_mut(key)
        {
            cached.work.handled.get_or_insert_default().history.reported = true;
        }
        match decision.action {
            Action::Start(write) => {
                self.cancel(key);
                self.start(key, write);
            }
            Action::WakeAt(at) => self.schedule(key, at),
            Action::Idle => self.cancel(key),
        }
    }

    /// A write ended.
    pub fn finished(&mut self, done: Done) {
        if done.mark == Mark::DriftReported {
            // Not one of `in_flight`: expiry was never held up for it.
            self.drift_writing = self.drift_writing.saturating_sub(1);
            if let Some(cached) = self.cache.get_mut(&done.key)
                && cached.uid == done.uid
            {
                // A failed one is queued again at the pod's next change.
                cached.work.drift = if done.ok { DRIFT_REPORTED } else { 0 };
            }
            return;
        }
        self.in_flight.remove(&done.uid);
        let Some(cached) = self.cache.get_mut(&done.key) else {
            return;
        };
        if cached.uid != done.uid {
            // Another pod of the same name now: decided on its own.
            self.evaluate(&done.key);
            return;
        }
        let newer = cached.resource_version != done.version;
        let handled = cached.work.handled.get_or_insert_default();
        if done.ok {
            handled.retry = None;
            handled.history.record(done.mark);
            self.evaluate(&done.key);
        } else if newer {
            // The cache has a newer version (a renewal that failed the
            // delete's precondition, say): decide again on it at once.
            self.evaluate(&done.key);
        } else {
            let delay = handled
                .retry
                .map_or(FIRST_RETRY, |d| (d * 2).min(MAX_RETRY));
            handled.retry = Some(delay);
            let at = Utc::now() + chrono::TimeDelta::from_std(delay).unwrap_or_default();
            self.cancel(&done.key);
            self.schedule(&done.key, at);
        }
    }
}

#[cfg(test)]
mod tests;
