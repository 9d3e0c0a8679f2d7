//! The leader's work loop: one watch on sandbox pods (kube-runtime's
//! watcher and reflector), a timer per pending expiry, and the writes of
//! [`Actions`], each in its own task.
//!
//! Every decision is `crate::lifecycle::plan` on the cached pod at that
//! moment. A timer only names a pod; when it fires the pod is read from the
//! cache again, so a renewal, a deletion or a recreated pod in between is
//! seen, and the apiserver checks the UID of every write besides.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::time::DelayQueue;
use tokio_util::time::delay_queue;

use super::jobs::{Job, Mark, Shared, execute};
use super::owners::Owners;
use super::resource::strip;
use crate::config::Config;
use crate::lifecycle::{self, ExpiryAction, Removal, SandboxPod};

/// Writes in flight at once. Removals bunch up on whole seconds (expiry
/// times have no fraction), and the apiserver answers a delete in a few
/// milliseconds, so 32 keeps a burst of hundreds within a second without
/// queueing work the apiserver would throttle.
const MAX_CONCURRENT_WRITES: usize = 32;
/// A failed write is retried after this, doubling up to [`MAX_RETRY`].
const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(30);

type Key = ObjectRef<SandboxPod>;

/// What a finished job reports back to the loop.
struct Done {
    key: Key,
    uid: String,
    mark: Mark,
    /// `false`: the write failed and is retried.
    ok: bool,
    /// The pod's `resourceVersion` the job was decided on.
    version: Option<String>,
}

/// Per pod UID: what has been done already. Dropped with the pod.
#[derive(Default)]
struct Handled {
    expired: Option<String>,
    invalid: Option<String>,
    reported: bool,
    removed_unschedulable: bool,
    retry: Option<Duration>,
}

struct Loop {
    shared: Arc<Shared>,
    store: Store<SandboxPod>,
    queue: DelayQueue<Key>,
    timers: HashMap<Key, (delay_queue::Key, DateTime<Utc>)>,
    in_flight: HashSet<String>,
    handled: HashMap<String, Handled>,
    /// The cached pods by controller owner (see `owners`).
    owners: Owners,
    done_tx: mpsc::UnboundedSender<Done>,
    permits: Arc<Semaphore>,
}

