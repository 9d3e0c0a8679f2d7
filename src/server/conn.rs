//! One connection: TLS handshake (admission port only), then HTTP/1.1 with
//! the per-connection bounds (contract: limits.head-timeout,
//! limits.idle-timeout, limits.write-timeout).
//!
//! - A new connection gets [`Tuning::head_timeout`] for its handshake plus
//!   its first request head; a later request gets it from the first byte of
//!   its head. A client that trickles header bytes is cut off there.
//! - Between requests only the idle timeout runs (hyper's header timer,
//!   which starts as soon as hyper waits for a head).
//! - A response write that makes no progress for [`Tuning::write_timeout`]
//!   closes the connection (a client that pipelines and never reads).
//! - At shutdown, a request on its way is read and answered before the
//!   connection closes, and an idle one closes only when nothing is on its
//!   way ([`at_shutdown`]).
//!
//! [`ConnIo`] enforces the head deadline and the write timeout beneath
//! hyper; [`Tracked`] tells it where requests begin and end; both record it
//! in the connection's [`ConnState`].

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Sleep;

use super::settings::Tuning;
use super::shutdown::stopped;

mod drained;
mod forward;
mod state;

pub(crate) use drained::Drained;
pub(crate) use forward::forward_io;

#[cfg(test)]
pub(crate) use state::ANSWER_GRACE;
use state::{ANSWER, HEAD, IDLE, NEW};
pub(crate) use state::{ConnState, Rank};

/// The transport beneath hyper, with the head deadline and write timeout.
pub(crate) struct ConnIo<T> {
    inner: T,
    state: Arc<ConnState>,
    head_timeout: Duration,
    write_timeout: Duration,
    read_timer: Option<Pin<Box<Sleep>>>,
    write_timer: Option<Pin<Box<Sleep>>>,
}

impl<T> ConnIo<T> {
    pub fn new(inner: T, state: Arc<ConnState>, tuning: &Tuning) -> Self {
        ConnIo {
            inner,
            state,
            head_timeout: tuning.head_timeout,
            write_timeout: tuning.write_timeout,
            read_timer: None,
            write_timer: None,
        }
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_owned())
}

/// Polls `timer`, (re)armed for `deadline`; ready once it has passed.
fn expired(timer: &mut Option<Pin<Box<Sleep>>>, deadline: Instant, cx: &mut Context<'_>) -> bool {
    let deadline = tokio::time::Instant::from_std(deadline);
    let sleep = match timer {
        Some(sleep) => {
            if sleep.deadline() != deadline {
                sleep.as_mut().reset(deadline);
            }
            sleep
        }
        None => timer.insert(Box::pin(tokio::time::sleep_until(deadline))),
    };
    sleep.as_mut().poll(cx).is_ready()
}

