//! One memory budget for request bodies being buffered, shared by every
//! connection (contract: limits.body-budget).
//!
//! Without it, N connections that each send most of a 7 MiB body and stall
//! hold N × 7 MiB until their deadlines, which a few dozen connections turn
//! into an OOM kill. A body is charged for the bytes it has received, chunk
//! by chunk as they arrive (its buffer grows by doubling, and the budget is
//! charged for the buffer), never for the length it declares: 150
//! connections that declare 256 KiB and send one byte hold 150 bytes, not
//! 37.5 MiB. A chunk that cannot be charged first sheds the slowest readers
//! (see [`Pool::shed`]), else waits, unread (so TCP pushes back on its
//! sender), until others finish or its request deadline answers 503.
//!
//! The budget is split in two pools so that large bodies cannot starve small
//! ones: bodies that declare more than [`LARGE_BODY_BYTES`] (or, undeclared,
//! grow past it) draw only from the large pool (three quarters), the rest
//! only from the small pool. The apiserver's pod reviews are a few KiB to a
//! few tens of KiB, so they keep flowing however many large bodies are
//! stalled.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::Bytes;
use http_body_util::BodyExt;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use super::conn::ConnState;
use super::settings::MAX_BODY_BYTES;

/// Bodies larger than this draw from the large pool.
pub const LARGE_BODY_BYTES: usize = 256 * 1024;

/// A body younger than this is never shed: its rate is not known yet.
const SHED_MIN_AGE: Duration = Duration::from_millis(100);
/// A body that averages this rate or more since its request began is never
/// shed. The apiserver sends a review in one burst, far faster; a client
/// that sends a burst and stalls falls below it within a few hundred
/// milliseconds.
const SHED_BELOW_BYTES_PER_SECOND: f64 = 1024.0 * 1024.0;
/// How often a body that waits while holding budget looks again for slower
/// ones to shed, so that bodies that all wait for each other cannot stall
/// until their deadlines.
const SHED_RETRY: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("request body is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    #[error("cannot read the request body: {0}")]
    Read(String),
    #[error(
        "request body arrived too slowly while the server was short of memory for request bodies"
    )]
    Shed,
}

pub struct BodyBudget {
    small: Pool,
    large: Pool,
    /// Body bytes charged right now, across both pools (a metric).
    buffered: Gauge,
    /// Answer bytes charged right now (a metric).
    answers: Gauge,
}

/// Budget held by one buffered body, then by its answer until the answer
/// is written ([`answer`]); released when dropped.
pub struct Reservation(Held);

impl BodyBudget {
    /// `total` bytes, of which a quarter is kept for small bodies.
    pub fn new(total: u64, buffered: Gauge, answers: Gauge) -> Self {
        let large = total / 4 * 3;
        let small = total - large;
        BodyBudget {
            small: Pool::new(small),
            large: Pool::new(large),
            buffered,
            answers,
        }
    }

    /// Bytes currently free in the (small, large) pools.
    #[cfg(test)]
    pub fn available(&self) -> (usize, usize) {
        (
            self.small.permits.available_permits(),
            self.large.permits.available_permits(),
        )
    }

