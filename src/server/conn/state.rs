//! Where one connection is in its request cycle, shared by the transport
//! beneath hyper (which sees bytes), the service (which sees requests), the
//! accept loop (which evicts at the cap) and shutdown (which closes).
//!
//! A few atomics per connection, written at each phase change (three times
//! per request) and read only at the cap, under memory pressure or during
//! shutdown.

use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(crate) struct ConnState {
    accepted: Instant,
    phase: AtomicU8,
    /// Milliseconds after `accepted` at which the current phase began: for
    /// [`HEAD`] the head deadline runs from there, for [`IDLE`] it is when
    /// the connection fell idle.
    since_ms: AtomicU64,
    /// Milliseconds after `accepted` at which the last answer was ready;
    /// [`NONE`] before the first.
    answered_ms: AtomicU64,
    /// A response write waits for the client to read.
    write_blocked: AtomicBool,
    /// Set when the server closes the connection from outside its task
    /// (to free the memory its unread answer holds); the task ends at once.
    close: Flag,
    /// The socket, to look for bytes not read yet; -1 when unknown.
    fd: AtomicI32,
    /// Before the first request: milliseconds after `accepted` since which
    /// the connection has waited on its client (for its hello, for its
    /// side of the handshake after the server's flight, for its first
    /// head); [`NONE`] while it waits on the server (its hello in line for
    /// the CPU).
    client_turn_ms: AtomicU64,
    /// Its address has credit with the handshake gate (its handshakes
    /// finish): it is given [`PATIENT_GRACE`] rather than [`NEW_GRACE`].
    patient: AtomicBool,
}

/// A new connection: handshake and first head, no byte of it read yet. The
/// head deadline runs from the accept.
pub(super) const NEW: u8 = 0;
/// Waiting for a head with only the idle timeout running.
pub(super) const IDLE: u8 = 1;
/// A head is arriving: the head deadline runs.
pub(super) const HEAD: u8 = 2;
/// A request is being handled (its own deadline runs in the handler).
pub(super) const REQUEST: u8 = 3;
/// The answer is ready and being written: not yet all taken by the kernel.
pub(super) const ANSWER: u8 = 4;
/// Set once a first request head has arrived; never reset.
const ESTABLISHED: u8 = 8;

const NONE: u64 = u64::MAX;

/// How long a client may leave an answer unread before its connection is
/// evictable like an idle one. The apiserver's Go client reads its answer
/// as it arrives, so a connection whose answer waits this long is not the
/// apiserver's; within it, an answer is never lost to eviction.
pub(crate) const ANSWER_GRACE: Duration = Duration::from_secs(1);

/// How recently a connection must have fallen idle to count as in use.
/// Go's transport reuses its most recently idle connection first, and a
/// close that crosses a request on the wire fails it (Go does not retry a
/// POST it has written); the window is as long as the server's own
/// scheduling delay, so on a loaded machine a connection in use is evicted
/// only when no other may go.
pub(crate) const REUSE_GRACE: Duration = Duration::from_secs(1);

/// How long a new connection that has sent no request yet may keep the
/// server waiting on it (for its hello, its side of the handshake, its
/// first head) before it ranks ahead of the idle ones: a client that means
/// to send a request does so within milliseconds of the server's flight,
/// and a flood of hellos held open must not outlast the apiserver's idle
/// keep-alive connections. Time its hello waits for the CPU does not count.
pub(crate) const NEW_GRACE: Duration = Duration::from_millis(100);
/// The same for a client whose address has credit with the handshake gate
/// (its handshakes finish), on a loaded machine.
pub(crate) const PATIENT_GRACE: Duration = Duration::from_secs(1);

/// Which connection goes first when one must make room; the smallest is
/// evicted first, and `None` is never evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Rank {
    tier: u8,
    since: Instant,
}

impl Rank {
    /// Of a connection that never sent a request (past its grace) or left
    /// its answer unread: one that goes before any that carried a request.
    pub fn silent(self) -> bool {
        self.tier == 0
    }
}

impl ConnState {
    /// A new connection's first head (and handshake) deadline runs from now.
    pub fn new() -> Arc<Self> {
        Arc::new(ConnState {
            accepted: Instant::now(),
            phase: AtomicU8::new(NEW),
            since_ms: AtomicU64::new(0),
            answered_ms: AtomicU64::new(NONE),
            write_blocked: AtomicBool::new(false),
            close: Flag::default(),
            fd: AtomicI32::new(-1),
            client_turn_ms: AtomicU64::new(0),
            patient: AtomicBool::new(false),
        })
    }

