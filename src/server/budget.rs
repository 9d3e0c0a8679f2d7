//! One memory budget for request bodies being buffered, shared by every
//! connection (SPEC 9).
//!
//! Without it, N connections that each send most of a 7 MiB body and stall
//! hold N × 7 MiB until their deadlines, which a few dozen connections turn
//! into an OOM kill. Bytes are reserved before they are buffered (the whole
//! declared `Content-Length` up front, else chunk by chunk); a body that
//! cannot get its bytes waits, unread (so TCP pushes back on its sender),
//! until others finish or its request deadline answers 503.
//!
//! The budget is split in two pools so that large bodies cannot starve small
//! ones: bodies over [`LARGE_BODY_BYTES`] draw only from the large pool
//! (three quarters), the rest only from the small pool. The apiserver's pod
//! reviews are a few KiB to a few tens of KiB, so they keep flowing however
//! many large bodies are stalled.

use std::sync::Arc;

use axum::body::Body;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::settings::MAX_BODY_BYTES;

/// Bodies larger than this draw from the large pool.
pub const LARGE_BODY_BYTES: usize = 256 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("request body is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    #[error("cannot read the request body: {0}")]
    Read(String),
}

pub struct BodyBudget {
    small: Arc<Semaphore>,
    large: Arc<Semaphore>,
    /// Bytes reserved right now, across both pools (a metric).
    buffered: Gauge,
}

/// Budget held by one buffered body; released when dropped.
pub struct Reservation(#[allow(dead_code)] Held);

impl BodyBudget {
    /// `total` bytes, of which a quarter is kept for small bodies.
    pub fn new(total: u64, buffered: Gauge) -> Self {
        let large = total / 4 * 3;
        let small = total - large;
        BodyBudget {
            small: Arc::new(Semaphore::new(permits(small))),
            large: Arc::new(Semaphore::new(permits(large))),
            buffered,
        }
    }

    /// Bytes currently free in the (small, large) pools.
    #[cfg(test)]
    pub fn available(&self) -> (usize, usize) {
        (
            self.small.available_permits(),
            self.large.available_permits(),
        )
    }

    /// Reads the whole body, reserving its bytes first. `declared` is the
    /// request's `Content-Length`, already checked against the maximum.
    pub async fn read(
        &self,
        mut body: Body,
        declared: Option<u64>,
    ) -> Result<(Bytes, Reservation), BodyError> {
        let mut held = Held {
            bytes: 0,
            large: false,
            permits: None,
            buffered: self.buffered.clone(),
        };
        let mut buf = match declared {
            Some(len) => {
                let len = usize::try_from(len).map_err(|_| BodyError::TooLarge)?;
                held.grow(self, len).await?;
                BytesMut::with_capacity(len)
            }
            None => BytesMut::new(),
        };
        // Most bodies arrive in one chunk; keep it as is rather than copy.
        let mut single: Option<Bytes> = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| BodyError::Read(e.to_string()))?;
            let Ok(chunk) = frame.into_data() else {
                continue; // trailers carry nothing we read
            };
            let len = single.as_ref().map_or(0, Bytes::len) + buf.len() + chunk.len();
            if len > MAX_BODY_BYTES || declared.is_some_and(|d| len as u64 > d) {
                return Err(BodyError::TooLarge);
            }
            held.grow(self, len).await?;
            if single.is_none() && buf.is_empty() {
                single = Some(chunk);
            } else {
                if let Some(first) = single.take() {
                    buf.extend_from_slice(&first);
                }
                buf.extend_from_slice(&chunk);
            }
        }
        let bytes = single.unwrap_or_else(|| buf.freeze());
        Ok((bytes, Reservation(held)))
    }
}

/// What one body holds so far, in which pool.
struct Held {
    bytes: usize,
    large: bool,
    permits: Option<OwnedSemaphorePermit>,
    buffered: Gauge,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.buffered.dec_by(gauge_value(self.bytes));
    }
}

fn gauge_value(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

impl Held {
    /// Holds at least `len` bytes, moving to the large pool when `len`
    /// crosses [`LARGE_BODY_BYTES`].
    async fn grow(&mut self, budget: &BodyBudget, len: usize) -> Result<(), BodyError> {
        if len <= self.bytes {
            return Ok(());
        }
        let large = len > LARGE_BODY_BYTES;
        if large && !self.large {
            // Take the whole size from the large pool before giving back the
            // small pool's share, so the body is never unaccounted.
            let permits = acquire(&budget.large, len).await?;
            self.permits = Some(permits);
            self.large = true;
        } else {
            let pool = if self.large {
                &budget.large
            } else {
                &budget.small
            };
            let more = acquire(pool, len - self.bytes).await?;
            match &mut self.permits {
                Some(p) => p.merge(more),
                None => self.permits = Some(more),
            }
        }
        self.buffered.inc_by(gauge_value(len - self.bytes));
        self.bytes = len;
        Ok(())
    }
}

async fn acquire(pool: &Arc<Semaphore>, bytes: usize) -> Result<OwnedSemaphorePermit, BodyError> {
    let n = u32::try_from(bytes).map_err(|_| BodyError::TooLarge)?;
    // The semaphores are never closed.
    pool.clone()
        .acquire_many_owned(n)
        .await
        .map_err(|_| BodyError::Read("server is shutting down".into()))
}

fn permits(bytes: u64) -> usize {
    usize::try_from(bytes).unwrap_or(usize::MAX >> 4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn body(bytes: &'static [u8]) -> Body {
        Body::from(bytes)
    }

    #[tokio::test]
    async fn small_bodies_flow_while_large_ones_hold_their_pool() {
        let budget = BodyBudget::new(16 * 1024 * 1024, Gauge::default());
        let (small, large) = budget.available();
        assert_eq!((small, large), (4 * 1024 * 1024, 12 * 1024 * 1024));

        // A large body that declares more than the large pool has free waits...
        let big = vec![b'x'; 7 * 1024 * 1024];
        let first = budget
            .read(Body::from(big.clone()), Some(big.len() as u64))
            .await
            .unwrap();
        let waiting = tokio::time::timeout(
            Duration::from_millis(100),
            budget.read(Body::from(big.clone()), Some(big.len() as u64)),
        )
        .await;
        assert!(waiting.is_err(), "the second 7 MiB body must wait");

        // ...while a small review is read at once.
        let (bytes, _r) = tokio::time::timeout(
            Duration::from_millis(100),
            budget.read(body(b"{\"small\":1}"), Some(11)),
        )
        .await
        .expect("small body not starved")
        .unwrap();
        assert_eq!(&bytes[..], b"{\"small\":1}");

        drop(first);
        assert_eq!(budget.available().1, 12 * 1024 * 1024);
    }

    #[tokio::test]
    async fn reservations_are_released_and_limits_hold() {
        let buffered = Gauge::default();
        let budget = BodyBudget::new(16 * 1024 * 1024, buffered.clone());
        let full = budget.available();
        {
            let (_b, _r) = budget.read(body(b"abc"), None).await.unwrap();
            assert_eq!(budget.available().0, full.0 - 3);
            assert_eq!(buffered.get(), 3);
        }
        assert_eq!(budget.available(), full);
        assert_eq!(buffered.get(), 0);
        // A body longer than it declared is refused, not buffered.
        assert!(matches!(
            budget.read(body(b"abcdef"), Some(3)).await,
            Err(BodyError::TooLarge)
        ));
        assert_eq!(budget.available(), full);
    }
}