    /// Reads the whole body, charging its bytes as they arrive. `declared`
    /// is the request's `Content-Length`, already checked against the
    /// maximum.
    pub async fn read(
        self: &Arc<Self>,
        mut body: Body,
        declared: Option<u64>,
    ) -> Result<(Bytes, Reservation), BodyError> {
        let declared = declared
            .map(usize::try_from)
            .transpose()
            .map_err(|_| BodyError::TooLarge)?;
        let limit = declared.unwrap_or(MAX_BODY_BYTES);
        let large = declared.is_some_and(|d| d > LARGE_BODY_BYTES);
        let mut held = Held::new(self.clone(), large);
        // Most bodies arrive in one chunk; keep it as is rather than copy.
        let mut single: Option<Bytes> = None;
        let mut buf: Vec<u8> = Vec::new();
        let mut received = 0;
        loop {
            let frame = if held.registered {
                tokio::select! {
                    frame = body.frame() => frame,
                    () = held.reader.shed.notified() => return Err(BodyError::Shed),
                }
            } else {
                body.frame().await
            };
            let Some(frame) = frame else { break };
            let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
            let Ok(chunk) = frame.into_data() else {
                continue; // trailers carry nothing we read
            };
            received += chunk.len();
            if received > limit {
                return Err(BodyError::TooLarge);
            }
            if received == chunk.len() {
                held.grow(received).await?;
                single = Some(chunk);
            } else {
                if received > buf.capacity() {
                    // Double, so that a body in many chunks is copied a few
                    // times only; never past what it may send.
                    let first = single.as_ref().map_or(0, Bytes::len);
                    let capacity = received.max(2 * buf.capacity().max(first)).min(limit);
                    held.grow(capacity).await?;
                    buf.reserve_exact(capacity - buf.len());
                }
                if let Some(first) = single.take() {
                    buf.extend_from_slice(&first);
                }
                buf.extend_from_slice(&chunk);
            }
            held.reader.received.store(received, Ordering::Relaxed);
            if held.reader.shed.load() {
                return Err(BodyError::Shed);
            }
            // A body still to come can be shed while it waits for its sender.
            if declared != Some(received) && !held.registered {
                held.register();
            }
        }
        held.deregister();
        let bytes = single.unwrap_or_else(|| Bytes::from(buf));
        Ok((bytes, Reservation(held)))
    }

    fn pool(&self, large: bool) -> &Pool {
        if large { &self.large } else { &self.small }
    }
}

/// Answers up to this size never wait for budget: charged if it has room,
/// else held as they are (with what their body held). The apiserver's
/// answers are a few KiB, so an attacker who fills the budget with
/// unread answers cannot delay them; what is held outside the budget is
/// at most this much per connection (16 MiB at the default 1,024).
/// Larger answers are charged to the large pool, so that the small one
/// stays for small bodies and answers.
pub const SMALL_ANSWER_BYTES: usize = 16 * 1024;

/// An answer as the budget lists it, so that a shorter one can close its
/// connection.
struct Holder {
    conn: Option<Arc<ConnState>>,
    since: Instant,
    bytes: usize,
    closing: AtomicBool,
}

/// One pool: its bytes, and the bodies still arriving that hold some of
/// them (those a body short of budget may shed).
struct Pool {
    permits: Arc<Semaphore>,
    readers: Mutex<Vec<Arc<Reader>>>,
    /// Answers charged to this pool and not yet all written.
    answers: Mutex<Vec<Arc<Holder>>>,
}

/// A body being read, as the pool sees it.
struct Reader {
    started: Instant,
    received: AtomicUsize,
    /// The bytes it holds; taken whole when it is shed.
    permits: Mutex<Option<OwnedSemaphorePermit>>,
    shed: Flag,
}

/// Set once, by the body that sheds this one; the shed body's read wakes up
/// and answers.
#[derive(Default)]
struct Flag {
    set: AtomicBool,
    notify: Notify,
}

impl Flag {
    fn set(&self) {
        self.set.store(true, Ordering::Release);
        self.notify.notify_one();
    }

    fn load(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    async fn notified(&self) {
        if !self.load() {
            self.notify.notified().await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code path panics while holding these locks; a poisoned one is still
    // consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Reader {
    /// Average bytes per second since its request began, if it is old
    /// enough to tell; `None` for a body that may not be shed.
    fn rate(&self, now: Instant) -> Option<f64> {
        let age = now.saturating_duration_since(self.started);
        if age < SHED_MIN_AGE || self.shed.load() {
            return None;
        }
        #[expect(
            clippy::cast_precision_loss,
            reason = "a byte count under 7 MiB is exact in f64"
        )]
        let rate = self.received.load(Ordering::Relaxed) as f64 / age.as_secs_f64();
        (rate < SHED_BELOW_BYTES_PER_SECOND).then_some(rate)
    }
}

impl Pool {
    fn new(bytes: u64) -> Self {
        Pool {
            permits: Arc::new(Semaphore::new(
                usize::try_from(bytes).unwrap_or(usize::MAX >> 4),
            )),
            readers: Mutex::new(Vec::new()),
            answers: Mutex::new(Vec::new()),
        }
    }

