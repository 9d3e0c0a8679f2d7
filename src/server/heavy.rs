//! Work off the async workers: large reviews, and the computing step of
//! TLS handshakes, each on a thread of its own at a lower scheduling
//! priority, one job at a time.
//!
//! A review costs about its body's size in CPU time, and its working set
//! (the parsed pod, the patch, the answer) is several times its body. The
//! apiserver's pod reviews are a few KiB to a few tens of KiB and run where
//! they arrive; a body over [`HEAVY_BODY_BYTES`] is reviewed on the review
//! thread instead. So a client that sends 7 MiB reviews back to back holds
//! one thread, not the workers that answer everyone else, and however many
//! such reviews the body budget admits, one working set is alive at a time,
//! whatever the worker count. A handshake's key exchange and signature run
//! on a thread of their own for the same reason (`super::handshake`).
//!
//! **Who goes next.** The jobs waiting are not served in arrival order:
//! other clients' queued 5 MiB reviews held an ordinary 128 KiB one for
//! 200 ms. A review costs about its body's size, so each address is
//! charged the bytes of the reviews the thread has run for it, halved
//! every [`HALF_LIFE`], and the next job is the one whose address's charge
//! plus its own size is least (in arrival order among equals): the
//! smaller job of the lighter client first. A client that sends large
//! reviews back to back is charged for every byte of them, so a review
//! from a client that sends few (the apiserver's large pod, now and then)
//! runs next, and waits for at most the one large review being computed.

use std::collections::HashMap;
use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Reviews of bodies larger than this run on the pool: twice the largest
/// pod the chart's benchmarks send, and the size above which a review is
/// looked at before it is read ([`crate::review::LOOKED_AT_ABOVE`]). A
/// smaller body holds at most some 21,000 JSON values, a working set of a
/// few MiB on each worker.
pub const HEAVY_BODY_BYTES: usize = crate::review::LOOKED_AT_ABOVE;

/// How much lower the pool's thread is scheduled than the async workers
/// (a nice value): under CPU contention the small reviews go first.
const NICENESS: libc::c_int = 10;

/// How fast an address's charge is forgiven: slowly enough that a client
/// that sends large reviews back to back stays behind for some seconds
/// after it stops, fast enough that an address that sent a burst of them
/// is not held back for long.
pub const HALF_LIFE: Duration = Duration::from_secs(5);

/// Addresses charged at most; past it those charged least are forgotten.
const CHARGED_ADDRESSES: usize = 4096;

type Job = Box<dyn FnOnce() + Send>;

/// Who a job is charged to, and for how much: its address and its body's
/// bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Charge {
    pub peer: IpAddr,
    pub bytes: usize,
}

/// A job waiting, with its charge (none: charged nothing, served in
/// arrival order) and its place in arrival order.
struct Waiting {
    charge: Option<Charge>,
    seq: u64,
    job: Job,
}

/// What the thread has run for each address: bytes of review, as of an
/// instant, decaying with [`HALF_LIFE`].
#[derive(Default)]
struct Charges {
    by_peer: HashMap<IpAddr, (f64, Instant)>,
}

impl Charges {
    fn now(&self, peer: Option<IpAddr>, now: Instant) -> f64 {
        let Some((bytes, at)) = peer.and_then(|p| self.by_peer.get(&p)) else {
            return 0.0;
        };
        decayed(*bytes, now.saturating_duration_since(*at))
    }

    /// The key a job waits with: its address's charge plus its own bytes.
    fn key(&self, charge: Option<Charge>, now: Instant) -> f64 {
        charge.map_or(0.0, |c| {
            #[expect(clippy::cast_precision_loss, reason = "bytes far below 2^52")]
            let own = c.bytes as f64;
            self.now(Some(c.peer), now) + own
        })
    }

    fn charge(&mut self, peer: IpAddr, bytes: f64, now: Instant) {
        let before = self.now(Some(peer), now);
        if self.by_peer.len() >= CHARGED_ADDRESSES && !self.by_peer.contains_key(&peer) {
            // Forget what has decayed to almost nothing (below 1 KiB).
            self.by_peer
                .retain(|_, (b, at)| decayed(*b, now.saturating_duration_since(*at)) > 1024.0);
            if self.by_peer.len() >= CHARGED_ADDRESSES {
                return;
            }
        }
        self.by_peer.insert(peer, (before + bytes, now));
    }
}

fn decayed(value: f64, after: Duration) -> f64 {
    value * (-after.as_secs_f64() / HALF_LIFE.as_secs_f64()).exp2()
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    seq: u64,
    charges: Charges,
    stopped: bool,
}

