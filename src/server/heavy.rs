//! Large reviews, off the async workers.
//!
//! A review costs about its body's size in CPU time, and its working set
//! (the parsed pod, the patch, the answer) is several times its body. The
//! apiserver's pod reviews are a few KiB to a few tens of KiB and run where
//! they arrive; a body over [`HEAVY_BODY_BYTES`] is reviewed on this pool's
//! one thread instead, at a lower scheduling priority, one at a time. So a
//! client that sends 7 MiB reviews back to back holds one thread, not the
//! workers that answer everyone else, and however many such reviews the
//! body budget admits, one working set is alive at a time, whatever the
//! worker count.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;

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

type Job = Box<dyn FnOnce() + Send>;

/// The pool: one thread, fed in arrival order. The queue is bounded by the
/// body budget (each queued review holds its body's charge) and by the
/// request deadline (a review whose request gave up is skipped unrun).
pub(crate) struct Heavy {
    jobs: mpsc::Sender<Job>,
}

/// Why a review could not be run on the pool.
#[derive(Debug, thiserror::Error)]
#[error("the review pool has stopped")]
pub(crate) struct Stopped;

impl Heavy {
    /// Starts the pool's thread; it ends when the pool is dropped.
    ///
    /// # Errors
    /// The thread could not be spawned.
    pub fn start() -> std::io::Result<Heavy> {
        let (jobs, queue) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("heavy-reviews".into())
            .spawn(move || {
                lower_priority();
                while let Ok(job) = queue.recv() {
                    job();
                    // The review's working set is free again; hand its
                    // pages back, so the next one (of another shape) does
                    // not add to what the allocator keeps.
                    trim();
                }
            })?;
        Ok(Heavy { jobs })
    }

    /// Runs `work` on the pool and waits for its result; `work` is skipped
    /// if this future is dropped first (the request's deadline passed). A
    /// panic in `work` is resumed here, in the caller, where the handler's
    /// panic layer answers it; the pool's thread carries on.
    pub async fn run<T, F>(&self, work: F) -> Result<T, Stopped>
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
        self.jobs.send(job).map_err(|_| Stopped)?;
        match result.await.map_err(|_| Stopped)? {
            Ok(value) => Ok(value),
            Err(panic) => std::panic::resume_unwind(panic),
        }
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
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_work_off_the_caller_and_skips_what_nobody_waits_for() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, Ordering};
        let pool = Arc::new(Heavy::start().unwrap());
        let caller = std::thread::current().id();
        let ran_on = pool.run(|| std::thread::current().id()).await.unwrap();
        assert_ne!(ran_on, caller);
        // The pool is busy; the next job's caller gives up before it runs.
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let (started, running) = std::sync::mpsc::channel::<()>();
        let busy = {
            let pool = pool.clone();
            tokio::spawn(async move {
                pool.run(move || {
                    started.send(()).unwrap();
                    gate.recv().unwrap();
                })
                .await
            })
        };
        while running.try_recv().is_err() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let ran = Arc::new(AtomicBool::new(false));
        let flag = ran.clone();
        let skipped = pool.run(move || flag.store(true, Ordering::SeqCst));
        let gave_up = tokio::time::timeout(std::time::Duration::from_millis(50), skipped).await;
        assert!(gave_up.is_err(), "queued behind the busy job");
        release.send(()).unwrap();
        busy.await.unwrap().unwrap();
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
        assert!(!ran.load(Ordering::SeqCst), "given up, so never run");
        // A panic reaches the caller; the pool carries on.
        let pool2 = pool.clone();
        let panicked = tokio::spawn(async move { pool2.run(|| panic!("boom")).await }).await;
        assert!(panicked.unwrap_err().is_panic());
        assert_eq!(pool.run(|| 8).await.unwrap(), 8);
    }
}