    /// Takes the bytes of the slowest readers other than `me`, slowest
    /// first, until `need` bytes are taken or no reader is slow enough to
    /// shed; each shed body is answered 503 and its connection closed. The
    /// bytes taken stay charged (they move from one body to another).
    fn shed(&self, need: usize, me: &Reader) -> Option<OwnedSemaphorePermit> {
        let readers = lock(&self.readers);
        let now = Instant::now();
        let mut slow: Vec<(f64, &Arc<Reader>)> = readers
            .iter()
            .filter(|r| !std::ptr::eq(r.as_ref(), me))
            .filter_map(|r| r.rate(now).map(|rate| (rate, r)))
            .collect();
        slow.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut taken: Option<OwnedSemaphorePermit> = None;
        for (_, victim) in slow {
            if taken.as_ref().map_or(0, OwnedSemaphorePermit::num_permits) >= need {
                break;
            }
            victim.shed.set();
            if let Some(permits) = lock(&victim.permits).take() {
                match &mut taken {
                    Some(t) => t.merge(permits),
                    None => taken = Some(permits),
                }
            }
        }
        if let Some(count) = taken.as_ref().map(OwnedSemaphorePermit::num_permits) {
            tracing::debug!(bytes = count, "slow request bodies shed to make room");
        }
        taken
    }
}

/// What one body (then its answer) holds so far, in which pool.
struct Held {
    budget: Arc<BodyBudget>,
    reader: Arc<Reader>,
    bytes: usize,
    large: bool,
    registered: bool,
    /// Whose answer this is, once it is one: listed in the pool's answers.
    answer: Option<Arc<Holder>>,
}

impl Held {
    fn new(budget: Arc<BodyBudget>, large: bool) -> Self {
        Held {
            budget,
            reader: Arc::new(Reader {
                started: Instant::now(),
                received: AtomicUsize::new(0),
                permits: Mutex::new(None),
                shed: Flag::default(),
            }),
            bytes: 0,
            large,
            registered: false,
            answer: None,
        }
    }

    fn register(&mut self) {
        lock(&self.budget.pool(self.large).readers).push(self.reader.clone());
        self.registered = true;
    }

    fn deregister(&mut self) {
        if self.registered {
            let mut readers = lock(&self.budget.pool(self.large).readers);
            if let Some(i) = readers.iter().position(|r| Arc::ptr_eq(r, &self.reader)) {
                readers.swap_remove(i);
            }
            self.registered = false;
        }
    }

    /// Holds at least `len` bytes, moving to the large pool when `len`
    /// crosses [`LARGE_BODY_BYTES`] (an answer's, when it crosses
    /// [`SMALL_ANSWER_BYTES`]: the small pool is for the small
    /// bodies and answers the apiserver sends and reads).
    async fn grow(&mut self, len: usize) -> Result<(), BodyError> {
        let budget = self.budget.clone();
        let large_above = if self.answer.is_some() {
            SMALL_ANSWER_BYTES
        } else {
            LARGE_BODY_BYTES
        };
        let to_large = !self.large && len > large_above;
        if len <= self.bytes && !to_large {
            return Ok(());
        }
        if to_large {
            // Take the whole size from the large pool before giving back the
            // small pool's share, so the body is never unaccounted.
            let permits = self.acquire(&budget.large, len).await?;
            let registered = self.registered;
            self.deregister();
            let small = lock(&self.reader.permits).replace(permits);
            self.release(small);
            self.large = true;
            if registered {
                self.register();
            }
        } else {
            let more = self
                .acquire(budget.pool(self.large), len - self.bytes)
                .await?;
            let mut held = lock(&self.reader.permits);
            match held.as_mut() {
                Some(p) => p.merge(more),
                None => *held = Some(more),
            }
        }
        self.bytes = len;
        if self.reader.shed.load() {
            return Err(BodyError::Shed);
        }
        Ok(())
    }

