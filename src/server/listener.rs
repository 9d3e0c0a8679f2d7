//! The accept loop both listeners share: a connection cap that makes room
//! instead of locking out, and file descriptors raised to what the process
//! may have.
//!
//! Refusing to accept at the cap (leaving clients in the kernel's backlog)
//! lets anyone who opens enough idle connections lock out the apiserver:
//! 1,024 raw TCP connections that never start TLS would hold every slot.
//! So at the cap a new connection evicts the oldest one that may go: on the
//! admission port one that has not sent a request head yet (the apiserver's
//! established connections are never touched), on the admin port the
//! oldest of all (probes and scrapes simply reconnect).

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinSet};

use super::conn::ConnState;
use super::metrics::Metrics;

/// Which connections may be closed to make room for a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Evict {
    /// Only those that have not sent a request head yet.
    NotEstablished,
    /// Any, oldest first.
    Oldest,
}

pub(crate) struct Limits {
    pub name: &'static str,
    pub cap: usize,
    pub evict: Evict,
}

/// Accepts until `stop` resolves, running `handle` for each connection, and
/// returns the connections still open so the caller can drain them.
pub(crate) async fn accept_until<F, Fut>(
    listener: &TcpListener,
    limits: &Limits,
    metrics: &Metrics,
    stop: impl Future<Output = ()>,
    handle: F,
) -> JoinSet<()>
where
    F: Fn(TcpStream, SocketAddr, Arc<ConnState>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let open = metrics.open_connections(limits.name);
    let mut connections = JoinSet::new();
    let mut queue = EvictionQueue::new(limits.evict);
    let mut stop = std::pin::pin!(stop);
    loop {
        let can_accept = connections.len() < limits.cap || queue.has_candidate();
        let accepted = tokio::select! {
            biased;
            () = &mut stop => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {
                closed(&connections, &open);
                continue;
            }
            // At the cap with nothing that may be evicted: wait for a close.
            accepted = listener.accept(), if can_accept => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Usually out of file descriptors; back off instead of
                // spinning.
                tracing::warn!(listener = limits.name, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        if connections.len() >= limits.cap && queue.evict_one() {
            metrics.evicted(limits.name);
        }
        let state = ConnState::new();
        let abort = connections.spawn(handle(stream, peer, state.clone()));
        queue.push(state, abort, limits.cap);
        open.set(gauge_value(connections.len()));
    }
    connections
}

fn closed(connections: &JoinSet<()>, open: &Gauge) {
    open.set(gauge_value(connections.len()));
    if connections.is_empty() {
        release_free_memory();
    }
}

fn gauge_value(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Open connections in accept order, for eviction. Entries that can no
/// longer be evicted (finished, or established under
/// [`Evict::NotEstablished`]) are dropped lazily from the front.
struct EvictionQueue {
    evict: Evict,
    entries: VecDeque<(Arc<ConnState>, AbortHandle)>,
}

impl EvictionQueue {
    fn new(evict: Evict) -> Self {
        EvictionQueue {
            evict,
            entries: VecDeque::new(),
        }
    }

    fn evictable(&self, state: &ConnState, abort: &AbortHandle) -> bool {
        !abort.is_finished() && (self.evict == Evict::Oldest || !state.established())
    }

    fn has_candidate(&mut self) -> bool {
        while let Some((state, abort)) = self.entries.front() {
            if self.evictable(state, abort) {
                return true;
            }
            self.entries.pop_front();
        }
        false
    }

    /// Aborts the oldest evictable connection; false if there is none.
    fn evict_one(&mut self) -> bool {
        if !self.has_candidate() {
            return false;
        }
        match self.entries.pop_front() {
            Some((_, abort)) => {
                abort.abort();
                true
            }
            None => false,
        }
    }

    fn push(&mut self, state: Arc<ConnState>, abort: AbortHandle, cap: usize) {
        self.entries.push_back((state, abort));
        // Established entries behind the front are only dropped when they
        // reach it; keep the queue bounded anyway.
        if self.entries.len() > cap.saturating_mul(2) {
            let evict = self.evict;
            self.entries
                .retain(|(s, a)| !a.is_finished() && (evict == Evict::Oldest || !s.established()));
        }
    }
}

/// Called when the last connection closes. glibc's malloc keeps what a burst
/// of connections freed (TLS and HTTP buffers, bodies) in its heaps;
/// `malloc_trim` hands the free pages back, so RSS returns to near idle
/// (docs/performance.md, "Why the code is shaped this way"). It runs on the
/// blocking pool, and only when no connection is open.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tokio::task::spawn_blocking(|| {
        // SAFETY: malloc_trim only returns free memory to the kernel; it is
        // thread-safe and touches no memory that is in use.
        unsafe { libc::malloc_trim(0) };
    });
}

/// Raises the soft limit on open files to the hard limit, so that the
/// connection caps, not the default soft limit of 1,024, bound what the
/// listeners hold. Returns the soft limit now in force.
///
/// # Errors
/// What `getrlimit` or `setrlimit` report.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raw const raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        limit.rlim_cur = limit.rlim_max;
    }
    Ok(limit.rlim_cur)
}