impl Queue {
    /// The next job: the least charge plus size, oldest first.
    fn next(&mut self) -> Option<Waiting> {
        let now = Instant::now();
        let charges = &self.charges;
        let (i, _) = self
            .waiting
            .iter()
            .enumerate()
            .map(|(i, w)| (i, (charges.key(w.charge, now), w.seq)))
            .min_by(|(_, a), (_, b)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))?;
        Some(self.waiting.swap_remove(i))
    }
}

struct Shared {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One thread and the jobs waiting for it. The queue is bounded by what
/// its callers hold while they wait: a review its body's charge in the
/// budget and its request's deadline (a review whose request gave up is
/// skipped unrun), a handshake its slot.
pub(crate) struct Heavy {
    shared: Arc<Shared>,
}

/// Why a job could not be run on the pool.
#[derive(Debug, thiserror::Error)]
#[error("the review pool has stopped")]
pub(crate) struct Stopped;

impl Heavy {
    /// Starts the thread `name`; it ends when the pool is dropped. With
    /// `trim`, the memory a job freed is handed back to the kernel after
    /// it (a review's working set of megabytes).
    ///
    /// # Errors
    /// The thread could not be spawned.
    pub fn start(name: &str, trim: bool) -> std::io::Result<Heavy> {
        let shared = Arc::new(Shared {
            queue: Mutex::default(),
            ready: Condvar::new(),
        });
        let worker = shared.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                lower_priority();
                while let Some(next) = wait_for_job(&worker) {
                    (next.job)();
                    if let Some(Charge { peer, bytes }) = next.charge {
                        #[expect(clippy::cast_precision_loss, reason = "bytes far below 2^52")]
                        let bytes = bytes as f64;
                        worker.lock().charges.charge(peer, bytes, Instant::now());
                    }
                    if trim {
                        // The review's working set is free again; hand
                        // its pages back, so the next one (of another
                        // shape) does not add to what the allocator keeps.
                        self::trim();
                    }
                }
            })?;
        Ok(Heavy { shared })
    }

    /// Runs `work` on the pool, charged as `charge` says (`None` for work
    /// whose order its caller already chose), and waits for its result; `work` is skipped if this future is dropped first (the
    /// request's deadline passed). A panic in `work` is resumed here, in
    /// the caller, where the handler's panic layer answers it; the pool's
    /// thread carries on.
    pub async fn run<T, F>(&self, charge: Option<Charge>, work: F) -> Result<T, Stopped>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let (done, result) = oneshot::channel();
        let job: Job = Box::new(move || {
            if !done.is_closed() {
                let _ = done.send(std::panic::catch_unwind(AssertUnwindSafe(work)));
            }
        });
        {
            let mut queue = self.shared.lock();
            if queue.stopped {
                return Err(Stopped);
            }
            queue.seq += 1;
            let seq = queue.seq;
            queue.waiting.push(Waiting { charge, seq, job });
        }
        self.shared.ready.notify_one();
        match result.await.map_err(|_| Stopped)? {
            Ok(value) => Ok(value),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

impl Drop for Heavy {
    fn drop(&mut self) {
        self.shared.lock().stopped = true;
        self.shared.ready.notify_one();
    }
}

/// The next job, once there is one; `None` once the pool is dropped.
fn wait_for_job(shared: &Shared) -> Option<Waiting> {
    let mut queue = shared.lock();
    loop {
        if queue.stopped {
            return None;
        }
        if let Some(next) = queue.next() {
            return Some(next);
        }
        queue = shared
            .ready
            .wait(queue)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

/// `malloc_trim`: glibc's malloc keeps freed memory in its arenas; this
/// returns the free pages to the kernel (a few milliseconds after a review
/// of megabytes, on this thread only).
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory to the kernel; it is
    // thread-safe and touches no memory that is in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Raises this thread's nice value. Linux schedules threads one by one, so
/// `setpriority` on the thread id changes this thread only. Best effort: a
/// failure leaves the pool at normal priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions; setpriority only changes the
        // scheduling priority of the thread named.
        let failed = unsafe {
            let tid = libc::gettid();
            libc::setpriority(
                libc::PRIO_PROCESS,
                libc::id_t::try_from(tid).unwrap_or_default(),
                NICENESS,
            ) != 0
        };
        if failed {
            tracing::debug!("cannot lower the review pool's priority");
        }
    }
}

#[cfg(test)]
mod tests;
