//! The leader's work loop: one watch on sandbox pods (kube-runtime's
//! watcher) feeding the [`Fleet`], its timers, and the writes it decides,
//! each in its own task.

use std::sync::Arc;

use futures_util::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use tokio::sync::{Semaphore, mpsc};

use super::fleet::{Done, Fleet, Start};
use super::writes::{Shared, execute};
use crate::config::Config;
use crate::lifecycle::{DriftState, SandboxPod};

/// Writes in flight at once. Removals bunch up on whole seconds (expiry
/// times have no fraction), and the apiserver answers a delete in a few
/// milliseconds, so 32 keeps a burst of hundreds within a second without
/// queueing work the apiserver would throttle.
const MAX_CONCURRENT_WRITES: usize = 32;

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

/// The one watch: pods with the `P/id` label (with a revision, only those
/// labelled `P/rev` with it; the default release sees every sandbox, since
/// its drift audit reports escapes whatever revision they name), outside
/// the excluded namespaces and the controller's own, its cache filled by
/// the streaming list when the apiserver serves it.
pub fn watch_config(
    config: &Config,
    own_namespace: Option<&str>,
    streaming_list: bool,
) -> watcher::Config {
    let keys = config.keys();
    let labels = match &config.revision {
        Some(revision) => format!("{},{}={revision}", keys.id, keys.rev),
        None => keys.id.clone(),
    };
    let mut watch = watcher::Config::default().labels(&labels);
    let fields = field_selector(config, own_namespace);
    if !fields.is_empty() {
        watch = watch.fields(&fields);
    }
    if streaming_list {
        watch = watch.streaming_lists();
    }
    watch
}

/// Runs until `stop` resolves (leadership lost or shutdown). Watch errors
/// are retried with kube-runtime's default backoff and never end the loop.
pub async fn run(shared: Arc<Shared>, client: Client, stop: impl Future<Output = ()>) {
    let api: Api<SandboxPod> = Api::all(client);
    let rules = &shared.rules;
    let config = watch_config(
        &rules.config,
        rules.own_namespace.as_deref(),
        shared.streaming_list,
    );
    let events = watcher::watcher(api, config).default_backoff();
    let mut events = std::pin::pin!(events);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let permits = Arc::new(Semaphore::new(MAX_CONCURRENT_WRITES));
    let mut fleet = Fleet::new(Arc::clone(&shared.rules));
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            biased;
            () = &mut stop => break,
            Some(done) = done_rx.recv() => fleet.finished(done),
            key = fleet.next_due() => fleet.on_timer(&key),
            event = events.next() => match event {
                Some(Ok(event)) => fleet.on_event(event),
                Some(Err(e)) => tracing::warn!(error = %e, "pod watch failed; retrying"),
                None => break,
            },
        }
        for start in fleet.take_started() {
            spawn(&shared, &permits, &done_tx, start);
        }
        shared.metrics.set_cached(fleet.cached());
        shared.metrics.set_timers(fleet.timers());
        shared.metrics.set_drift(fleet.drift_counts());
    }
    shared.metrics.set_cached(0);
    shared.metrics.set_timers(0);
    shared.metrics.set_drift([0; DriftState::ALL.len()]);
}

/// Runs one write in its own task, at most [`MAX_CONCURRENT_WRITES`] at
/// once; its end is sent to `done`.
///
/// A wave of expiries the apiserver cannot take at once waits for permits.
/// A task's future is allocated whole when it is spawned, and a write's
/// (its API calls' state) is kilobytes, so the write is spawned only once
/// its permit is held: what waits is a task of a few hundred bytes, and
/// 10,000 writes queued behind a slow apiserver hold megabytes, not tens of
/// them.
fn spawn(
    shared: &Arc<Shared>,
    permits: &Arc<Semaphore>,
    done: &mpsc::UnboundedSender<Done>,
    start: Start,
) {
    tokio::spawn(queued(
        Arc::clone(shared),
        Arc::clone(permits),
        done.clone(),
        start,
    ));
}

/// Waits for a permit, then spawns the write holding it.
pub(super) async fn queued(
    shared: Arc<Shared>,
    permits: Arc<Semaphore>,
    done: mpsc::UnboundedSender<Done>,
    start: Start,
) {
    // The semaphore is never closed; a missing permit only means the write
    // runs unthrottled.
    let permit = permits.acquire_owned().await.ok();
    tokio::spawn(async move {
        let _permit = permit;
        let Start { key, pod, write } = start;
        let (mark, ok) = execute(&shared, &pod, write).await;
        let _ = done.send(Done {
            key,
            uid: pod.uid,
            mark,
            ok,
            version: pod.resource_version,
        });
    });
}

#[cfg(test)]
mod tests {
    use kube::runtime::watcher::InitialListStrategy;

