//! Answers in the same memory budget as the bodies they answer.
//!
//! An answer can be larger than its request (a patch that carries the
//! pod's entrypoint, base64-encoded), and a client that never reads it
//! makes the server hold it until the write timeout. So once a review is
//! done its body's charge becomes its answer's ([`Reservation::into_answer`]),
//! held until the answer's bytes are all with the kernel ([`Answer`] owns
//! both, and hyper drops it then). An answer that does not fit first sheds
//! slow bodies, as a body does, then closes the connections whose answers
//! have waited unread past the grace (`conn::state::ANSWER_GRACE`), oldest first (the apiserver
//! reads its answers at once), then waits for budget until its request's
//! deadline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::super::conn::ConnState;
use super::{BodyError, Held, Holder, Pool, Reservation, SMALL_ANSWER_BYTES, gauge_value, lock};

impl Reservation {
    /// Charges an answer of `len` bytes instead of the body: the charge is
    /// resized (down at once, up within the budget), then listed so that
    /// an answer short of budget may close `conn` if its answer waits
    /// unread past the grace.
    ///
    /// # Errors
    /// [`BodyError::Shed`] is not returned here (an answer is never shed);
    /// the error of a wait that cannot be satisfied, as for a body.
    pub async fn into_answer(
        mut self,
        len: usize,
        conn: Option<Arc<ConnState>>,
    ) -> Result<Reservation, BodyError> {
        let held = &mut self.0;
        held.deregister();
        // From the bodies' gauge to the answers'.
        let charged = gauge_value(held.bytes);
        held.budget.buffered.dec_by(charged);
        held.budget.answers.inc_by(charged);
        held.answer = Some(Arc::new(Holder {
            conn,
            since: Instant::now(),
            bytes: len,
            closing: AtomicBool::new(false),
        }));
        if len > SMALL_ANSWER_BYTES {
            held.grow(len).await?;
            held.shrink(len);
        } else if len <= held.bytes {
            held.shrink(len);
        } else {
            held.try_grow(len);
        }
        if let Some(holder) = &held.answer {
            lock(&held.budget.pool(held.large).answers).push(holder.clone());
        }
        Ok(self)
    }
}

impl Held {
    /// Holds `len` bytes if the pool has room now; keeps what it holds
    /// otherwise.
    fn try_grow(&mut self, len: usize) {
        let pool = self.budget.pool(self.large);
        let more = len - self.bytes;
        let Ok(n) = u32::try_from(more) else { return };
        if let Ok(permits) = pool.permits.clone().try_acquire_many_owned(n) {
            self.gauge().inc_by(gauge_value(more));
            let mut held = lock(&self.reader.permits);
            match held.as_mut() {
                Some(p) => p.merge(permits),
                None => *held = Some(permits),
            }
            drop(held);
            self.bytes = len;
        }
    }

    /// Gives back all but `len` bytes.
    fn shrink(&mut self, len: usize) {
        if len >= self.bytes {
            return;
        }
        let spare = lock(&self.reader.permits)
            .as_mut()
            .and_then(|p| p.split(self.bytes - len));
        self.release(spare);
        self.bytes = len;
    }

    /// Takes the answer off its pool's list.
    pub(super) fn forget_answer(&self) {
        if let Some(holder) = &self.answer {
            let mut answers = lock(&self.budget.pool(self.large).answers);
            if let Some(i) = answers.iter().position(|a| Arc::ptr_eq(a, holder)) {
                answers.swap_remove(i);
            }
        }
    }
}

impl Pool {
    /// Closes connections whose answers have waited unread past the grace,
    /// oldest first, until the answers being closed hold `need` bytes.
    /// Their budget comes back as their connections end.
    pub(super) fn close_unread_answers(&self, need: usize) {
        let answers = lock(&self.answers);
        let mut overdue: Vec<(&Arc<Holder>, &Arc<ConnState>)> = answers
            .iter()
            .filter_map(|a| a.conn.as_ref().map(|c| (a, c)))
            .filter(|(_, c)| c.answer_overdue())
            .collect();
        overdue.sort_by_key(|(a, _)| a.since);
        let mut freeing = 0;
        let mut closed = 0;
        for (holder, conn) in overdue {
            if freeing >= need {
                break;
            }
            freeing += holder.bytes;
            if !holder.closing.swap(true, Ordering::AcqRel) {
                conn.close();
                closed += 1;
            }
        }
        if closed > 0 {
            tracing::debug!(
                closed,
                bytes = freeing,
                "connections with answers unread past the grace closed to make room"
            );
        }
    }
}

/// An answer's bytes with their charge: the response body. Dropped (and
/// the charge released) when hyper has written it all, or the connection
/// ended.
pub(crate) struct Answer {
    body: Vec<u8>,
    _charge: Reservation,
}

impl Answer {
    pub fn new(body: Vec<u8>, charge: Reservation) -> Self {
        Answer {
            body,
            _charge: charge,
        }
    }
}

impl AsRef<[u8]> for Answer {
    fn as_ref(&self) -> &[u8] {
        &self.body
    }
}
