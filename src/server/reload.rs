//! The one file-polling loop behind certificate, client-CA and config reload.
//!
//! Polling and comparing bytes (rather than watching with inotify) sees every
//! way a file can change: in-place writes, renames over the file, and the
//! kubelet's atomic swap of the `..data` symlink in Secret and `ConfigMap`
//! volumes, which changes no watched inode the way a naive watcher expects.
//! A few small reads every few seconds cost nothing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use thiserror::Error;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use prometheus_client::metrics::gauge::Gauge;

use super::metrics::{FAILURE, ReloadCounter, SUCCESS};

#[derive(Debug, Error)]
#[error("cannot read {}: {source}", path.display())]
pub struct ReadError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Reads every file, in order.
pub async fn read_all(paths: &[PathBuf]) -> Result<Vec<Vec<u8>>, ReadError> {
    let mut contents = Vec::with_capacity(paths.len());
    for path in paths {
        contents.push(read(path).await?);
    }
    Ok(contents)
}

async fn read(path: &Path) -> Result<Vec<u8>, ReadError> {
    tokio::fs::read(path).await.map_err(|source| ReadError {
        path: path.to_owned(),
        source,
    })
}

/// What is reloaded, for log lines.
pub struct Watch {
    pub what: &'static str,
    pub paths: Vec<PathBuf>,
    /// The contents already in use, so the first poll is not a reload.
    pub initial: Vec<Vec<u8>>,
    pub interval: Duration,
    pub counter: ReloadCounter,
    /// Set to 1 after a good reload and 0 after a rejected one.
    pub last_success: Option<Gauge>,
}

/// Polls `watch.paths` every `watch.interval`; when any content differs from
/// the last contents seen, calls `apply` with all of them. A rejected version
/// is remembered too, so a broken file is logged and counted once, not on
/// every poll; the caller keeps serving what it had.
pub fn spawn<F, E>(watch: Watch, mut apply: F) -> JoinHandle<()>
where
    F: FnMut(&[Vec<u8>]) -> Result<(), E> + Send + 'static,
    E: std::fmt::Display,
{
    tokio::spawn(async move {
        let Watch {
            what,
            paths,
            initial,
            interval,
            counter,
            last_success,
        } = watch;
        let status = |ok: bool| {
            if let Some(gauge) = &last_success {
                gauge.set(i64::from(ok));
            }
        };
        let mut seen = initial;
        let mut seen_ok = true;
        let mut unreadable = false;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // The first tick completes at once; the initial contents are loaded.
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let current = match read_all(&paths).await {
                Ok(current) => current,
                Err(e) => {
                    if !unreadable {
                        tracing::warn!(what, error = %e, "reload failed, keeping the previous version");
                        counter.get_or_create(&FAILURE).inc();
                        status(false);
                        unreadable = true;
                    }
                    continue;
                }
            };
            if current == seen {
                if unreadable {
                    // Readable again, unchanged: in use if it was accepted.
                    status(seen_ok);
                    unreadable = false;
                }
                continue;
            }
            unreadable = false;
            match apply(&current) {
                Ok(()) => {
                    tracing::info!(what, files = ?paths, "reloaded");
                    counter.get_or_create(&SUCCESS).inc();
                    seen_ok = true;
                    status(true);
                }
                Err(e) => {
                    tracing::warn!(what, error = %e, "reload rejected, keeping the previous version");
                    counter.get_or_create(&FAILURE).inc();
                    seen_ok = false;
                    status(false);
                }
            }
            seen = current;
        }
    })
}
