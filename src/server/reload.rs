//! The one file-polling loop behind certificate, client-CA and config reload.
//!
//! Polling and comparing bytes (rather than watching with inotify) sees every
//! way a file can change: in-place writes, renames over the file, and the
//! kubelet's atomic swap of the `..data` symlink in Secret and `ConfigMap`
//! volumes, which changes no watched inode the way a naive watcher expects.
//! A few small reads every few seconds cost nothing.
//!
//! A file rewritten in place is read half-written by a poll that falls
//! between two of the writer's writes, and a half file can be a valid one
//! (a config whose second section is not written yet). So a change is
//! applied only once it reads the same on two polls in a row: a reload
//! takes one more poll, and a version that lived for less than a poll is
//! never applied.

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

/// Polls `watch.paths` every `watch.interval`; when the contents differ from
/// the last contents seen and read the same on the next poll, calls `apply`
/// with all of them. A rejected version is remembered too, so a broken file
/// is logged and counted once, not on every poll; the caller keeps serving
/// what it had.
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
        let mut files = Stable::new(initial);
        let mut seen_ok = true;
        let mut unreadable = false;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // The first tick completes at once; the initial contents are loaded.
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let read = read_all(&paths).await;
            let current = match read {
                Ok(current) => current,
                Err(e) => {
                    files.unreadable();
                    if !unreadable {
                        tracing::warn!(what, error = %e, "reload failed, keeping the previous version");
                        counter.get_or_create(&FAILURE).inc();
                        status(false);
                        unreadable = true;
                    }
                    continue;
                }
            };
            let Some(current) = files.next(current) else {
                if unreadable && files.unchanged() {
                    // Readable again, unchanged: in use if it was accepted.
                    status(seen_ok);
                    unreadable = false;
                }
                continue;
            };
            unreadable = false;
            match apply(current) {
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
        }
    })
}

/// The last contents applied (or rejected), and a change read once that is
/// applied only if the next poll reads it again.
struct Stable {
    seen: Vec<Vec<u8>>,
    settling: Option<Vec<Vec<u8>>>,
}

impl Stable {
    fn new(initial: Vec<Vec<u8>>) -> Self {
        Stable {
            seen: initial,
            settling: None,
        }
    }

    /// The contents to apply now, if `current` differs from what was seen
    /// and the previous poll read the same; they are then what was seen.
    fn next(&mut self, current: Vec<Vec<u8>>) -> Option<&[Vec<u8>]> {
        if current == self.seen {
            self.settling = None;
            return None;
        }
        if self.settling.as_ref() != Some(&current) {
            // Perhaps still being written: look again at the next poll.
            self.settling = Some(current);
            return None;
        }
        self.settling = None;
        self.seen = current;
        Some(&self.seen)
    }

    /// The last poll read what was seen.
    fn unchanged(&self) -> bool {
        self.settling.is_none()
    }

    /// A poll could not read the files: the next read starts over.
    fn unreadable(&mut self) {
        self.settling = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<Vec<u8>> {
        vec![s.as_bytes().to_vec()]
    }

    #[test]
    fn a_change_is_applied_once_two_polls_in_a_row_read_it() {
        let mut files = Stable::new(v("a"));
        assert_eq!(files.next(v("a")), None);
        assert!(files.unchanged());
        assert_eq!(files.next(v("b")), None, "read once");
        assert!(!files.unchanged());
        assert_eq!(files.next(v("b")), Some(&v("b")[..]), "read twice");
        assert_eq!(files.next(v("b")), None, "applied once");
    }

    #[test]
    fn a_version_that_lived_less_than_a_poll_is_never_applied() {
        let mut files = Stable::new(v("a"));
        // Half written, then whole: the half is never applied.
        assert_eq!(files.next(v("half")), None);
        assert_eq!(files.next(v("whole")), None);
        assert_eq!(files.next(v("whole")), Some(&v("whole")[..]));
        // Back to what was seen before it settled: nothing to apply.
        assert_eq!(files.next(v("c")), None);
        assert_eq!(files.next(v("whole")), None);
        assert!(files.unchanged());
        // A failed read in between starts over.
        assert_eq!(files.next(v("d")), None);
        files.unreadable();
        assert_eq!(files.next(v("d")), None);
        assert_eq!(files.next(v("d")), Some(&v("d")[..]));
    }
}
