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

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// Reads every file, in order, on the blocking pool. Each must be a regular
/// file of at most 1 MiB, what a Secret or `ConfigMap` holds
/// ([`crate::files::read_mounted`]): a link to `/dev/zero` or a file of
/// 100 MB is refused before it is read, a FIFO without blocking.
pub async fn read_all(paths: &[PathBuf]) -> Result<Vec<Vec<u8>>, ReadError> {
    let paths = paths.to_vec();
    tokio::task::spawn_blocking(move || read_all_now(&paths))
        .await
        .unwrap_or_else(|e| {
            Err(ReadError {
                path: PathBuf::new(),
                source: std::io::Error::other(e.to_string()),
            })
        })
}

fn read_all_now(paths: &[PathBuf]) -> Result<Vec<Vec<u8>>, ReadError> {
    paths
        .iter()
        .map(|path| {
            crate::files::read_mounted(path).map_err(|source| ReadError {
                path: path.clone(),
                source,
            })
        })
        .collect()
}

/// Reads that did not finish within a poll and still run, at most: past
/// them a poll reads nothing (counted as a failure) until one finishes, so
/// a mount that hangs every read holds this many blocking threads.
const STUCK_READS: usize = 2;

/// The least time a poll's read is given (a poll interval can be shorter
/// in tests, and a loaded machine slower).
const READ_WITHIN: Duration = Duration::from_secs(1);

/// Why a poll has no contents.
#[derive(Debug, Error)]
enum PollError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error(
        "the files were not read within {0:?}; the read goes on, and the next poll reads them again"
    )]
    Slow(Duration),
    #[error(
        "{STUCK_READS} earlier reads of the files have not finished; not read again until one does"
    )]
    Stuck,
}

/// One poll's read, given up after `within`: a read that never finishes
/// (a file on a mount that hangs) neither stops the poller nor goes
/// uncounted. It finishes on the blocking pool whenever it can, counted
/// in `stuck` until then.
async fn read_within(
    paths: &[PathBuf],
    within: Duration,
    stuck: &Arc<AtomicUsize>,
) -> Result<Vec<Vec<u8>>, PollError> {
    if stuck.load(Ordering::Acquire) >= STUCK_READS {
        return Err(PollError::Stuck);
    }
    stuck.fetch_add(1, Ordering::AcqRel);
    let (paths, done) = (paths.to_vec(), stuck.clone());
    let read = tokio::task::spawn_blocking(move || {
        let read = read_all_now(&paths);
        done.fetch_sub(1, Ordering::AcqRel);
        read
    });
    match tokio::time::timeout(within, read).await {
        Ok(Ok(read)) => Ok(read?),
        Ok(Err(e)) => Err(PollError::Read(ReadError {
            path: PathBuf::new(),
            source: std::io::Error::other(e.to_string()),
        })),
        Err(_) => Err(PollError::Slow(within)),
    }
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
        let stuck = Arc::new(AtomicUsize::new(0));
        let mut seen_ok = true;
        let mut unreadable = false;
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        // The first tick completes at once; the initial contents are loaded.
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let read = read_within(&paths, interval.max(READ_WITHIN), &stuck).await;
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