impl<T: AsyncRead + Unpin> AsyncRead for ConnIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let phase = this.state.phase();
        let filled = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if (phase == NEW || phase == IDLE) && buf.filled().len() > filled {
                    this.state.bytes_read();
                }
                Poll::Ready(result)
            }
            Poll::Pending if phase == NEW || phase == HEAD => {
                let deadline = this.state.head_deadline(this.head_timeout);
                if expired(&mut this.read_timer, deadline, cx) {
                    return Poll::Ready(Err(timed_out("request head not received in time")));
                }
                Poll::Pending
            }
            Poll::Pending => {
                this.read_timer = None;
                Poll::Pending
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> ConnIo<T> {
    /// Runs a write-side poll under the write timeout: the clock starts when
    /// the transport first cannot take more and stops at any progress.
    fn write_op<R>(
        &mut self,
        cx: &mut Context<'_>,
        op: impl FnOnce(Pin<&mut T>, &mut Context<'_>) -> Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        match op(Pin::new(&mut self.inner), cx) {
            Poll::Ready(result) => {
                if self.write_timer.take().is_some() {
                    self.state.set_write_blocked(false);
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let deadline = if let Some(sleep) = &self.write_timer {
                    sleep.deadline().into_std()
                } else {
                    self.state.set_write_blocked(true);
                    Instant::now() + self.write_timeout
                };
                if expired(&mut self.write_timer, deadline, cx) {
                    return Poll::Ready(Err(timed_out("response not read by the client in time")));
                }
                Poll::Pending
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ConnIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.write_op(cx, |io, cx| io.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.write_op(cx, |io, cx| io.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// hyper flushes once its buffer is empty: an answer ready before is
    /// then all with the kernel, and the connection idle.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = self.write_op(cx, AsyncWrite::poll_flush);
        if matches!(flushed, Poll::Ready(Ok(()))) && self.state.phase() == ANSWER {
            self.state.idle();
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.write_op(cx, AsyncWrite::poll_shutdown)
    }
}

/// A hyper service that marks where each request begins and ends in the
/// connection's [`ConnState`].
#[derive(Clone)]
pub(crate) struct Tracked<S> {
    inner: S,
    state: Arc<ConnState>,
    peer: std::net::IpAddr,
}

/// The connection a request came on, in the request's extensions: the
/// budget closes it if its answer waits unread when memory is short, and
/// the review thread charges its address for a large review.
#[derive(Clone)]
pub(crate) struct ConnHandle {
    pub state: Arc<ConnState>,
    pub peer: std::net::IpAddr,
}

/// Marks the answer ready when the response is (or the request is
/// dropped); once written, the connection is idle, and the next head's
/// bytes then start its deadline.
struct RequestGuard {
    state: Arc<ConnState>,
    done: bool,
}

impl RequestGuard {
    fn done(&mut self) {
        if !self.done {
            self.done = true;
            self.state.answering();
        }
    }
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.done();
    }
}

pin_project_lite::pin_project! {
    pub(crate) struct TrackedFuture<F> {
        #[pin]
        inner: F,
        guard: RequestGuard,
    }
}

impl<F: Future> Future for TrackedFuture<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let out = ready!(this.inner.poll(cx));
        this.guard.done();
        Poll::Ready(out)
    }
}

impl<S> hyper::service::Service<hyper::Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<hyper::Request<Incoming>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    fn call(&self, mut request: hyper::Request<Incoming>) -> Self::Future {
        self.state.request_began();
        request.extensions_mut().insert(ConnHandle {
            state: self.state.clone(),
            peer: self.peer,
        });
        TrackedFuture {
            inner: self.inner.call(request),
            guard: RequestGuard {
                state: self.state.clone(),
                done: false,
            },
        }
    }
}

/// At shutdown, an idle keep-alive connection is closed once it has been
/// idle this long with nothing waiting in its socket. A client that has
/// just been answered and sends its next request at once is read and
/// answered (with `Connection: close`) rather than closed under: Go's
/// client, the apiserver's, does not retry a POST that met a closed
/// connection. A connection idle longer than this has no request on its
/// way, except one written in the instant of the close, which no HTTP/1.1
/// server can tell from none.
const CLOSE_IDLE_AFTER: Duration = Duration::from_millis(250);
/// How often a connection is looked at again while shutdown waits for it.
const SHUTDOWN_CHECK: Duration = Duration::from_millis(50);

/// What shutdown does with a connection right now.
enum AtShutdown {
    /// Idle long enough with nothing on its way: close it.
    Close,
    /// A head or a request is on its way: answer it, then close.
    Finish,
    /// A new connection before its first head, a response still being
    /// written, or an idle one not idle for long: look again after this.
    Wait(Duration),
}

fn at_shutdown(state: &ConnState) -> AtShutdown {
    match (state.phase(), state.idle_for()) {
        (NEW, _) | (IDLE, None) => AtShutdown::Wait(SHUTDOWN_CHECK),
        (IDLE, Some(idle)) if idle < CLOSE_IDLE_AFTER => {
            AtShutdown::Wait(CLOSE_IDLE_AFTER.saturating_sub(idle))
        }
        // Read at the next look: the request came just in time.
        (IDLE, Some(_)) if state.bytes_waiting() => AtShutdown::Wait(SHUTDOWN_CHECK),
        (IDLE, Some(_)) => AtShutdown::Close,
        _ => AtShutdown::Finish,
    }
}

/// What every connection of one listener shares.
pub(crate) struct ConnSettings<S> {
    pub http: hyper::server::conn::http1::Builder,
    pub service: S,
    pub tuning: Tuning,
}

/// hyper's read buffer holds request heads (bodies stream through it to the
/// handler, which accounts for them in the body budget). Its default of
/// about 400 KiB per connection would let 1,024 connections pin 400 MiB;
/// 16 KiB is four times the largest head the apiserver sends.
const MAX_HTTP_BUF: usize = 16 * 1024;

pub(crate) fn http_builder(tuning: &Tuning) -> hyper::server::conn::http1::Builder {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(tuning.idle_timeout)
        .max_buf_size(MAX_HTTP_BUF)
        .keep_alive(true);
    http
}

impl<S> ConnSettings<S>
where
    S: hyper::service::Service<hyper::Request<Incoming>, Response = axum::response::Response>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: std::error::Error + Send + Sync + 'static,
{
    /// HTTP/1.1 until the client closes, a bound fires, or shutdown closes
    /// the connection once nothing is on its way ([`at_shutdown`]).
    pub async fn serve_http<T>(
        &self,
        io: T,
        state: Arc<ConnState>,
        peer: SocketAddr,
        stop: &mut watch::Receiver<bool>,
    ) where
        T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let io = TokioIo::new(ConnIo::new(io, state.clone(), &self.tuning));
        let service = Tracked {
            inner: self.service.clone(),
            state: state.clone(),
            peer: peer.ip(),
        };
        let connection = self.http.serve_connection(io, service);
        let mut connection = std::pin::pin!(connection);
        let result = tokio::select! {
            result = connection.as_mut() => result,
            () = state.closed_by_server() => {
                tracing::debug!(%peer, "connection closed to free the memory of its unread answer");
                return;
            }
            () = stopped(stop) => {
                let mut finishing = false;
                loop {
                    let wait = match at_shutdown(&state) {
                        AtShutdown::Close => {
                            connection.as_mut().graceful_shutdown();
                            break connection.await;
                        }
                        AtShutdown::Finish => {
                            if !finishing {
                                // Keep-alive off: closed once this request
                                // is answered, and the answer says so.
                                connection.as_mut().graceful_shutdown();
                                finishing = true;
                            }
                            SHUTDOWN_CHECK
                        }
                        AtShutdown::Wait(wait) => wait,
                    };
                    tokio::select! {
                        result = connection.as_mut() => break result,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        };
        if let Err(e) = result {
            tracing::debug!(%peer, error = %e, "connection ended with an error");
        }
    }
}