    use super::*;
    use crate::controller::cache::PodKey;
    use crate::controller::writes::execute;
    use crate::controller::writes::tests::{POD, expire, pod, shared};

    /// One watch, on the sandbox label, that leaves out the excluded
    /// namespaces and the controller's own (nothing when there are none),
    /// and lists by streaming only when the apiserver was found to serve it
    /// (`initial_list`).
    /// contract: controller.watch
    #[test]
    fn the_watch_takes_sandboxes_outside_the_excluded_namespaces() {
        let config = Config::from_yaml("prefix: sandbox.example.com").unwrap();
        let watch = watch_config(&config, Some("sandbox-system"), true);
        assert_eq!(
            watch.label_selector.as_deref(),
            Some("sandbox.example.com/id")
        );
        assert_eq!(
            watch.field_selector.as_deref(),
            Some(
                "metadata.namespace!=kube-system,metadata.namespace!=kube-public,\
                 metadata.namespace!=kube-node-lease,metadata.namespace!=sandbox-system"
            )
        );
        assert_eq!(
            watch.initial_list_strategy,
            InitialListStrategy::StreamingList
        );

        let none = Config::from_yaml("excludedNamespaces: []").unwrap();
        let watch = watch_config(&none, None, false);
        assert_eq!(watch.label_selector.as_deref(), Some("opensandbox.io/id"));
        assert_eq!(watch.field_selector, None);
        assert_eq!(watch.initial_list_strategy, InitialListStrategy::ListWatch);
        // A release with a revision watches only its own (contract:
        // revision.controller).
        let canary = Config::from_yaml("revision: canary\nexcludedNamespaces: []").unwrap();
        let watch = watch_config(&canary, None, false);
        assert_eq!(
            watch.label_selector.as_deref(),
            Some("opensandbox.io/id,opensandbox.io/rev=canary")
        );
    }

    /// The pods the watch's selectors bring are the ones
    /// `lifecycle::is_cached` names, which `diagnose` reads as the siblings
    /// the controller holds an owner's removal for.
    /// contract: diagnose.siblings
    #[test]
    fn the_watch_brings_what_diagnose_counts_as_cached() {
        use crate::lifecycle::{PodFacts, SandboxPod, is_cached};
        for revision in ["", "revision: canary\n"] {
            let config =
                Config::from_yaml(&format!("{revision}excludedNamespaces: [kube-system]")).unwrap();
            let watch = watch_config(&config, Some("sandbox-system"), false);
            let labels = watch.label_selector.unwrap();
            let fields = watch.field_selector.unwrap();
            for ns in ["team", "kube-system", "sandbox-system"] {
                for pod_labels in [
                    serde_json::json!({}),
                    serde_json::json!({"opensandbox.io/id": "s"}),
                    serde_json::json!({"opensandbox.io/id": "s", "opensandbox.io/rev": "canary"}),
                    serde_json::json!({"opensandbox.io/id": "s", "opensandbox.io/rev": "other"}),
                ] {
                    let pod: SandboxPod = serde_json::from_value(serde_json::json!({
                        "metadata": {"name": "s", "namespace": ns, "labels": pod_labels}}))
                    .unwrap();
                    // Equality selectors and existence, as the apiserver reads them.
                    let has = |l: &str| match l.split_once('=') {
                        Some((k, v)) => pod_labels[k] == v,
                        None => pod_labels.get(l).is_some(),
                    };
                    let selected = labels.split(',').all(has)
                        && fields
                            .split(',')
                            .all(|f| f.strip_prefix("metadata.namespace!=") != Some(ns));
                    let facts = PodFacts::of(&pod, &config);
                    assert_eq!(
                        is_cached(&facts, &config, Some("sandbox-system")),
                        selected,
                        "{revision:?} {ns} {pod_labels}"
                    );
                }
            }
        }
    }

    /// A write waiting for its permit is a small task: the write's own
    /// state (its API calls', kilobytes) is allocated only once it holds
    /// one, so a wave of expiries queued behind a slow apiserver does not
    /// take the controller's memory.
    #[tokio::test]
    async fn a_queued_write_is_small_until_it_runs() {
        let shared = Arc::new(shared((200, POD), (200, POD)).await);
        let one = pod();
        let write = size_of_val(&execute(&shared, &one, expire()));
        let (done, _) = tokio::sync::mpsc::unbounded_channel();
        let start = Start {
            key: PodKey {
                namespace: "team".into(),
                name: "p".into(),
            },
            pod: pod(),
            write: expire(),
        };
        let permits = Arc::new(tokio::sync::Semaphore::new(1));
        let queued = size_of_val(&queued(Arc::clone(&shared), permits, done, start));
        assert!(
            queued <= 512 && queued * 4 <= write,
            "a queued write takes {queued} bytes, a running one {write}"
        );
    }
}