    /// `bytes` from `pool`: at once if free, else taken from slower bodies,
    /// else waited for (and, while this body holds budget, looked for again
    /// among slower bodies every [`SHED_RETRY`]).
    async fn acquire(&self, pool: &Pool, bytes: usize) -> Result<OwnedSemaphorePermit, BodyError> {
        let n = u32::try_from(bytes).map_err(|_| BodyError::TooLarge)?;
        if let Ok(p) = pool.permits.clone().try_acquire_many_owned(n) {
            self.gauge().inc_by(gauge_value(bytes));
            return Ok(p);
        }
        let mut taken = Charged {
            permits: pool.shed(bytes, &self.reader),
            buffered: self.gauge(),
        };
        // Whatever waits for budget closes connections whose answers wait
        // unread past the grace; their budget comes back as they end.
        pool.close_unread_answers(bytes.saturating_sub(taken.count()));
        loop {
            let have = taken.count();
            if have >= bytes
                && let Some(mut permits) = taken.permits.take()
            {
                self.release(permits.split(have - bytes));
                return Ok(permits);
            }
            let rest = u32::try_from(bytes - have).map_err(|_| BodyError::TooLarge)?;
            let retry = tokio::time::sleep(SHED_RETRY);
            tokio::select! {
                acquired = pool.permits.clone().acquire_many_owned(rest) => {
                    // The semaphores are never closed.
                    let more = acquired.map_err(|_| BodyError::Read("server is shutting down".into()))?;
                    self.gauge().inc_by(i64::from(rest));
                    taken.add(more);
                }
                () = self.reader.shed.notified() => return Err(BodyError::Shed),
                () = retry => {
                    // Only a body that holds budget sheds others: one that
                    // holds none takes no one's place.
                    if (self.registered || self.answer.is_some())
                        && let Some(more) = pool.shed(bytes - have, &self.reader)
                    {
                        taken.add(more);
                    }
                    pool.close_unread_answers(bytes.saturating_sub(taken.count()));
                }
            }
        }
    }

    /// Gives `permits` back to their pool.
    fn release(&self, permits: Option<OwnedSemaphorePermit>) {
        if let Some(p) = permits {
            self.gauge().dec_by(gauge_value(p.num_permits()));
        }
    }

    /// The gauge this charge counts in: bodies', or answers' once it is one.
    fn gauge(&self) -> &Gauge {
        if self.answer.is_some() {
            &self.budget.answers
        } else {
            &self.budget.buffered
        }
    }
}

/// Bytes gathered for a body while it waits: given back (and taken off
/// the gauge) if the wait ends any other way than with all of them.
struct Charged<'a> {
    permits: Option<OwnedSemaphorePermit>,
    buffered: &'a Gauge,
}

impl Charged<'_> {
    fn count(&self) -> usize {
        self.permits
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits)
    }

    fn add(&mut self, more: OwnedSemaphorePermit) {
        match &mut self.permits {
            Some(p) => p.merge(more),
            None => self.permits = Some(more),
        }
    }
}

impl Drop for Charged<'_> {
    fn drop(&mut self) {
        self.buffered.dec_by(gauge_value(self.count()));
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Still registered when dropped mid-read (an error, or the request
        // deadline dropped the read).
        self.deregister();
        self.forget_answer();
        let permits = lock(&self.reader.permits).take();
        self.release(permits);
    }
}

fn gauge_value(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

pub(crate) mod answer;
#[cfg(test)]
mod tests;