    /// Its hello is read: the server's turn, until [`ConnState::client_turn`].
    pub fn server_turn(&self) {
        self.client_turn_ms.store(NONE, Ordering::Release);
    }

    /// The server's flight is on its way: the client's turn again.
    pub fn client_turn(&self) {
        self.client_turn_ms.store(self.now_ms(), Ordering::Release);
    }

    /// Its address has credit with the handshake gate.
    pub fn patient(&self) {
        self.patient.store(true, Ordering::Release);
    }

    /// How long it has waited on its client before its first request, as
    /// of `now`; zero while it waits on the server.
    fn waited_on_client(&self, now: Instant) -> Duration {
        let ms = self.client_turn_ms.load(Ordering::Acquire);
        if ms == NONE {
            return Duration::ZERO;
        }
        now.saturating_duration_since(self.accepted + Duration::from_millis(ms))
    }

    /// Records the socket, so that shutdown and eviction can see a request
    /// that has arrived but is not read yet.
    pub fn set_fd(&self, fd: RawFd) {
        self.fd.store(fd, Ordering::Release);
    }

    /// The connection ended; its descriptor may be reused.
    pub fn closed(&self) {
        self.fd.store(-1, Ordering::Release);
    }

    pub fn head_deadline(&self, timeout: Duration) -> Instant {
        self.since() + timeout
    }

    fn since(&self) -> Instant {
        self.accepted + Duration::from_millis(self.since_ms.load(Ordering::Acquire))
    }

    pub(super) fn phase(&self) -> u8 {
        self.phase.load(Ordering::Acquire) & !ESTABLISHED
    }