/// Field selector that keeps the excluded namespaces out of the watch (the
/// code checks them again).
pub fn field_selector(config: &Config, own_namespace: Option<&str>) -> String {
    config
        .excluded_namespaces
        .iter()
        .map(String::as_str)
        .chain(own_namespace)
        .map(|ns| format!("metadata.namespace!={ns}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs until `stop` resolves (leadership lost or shutdown). Watch errors
/// are retried with kube-runtime's default backoff and never end the loop.
pub async fn run(shared: Arc<Shared>, client: Client, stop: impl Future<Output = ()>) {
    let api: Api<SandboxPod> = Api::all(client);
    let mut config = watcher::Config::default().labels(&shared.config.keys().id);
    let fields = field_selector(&shared.config, shared.own_namespace.as_deref());
    if !fields.is_empty() {
        config = config.fields(&fields);
    }
    if shared.streaming_list {
        config = config.streaming_lists();
    }
    let (store, writer) = reflector::store();
    let strip_shared = Arc::clone(&shared);
    let events = watcher::watcher(api, config)
        .default_backoff()
        .modify(move |pod| strip(pod, &strip_shared.config, &strip_shared.condition_type))
        .reflect(writer);
    let mut events = std::pin::pin!(events);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let mut state = Loop {
        shared,
        store,
        queue: DelayQueue::new(),
        timers: HashMap::new(),
        in_flight: HashSet::new(),
        handled: HashMap::new(),
        owners: Owners::default(),
        done_tx,
        permits: Arc::new(Semaphore::new(MAX_CONCURRENT_WRITES)),
    };
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            biased;
            () = &mut stop => break,
            Some(done) = done_rx.recv() => state.finished(done),
            Some(fired) = state.queue.next(), if !state.queue.is_empty() => {
                let key = fired.into_inner();
                state.timers.remove(&key);
                if let Some(pod) = state.store.get(&key) {
                    state.evaluate(&key, &pod);
                }
            }
            event = events.next() => match event {
                Some(Ok(event)) => state.on_event(event),
                Some(Err(e)) => tracing::warn!(error = %e, "pod watch failed; retrying"),
                None => break,
            },
        }
        state.shared.metrics.set_timers(state.timers.len());
    }
    state.shared.metrics.set_watched(0);
    state.shared.metrics.set_timers(0);
}

impl Loop {
    fn on_event(&mut self, event: Event<SandboxPod>) {
        match event {
            Event::Apply(pod) | Event::InitApply(pod) => {
                let key = ObjectRef::from_obj(&pod);
                // The reflector has stored it already; share that copy.
                let pod = self.store.get(&key).unwrap_or_else(|| Arc::new(pod));
                self.owners.insert(&key, &pod);
                self.evaluate(&key, &pod);
            }
            Event::Delete(pod) => {
                let key = ObjectRef::from_obj(&pod);
                self.cancel(&key);
                if let Some(uid) = pod.metadata.uid.as_deref() {
                    self.handled.remove(uid);
                }
                // A pod that waited for this one to expire may go now.
                if let Some(owner) = self.owners.remove(&key) {
                    let waiting: Vec<Key> = self.owners.siblings(&owner, &key).cloned().collect();
                    for sibling in waiting {
                        if let Some(pod) = self.store.get(&sibling) {
                            self.evaluate(&sibling, &pod);
                        }
                    }
                }
            }
            // Pods deleted while the watch was down have no Delete event:
            // once a relist is complete, drop what is kept for pods that are
            // no longer in the cache, so nothing accumulates across relists.
            Event::InitDone => self.forget_gone(),
            Event::Init => {}
        }
        self.shared.metrics.set_watched(self.store.len());
    }

    fn forget_gone(&mut self) {
        let store = &self.store;
        self.owners.retain(|key| store.get(key).is_some());
        let gone: Vec<Key> = self
            .timers
            .keys()
            .filter(|key| self.store.get(key).is_none())
            .cloned()
            .collect();
        for key in &gone {
            self.cancel(key);
        }
        let live: HashSet<String> = self
            .store
            .state()
            .iter()
            .filter_map(|pod| pod.metadata.uid.clone())
            .collect();
        self.handled
            .retain(|uid, _| live.contains(uid) || self.in_flight.contains(uid));
    }

    fn cancel(&mut self, key: &Key) {
        if let Some((timer, _)) = self.timers.remove(key) {
            self.queue.remove(&timer);
        }
    }

    /// Wakes for `key` at `at` (wall clock); an earlier timer for the same pod
    /// is replaced.
    fn schedule(&mut self, key: &Key, at: DateTime<Utc>) {
        if self.timers.get(key).is_some_and(|(_, t)| *t == at) {
            return;
        }
        self.cancel(key);
        let delay = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
        let timer = self.queue.insert(key.clone(), delay);
        self.timers.insert(key.clone(), (timer, at));
    }

    fn evaluate(&mut self, key: &Key, pod: &Arc<SandboxPod>) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            self.cancel(key);
            return;
        }
        // The job's end re-evaluates the pod from the cache.
        if self.in_flight.contains(&uid) {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let plan = lifecycle::plan(
            pod,
            &shared.config,
            shared.own_namespace.as_deref(),
            Utc::now(),
        );
        let handled = self.handled.entry(uid.clone()).or_default();
        let expired_done = handled.expired.clone();
        let invalid_done = handled.invalid.clone();

        if plan.platform.unschedulable {
            let reported = handled.reported
                || lifecycle::platform::already_reported(pod, &shared.condition_type);
            if !reported {
                let message = plan.platform.message.unwrap_or_default();
                self.spawn(key, pod, uid, Job::Report { message });
                return;
            }
            handled.reported = true;
            if shared.config.controller.platform.delete_unschedulable
                && !handled.removed_unschedulable
            {
                let removal = lifecycle::expiry::removal(pod, &shared.config);
                self.spawn(key, pod, uid, Job::RemoveUnschedulable { removal });
                return;
            }
        }

        let expiry = plan.expiry;
        match (expiry.action, expiry.removal, expiry.at) {
            (ExpiryAction::Invalid, _, _) => {
                self.cancel(key);
                let value = expiry.expires_at.unwrap_or_default();
                if invalid_done.as_ref() != Some(&value) {
                    self.spawn(key, pod, uid, Job::InvalidExpiry { value });
                }
            }
            (_, Some(removal), Some(at)) => {
                let value = expiry.expires_at.unwrap_or_default();
                // Deleting an owner deletes all its pods: not before the
                // last of them is due (never early, issue 21).
                let due = match &removal {
                    Removal::DeleteOwner(owner) => self.last_sibling_expiry(key, &owner.uid, at),
                    _ => at,
                };
                if !expiry.expired || due > Utc::now() {
                    self.schedule(key, due);
                } else if expired_done.as_ref() != Some(&value) {
                    self.cancel(key);
                    self.spawn(key, pod, uid, Job::Expire { removal, at: value });
                }
            }
            _ => self.cancel(key),
        }
    }

    /// The latest expiry among `key` (due at `at`) and the other cached
    /// pods of `owner` that will be removed at an expiry of their own; pods
    /// that never expire (manual cleanup, none, invalid) and pods being
    /// deleted do not hold the owner.
    fn last_sibling_expiry(&self, key: &Key, owner: &str, at: DateTime<Utc>) -> DateTime<Utc> {
        let now = Utc::now();
        self.owners
            .siblings(owner, key)
            .filter_map(|k| self.store.get(k))
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .filter_map(|p| {
                let plan = lifecycle::expiry::plan(&p, &self.shared.config, now);
                plan.removal.and(plan.at)
            })
            .fold(at, DateTime::max)
    }

    fn spawn(&mut self, key: &Key, pod: &Arc<SandboxPod>, uid: String, job: Job) {
        self.in_flight.insert(uid.clone());
        let shared = Arc::clone(&self.shared);
        let permits = Arc::clone(&self.permits);
        let done_tx = self.done_tx.clone();
        let pod = Arc::clone(pod);
        let key = key.clone();
        tokio::spawn(async move {
            // The semaphore is never closed; a missing permit only means
            // the write runs unthrottled.
            let _permit = permits.acquire_owned().await.ok();
            let (mark, ok) = execute(&shared, &pod, job).await;
            let version = pod.metadata.resource_version.clone();
            let _ = done_tx.send(Done {
                key,
                uid,
                mark,
                ok,
                version,
            });
        });
    }

    fn finished(&mut self, done: Done) {
        self.in_flight.remove(&done.uid);
        let handled = self.handled.entry(done.uid.clone()).or_default();
        if done.ok {
            handled.retry = None;
            match done.mark {
                Mark::Expired(v) => handled.expired = Some(v),
                Mark::Invalid(v) => handled.invalid = Some(v),
                Mark::Reported => handled.reported = true,
                Mark::RemovedUnschedulable => handled.removed_unschedulable = true,
            }
            if let Some(pod) = self.store.get(&done.key) {
                self.evaluate(&done.key, &pod);
            }
        } else if let Some(pod) = self
            .store
            .get(&done.key)
            .filter(|p| p.metadata.resource_version != done.version)
        {
            // The cache has a newer version (a renewal that failed the
            // delete's precondition, say): decide again on it at once.
            self.evaluate(&done.key, &pod);
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
