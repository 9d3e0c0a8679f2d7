//! The accept loop both listeners share: a connection cap that makes room
//! instead of locking out, and file descriptors raised to what the process
//! may have.
//!
//! Refusing to accept at the cap (leaving clients in the kernel's backlog)
//! lets anyone who opens enough idle connections lock out the apiserver:
//! 1,024 raw TCP connections that never start TLS would hold every slot,
//! and so would 1,024 TLS connections that each send one request and then
//! sit idle. So at the cap a new connection evicts one that may go, on both
//! ports alike: the longest idle of those without a request on its way
//! ([`ConnState::rank`]: a new connection counts as idle since its accept,
//! and a request in flight is never cut, so neither is a kubelet's probe
//! under admin-connection churn).

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinSet};

use super::conn::{ConnState, Rank};
use super::metrics::Metrics;

pub(crate) struct Limits {
    pub name: &'static str,
    pub cap: usize,
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
    let mut queue = EvictionQueue::default();
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
            accepted = listener.accept(), if can_accept => accepted,
            // At the cap with every connection in a request: look again
            // shortly, as one may go once its request is answered.
            () = tokio::time::sleep(RECHECK), if !can_accept => continue,
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
        state.set_fd(stream.as_raw_fd());
        let connection = handle(stream, peer, state.clone());
        let forget = ForgetSocket(state.clone());
        let abort = connections.spawn(async move {
            let _forget = forget;
            connection.await;
        });
        queue.push(state, abort, limits.cap);
        open.set(gauge_value(connections.len()));
    }
    connections
}

/// How often a listener at its cap, with no connection that may be evicted,
/// looks again.
const RECHECK: Duration = Duration::from_millis(50);

/// Forgets the connection's socket when its task ends, however it ends.
struct ForgetSocket(Arc<ConnState>);

impl Drop for ForgetSocket {
    fn drop(&mut self) {
        self.0.closed();
    }
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

/// The open connections, for eviction. At the cap, the one that ranks first
/// ([`ConnState::rank`]) is found by a scan: a thousand atomic loads. Under
/// a flood of new connections that a flood holds open, that scan at every
/// new connection was most of the accept loop's time (0.45 ms each in a
/// debug build, so the loop fell behind and the kernel's listen backlog
/// overflowed); so one scan also keeps the next [`SHORTLIST`]` - 1`
/// connections that have never sent a request (silent past their grace),
/// which the next new connections evict in turn, each looked at again
/// first. Any other eviction is chosen by a fresh scan.
#[derive(Default)]
struct EvictionQueue {
    entries: Vec<(Arc<ConnState>, AbortHandle)>,
    /// Silent connections next in line, first last.
    shortlist: Vec<(Arc<ConnState>, AbortHandle)>,
}

/// How many connections one scan lines up for eviction at most.
const SHORTLIST: usize = 16;

impl EvictionQueue {
    fn prune(&mut self) {
        self.entries.retain(|(_, abort)| !abort.is_finished());
    }

    fn has_candidate(&self) -> bool {
        self.entries
            .iter()
            .any(|(state, abort)| !abort.is_finished() && state.rank().is_some())
    }

    /// Aborts the connection that ranks first; false if none may go. One
    /// that may not be closed now ([`ConnState::may_close_now`]: a request
    /// waiting in its socket, an answer being taken) is passed over.
    fn evict_one(&mut self) -> bool {
        while let Some((state, abort)) = self.shortlist.pop() {
            let still_silent = state.rank().is_some_and(Rank::silent);
            if !abort.is_finished() && still_silent && state.may_close_now() {
                abort.abort();
                return true;
            }
        }
        self.prune();
        let now = Instant::now();
        let mut ranked: Vec<(Rank, usize)> = self
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, (state, _))| state.rank_at(now).map(|rank| (rank, i)))
            .collect();
        ranked.sort_unstable();
        let mut ranked = ranked.into_iter();
        let Some(first) = ranked
            .by_ref()
            .find(|&(_, i)| self.entries[i].0.may_close_now())
        else {
            return false;
        };
        let next: Vec<usize> = ranked
            .take_while(|(rank, _)| rank.silent())
            .take(SHORTLIST - 1)
            .map(|(_, i)| i)
            .collect();
        self.shortlist = next
            .into_iter()
            .rev()
            .map(|i| self.entries[i].clone())
            .collect();
        let (_, abort) = self.entries.swap_remove(first.1);
        abort.abort();
        true
    }

    fn push(&mut self, state: Arc<ConnState>, abort: AbortHandle, cap: usize) {
        self.entries.push((state, abort));
        if self.entries.len() > cap.saturating_mul(2) {
            self.prune();
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

/// Buffers of 128 KiB or more (large bodies, answers, a large review's
/// parts) are mapped on their own and unmapped when freed. glibc's default
/// raises that threshold to the largest block freed so far (up to 32 MiB),
/// after which a burst of large bodies stays in its heaps as free memory
/// the process keeps; a fixed threshold keeps RSS to what is in use. Call
/// once, before threads start.
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt sets an allocator parameter; called before any other
    // thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
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
