//! A watch of one namespace's pod deletions, for the suites that time
//! expiries: when each pod was first seen deleted, by this program's clock
//! (the same host's as the apiserver's and the controller's), and when the
//! apiserver took its delete request, by its own clock.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::watcher;

use crate::cluster::wait_noting;
use crate::processes::Result;

/// One pod's deletion as the watch saw it.
#[derive(Clone, Copy, Debug)]
pub struct Deletion {
    /// When the apiserver took the delete request, when the object says:
    /// see [`delete_requested`].
    pub requested: Option<DateTime<Utc>>,
    /// When the watch first saw the pod gone.
    pub gone: DateTime<Utc>,
}

/// When the apiserver took the delete request of an object: its
/// deletionTimestamp less the grace period, in whole seconds as the
/// apiserver keeps them; `None` before that.
pub fn delete_requested(meta: &ObjectMeta) -> Option<DateTime<Utc>> {
    let grace = meta.deletion_grace_period_seconds.unwrap_or_default();
    let at = meta.deletion_timestamp.as_ref()?;
    DateTime::from_timestamp(at.0.as_second() - grace, 0)
}

type Seen = Arc<Mutex<HashMap<String, Deletion>>>;

/// Records every pod deletion in a namespace (by name, the first one seen)
/// until dropped.
pub struct PodDeletions {
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl PodDeletions {
    /// Starts watching `pods`.
    pub fn start(pods: Api<Pod>) -> Self {
        let seen = Seen::default();
        let sink = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut events = std::pin::pin!(watcher::watcher(pods, watcher::Config::default()));
            while let Some(event) = events.next().await {
                let Ok(watcher::Event::Delete(pod)) = event else {
                    continue;
                };
                let deletion = Deletion {
                    requested: delete_requested(&pod.metadata),
                    gone: Utc::now(),
                };
                let name = pod.metadata.name.unwrap_or_default();
                let mut seen = sink.lock().unwrap_or_else(PoisonError::into_inner);
                seen.entry(name).or_insert(deletion);
            }
        });
        PodDeletions { seen, task }
    }

    /// Polls what was seen until `done` finds in it what `what` names, for
    /// at most `timeout`; a timeout's error lists the pods seen deleted.
    pub async fn wait_until<T>(
        &self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&HashMap<String, Deletion>) -> Option<T>,
    ) -> Result<T> {
        wait_noting(what, timeout, "seen deleted", async |note: &mut String| {
            let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            let mut names: Vec<&str> = seen.keys().map(String::as_str).collect();
            names.sort_unstable();
            *note = format!("{names:?}");
            Ok(done(&seen))
        })
        .await
    }
}

impl Drop for PodDeletions {
    fn drop(&mut self) {
        self.task.abort();
    }
}
