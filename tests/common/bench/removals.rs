//! The cluster benchmarks' own watch of the pods they expect removed: when
//! each pod's removal was first seen (its DELETED event, or for a pod bound
//! to a node the update that sets its deletionTimestamp: the node's kubelet,
//! here kwok, finishes a graceful delete later, on its own schedule), when
//! its deletion was requested, and
//! how often the watch failed or had to list again (a relist misses the
//! DELETED events of the pods removed meanwhile, so it is reported).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;

use crate::deletions::delete_requested;

/// A removal as the watch saw it.
#[derive(Clone, Copy)]
pub struct Removal {
    /// The apiserver's clock: deletionTimestamp less the grace period
    /// (whole seconds), when the object says.
    pub requested: Option<DateTime<Utc>>,
    /// This program's clock, when the watch first saw the removal.
    pub seen: DateTime<Utc>,
}

/// What the watch has seen so far.
#[derive(Clone, Default)]
pub struct Seen {
    pub removals: HashMap<String, Removal>,
    /// Errors the watch stream returned (each is followed by a retry).
    pub errors: u64,
    /// Initial lists after the first one.
    pub relists: u64,
    pub last_error: Option<String>,
}

impl Seen {
    /// Records a removal the first time it is seen.
    fn removed(&mut self, pod: &Pod) {
        let meta = &pod.metadata;
        if let Some(name) = meta.name.clone() {
            self.removals.entry(name).or_insert(Removal {
                requested: delete_requested(meta),
                seen: Utc::now(),
            });
        }
    }

    /// One line for the report.
    pub fn health(&self) -> String {
        format!(
            "our watch: {} errors, {} relists{}",
            self.errors,
            self.relists,
            self.last_error
                .as_ref()
                .map_or(String::new(), |e| format!(" (last error: {e})"))
        )
    }
}

pub type Watched = Arc<Mutex<Seen>>;

/// Watches `pods` (filtered by `config`) until the task is aborted.
pub fn watch(pods: Api<Pod>, config: watcher::Config) -> (Watched, tokio::task::JoinHandle<()>) {
    let seen = Watched::default();
    let sink = Arc::clone(&seen);
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher::watcher(pods, config));
        let mut lists = 0u64;
        while let Some(event) = events.next().await {
            let Ok(mut seen) = sink.lock() else { return };
            match event {
                Err(e) => {
                    seen.errors += 1;
                    seen.last_error = Some(e.to_string());
                }
                Ok(watcher::Event::Init) => {
                    lists += 1;
                    seen.relists = lists.saturating_sub(1);
                }
                Ok(watcher::Event::Delete(pod)) => seen.removed(&pod),
                Ok(watcher::Event::Apply(pod)) if pod.metadata.deletion_timestamp.is_some() => {
                    seen.removed(&pod);
                }
                Ok(_) => {}
            }
        }
    });
    (seen, task)
}