    fn established(&self) -> bool {
        self.phase.load(Ordering::Acquire) & ESTABLISHED != 0
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.accepted.elapsed().as_millis()).unwrap_or(NONE - 1)
    }

    fn enter(&self, phase: u8) {
        self.since_ms.store(self.now_ms(), Ordering::Release);
        let established = self.phase.load(Ordering::Acquire) & ESTABLISHED;
        self.phase.store(phase | established, Ordering::Release);
    }

    /// Bytes of a head were read: on a new connection its deadline keeps
    /// running from the accept, on an idle one it starts now.
    pub(super) fn bytes_read(&self) {
        match self.phase() {
            NEW => self.phase.store(HEAD, Ordering::Release),
            IDLE => self.enter(HEAD),
            _ => {}
        }
    }

    pub(crate) fn request_began(&self) {
        self.phase.store(REQUEST | ESTABLISHED, Ordering::Release);
    }

    /// The response is ready, to be written.
    pub(crate) fn answering(&self) {
        self.answered_ms.store(self.now_ms(), Ordering::Release);
        self.enter(ANSWER);
    }

    /// The answer is all with the kernel (or there was none to write); the
    /// connection waits for the next head.
    pub(super) fn idle(&self) {
        self.enter(IDLE);
    }

    /// When the last answer was ready, if there was one.
    fn answered_at(&self) -> Option<Instant> {
        let ms = self.answered_ms.load(Ordering::Acquire);
        (ms != NONE).then(|| self.accepted + Duration::from_millis(ms))
    }

    /// The last answer has been ready for longer than [`ANSWER_GRACE`].
    pub(crate) fn answer_overdue(&self) -> bool {
        self.answered_at()
            .is_some_and(|at| at.elapsed() >= ANSWER_GRACE)
    }

    pub(super) fn set_write_blocked(&self, blocked: bool) {
        self.write_blocked.store(blocked, Ordering::Release);
    }

    /// How the connection ranks for eviction at the connection cap, first
    /// evicted first; `None` while a request is in the handler, or its
    /// answer is being written for less than [`ANSWER_GRACE`], which are
    /// never cut.
    /// - First, connections that have never sent a request and have kept the
    ///   server waiting on them for longer than [`NEW_GRACE`] (oldest
    ///   first), and those whose answer has waited unread past the grace
    ///   (since that answer was ready). A client that connects and sends
    ///   nothing, or a hello and nothing after the server's flight (a flood
    ///   of handshakes that never finish), goes before any connection that
    ///   has carried a request: past the cap, a flood of new connections
    ///   evicts its own, not the apiserver's idle keep-alive connections.
    /// - Then connections between requests, longest idle first. So a flood
    ///   of connections that each sent one request and sit idle cannot
    ///   hold every slot; the apiserver simply reconnects.
    /// - Then new connections within [`NEW_GRACE`]: a new client's
    ///   handshake and first request are not the first to go.
    /// - Then connections whose next head is arriving, oldest head first:
    ///   the apiserver sends a head in one piece, so only a client that
    ///   trickles its head stays there.
    /// - Last, connections that fell idle within [`REUSE_GRACE`]: a client
    ///   that sends its reviews one after another is about to write on
    ///   them.
    ///
    /// [`ConnState::may_close_now`] has the last word on the one chosen.
    pub fn rank(&self) -> Option<Rank> {
        self.rank_at(Instant::now())
    }

    /// [`ConnState::rank`] as of `now` (one clock read for a scan of all).
    pub fn rank_at(&self, now: Instant) -> Option<Rank> {
        let (tier, since) = match (self.established(), self.phase()) {
            (_, ANSWER) if self.answer_overdue() => (0, self.answered_at()?),
            (_, REQUEST | ANSWER) => return None,
            (false, _) if self.waited_on_client(now) >= self.grace() => (0, self.accepted),
            (false, _) => (2, self.accepted),
            (true, IDLE) if now.saturating_duration_since(self.since()) < REUSE_GRACE => {
                (4, self.since())
            }
            (true, IDLE) => (1, self.since()),
            (true, _) => (3, self.since()),
        };
        Some(Rank { tier, since })
    }

    fn grace(&self) -> Duration {
        if self.patient.load(Ordering::Acquire) {
            PATIENT_GRACE
        } else {
            NEW_GRACE
        }
    }

    /// How long the connection has been idle between requests, if it is.
    pub(super) fn idle_for(&self) -> Option<Duration> {
        let idle = self.phase() == IDLE && !self.write_blocked.load(Ordering::Acquire);
        idle.then(|| self.since().elapsed())
    }

    /// Whether the connection chosen for eviction may be closed now, as the
    /// kernel sees its socket. One whose answer the client has not taken
    /// yet (bytes still in the send queue), for less than the grace, is
    /// kept: closing it would lose an answered review. One with a request
    /// waiting in its socket is kept too, unless its answers have waited
    /// unread past the grace (a client that pipelines and never reads).
    pub fn may_close_now(&self) -> bool {
        if self.phase() == ANSWER {
            return self.answer_overdue();
        }
        if self.unsent() {
            return self.answer_overdue();
        }
        !self.bytes_waiting()
    }

    /// Whether the socket's send queue holds bytes the client has not
    /// acknowledged: an answer written but not taken.
    fn unsent(&self) -> bool {
        let fd = self.fd.load(Ordering::Acquire);
        if fd < 0 {
            return false;
        }
        let mut queued: libc::c_int = 0;
        // SAFETY: TIOCOUTQ (SIOCOUTQ on a TCP socket) writes one int, the
        // bytes in the send queue, into a local. On a descriptor reused
        // since (see `bytes_waiting`) it fails or reads another socket's
        // count, which is merely wrong once.
        let ok = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &raw mut queued) } == 0;
        ok && queued > 0
    }

    /// Closes the connection from outside its task.
    pub fn close(&self) {
        self.close.set();
    }

    /// Resolves once [`ConnState::close`] was called.
    pub async fn closed_by_server(&self) {
        self.close.wait().await;
    }

    /// Whether bytes wait in the socket that nothing has read yet: a
    /// request the client has sent, which closing now would lose.
    pub fn bytes_waiting(&self) -> bool {
        let fd = self.fd.load(Ordering::Acquire);
        if fd < 0 {
            return false;
        }
        let mut byte = 0u8;
        // SAFETY: a one-byte peek into a local buffer, which never blocks
        // and consumes nothing. The descriptor is this connection's socket
        // while the connection lives; should it have just closed and the
        // number been reused, the peek reads another descriptor's state
        // without changing it, and the answer is merely wrong once.
        let n = unsafe {
            libc::recv(
                fd,
                (&raw mut byte).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n > 0
    }
}

/// Set once; wakes every waiter.
#[derive(Default)]
struct Flag {
    set: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Flag {
    fn set(&self) {
        self.set.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    async fn wait(&self) {
        let notified = self.notify.notified();
        if !self.set.load(Ordering::Acquire) {
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases() {
        let s = ConnState::new();
        assert_eq!(s.phase(), NEW);
        assert!(!s.established());
        s.bytes_read();
        assert_eq!(s.phase(), HEAD);
        assert_eq!(
            s.head_deadline(Duration::ZERO),
            s.accepted,
            "from the accept"
        );
        s.request_began();
        assert!(s.established());
        assert_eq!(s.rank(), None, "a request in flight is never evicted");
        s.answering();
        assert_eq!(s.phase(), ANSWER);
        assert_eq!(s.rank(), None, "nor an answer the client is taking");
        assert!(!s.may_close_now());

        s.set_write_blocked(true);
        assert!(s.idle_for().is_none());
        s.set_write_blocked(false);
        s.idle();
        assert_eq!(s.phase(), IDLE);
        assert!(s.established(), "established is never reset");
        assert!(s.idle_for().is_some());
        s.bytes_read();
        assert_eq!(s.phase(), HEAD);
        assert!(s.idle_for().is_none());
    }

    #[test]
    fn an_answer_left_unread_past_the_grace_is_evictable() {
        let s = ConnState::new();
        s.request_began();
        s.answering();
        assert_eq!(s.rank(), None);
        // Ready longer ago than the grace (the clock moved on).
        let s = ConnState {
            accepted: s.accepted.checked_sub(2 * ANSWER_GRACE).unwrap(),
            ..Arc::into_inner(s).unwrap()
        };
        assert!(s.answer_overdue());
        let rank = s.rank().expect("evictable");
        assert_eq!(rank.tier, 0);
        assert!(rank.since < Instant::now().checked_sub(ANSWER_GRACE).unwrap());
        assert!(s.may_close_now(), "whatever waits in its socket");
    }

    /// A connection that carried a request and fell idle `ago`.
    fn idle_since(ago: Duration) -> Arc<ConnState> {
        let s = ConnState {
            accepted: Instant::now().checked_sub(10 * REUSE_GRACE).unwrap(),
            ..Arc::into_inner(ConnState::new()).unwrap()
        };
        s.request_began();
        s.idle();
        let ago = u64::try_from(ago.as_millis()).unwrap();
        s.since_ms.fetch_sub(ago, Ordering::AcqRel);
        Arc::new(s)
    }

    #[test]
    fn eviction_takes_silent_new_connections_then_the_longest_idle_then_trickled_heads_then_those_in_use()
     {
        let idle_long = idle_since(3 * REUSE_GRACE);
        let idle_short = idle_since(2 * REUSE_GRACE);
        // Its answer just taken: its client is about to write on it.
        let in_use = idle_since(Duration::ZERO);
        let trickling = ConnState::new();
        trickling.request_began();
        trickling.idle();
        trickling.bytes_read();
        let stranger = ConnState::new();
        // A connection that has sent nothing for longer than the grace (a
        // hello that never finishes, accepted earlier).
        let silent = ConnState {
            accepted: Instant::now().checked_sub(2 * NEW_GRACE).unwrap(),
            ..Arc::into_inner(ConnState::new()).unwrap()
        };
        let silent = Arc::new(silent);
        let in_flight = ConnState::new();
        in_flight.request_began();
        assert_eq!(in_flight.rank(), None);
        let mut ranked = [
            &in_use,
            &trickling,
            &idle_short,
            &stranger,
            &idle_long,
            &silent,
        ];
        ranked.sort_by_key(|s| s.rank());
        let order: Vec<*const ConnState> = ranked.iter().map(|s| Arc::as_ptr(s)).collect();
        let expected: Vec<*const ConnState> = [
            &silent,
            &idle_long,
            &idle_short,
            &stranger,
            &trickling,
            &in_use,
        ]
        .iter()
        .map(|s| Arc::as_ptr(s))
        .collect();
        assert_eq!(order, expected);
    }

    #[test]
    fn bytes_waiting_sees_what_the_client_sent_and_nothing_else() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let s = ConnState::new();
        assert!(!s.bytes_waiting(), "unknown socket");
        s.set_fd(server.as_raw_fd());
        assert!(!s.bytes_waiting());
        client.write_all(b"GET").unwrap();
        let started = Instant::now();
        while !s.bytes_waiting() {
            assert!(started.elapsed() < Duration::from_secs(5));
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(s.bytes_waiting(), "a peek consumes nothing");
        s.closed();
        assert!(!s.bytes_waiting());
    }
}
