//! The admission port's TLS handshakes, within their own CPU budget.
//!
//! A handshake costs the server a key exchange and a signature (some
//! 300 µs of CPU) and the client nothing when it sends a ClientHello and
//! never finishes. Run where they arrive, a flood of them queues ahead of
//! the reviews on every async worker, and the accept loop falls behind
//! until the kernel's listen backlog overflows (new connections then wait
//! a second for a SYN retransmit). So the ClientHello is read as any I/O;
//! a hello seen before (a replay, [`replay`]) is refused there. The step
//! that computes then waits for a slot ([`gate`]): a handshake whose
//! address has credit (its handshakes finish, [`credits`]) is computed at
//! once, where it is; the others one at a time on the handshake thread, at
//! a lower priority than the async workers, in turns by address and within
//! bounded waits, and not at all if their client has already gone. So a
//! flood of hellos from any number of pods takes the CPU that is left, and
//! the apiserver's handshakes do not queue behind it.

use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::{LazyConfigAcceptor, StartHandshake};

use super::conn::{ConnState, Drained, forward_io};
use super::heavy::Heavy;
use super::log::{Clean, RateLimit};
#[cfg(test)]
use super::metrics::HANDSHAKE_FAILURE_REASONS;
use super::metrics::Metrics;

mod credits;
mod gate;
mod replay;

use gate::Class;
pub(crate) use gate::Gate;

/// The admission port's TLS side of a connection.
pub(crate) struct TlsSide {
    pub config: Arc<rustls::ServerConfig>,
    pub metrics: Arc<Metrics>,
    pub log_limit: RateLimit,
    pub gate: Gate,
    /// The thread that computes the handshakes without credit, one at a
    /// time, at a lower priority than the async workers ([`gate::Class`]).
    pub computing: Heavy,
}

/// Why a handshake did not complete, before it is a label.
enum Failed {
    Io(io::Error),
    Shed,
    Replayed,
    /// The client closed its connection before its turn came.
    Gone,
}

impl TlsSide {
    /// Handshake within the connection's head deadline; `None` when it
    /// failed (logged, rate-limited, and counted by reason).
    pub async fn handshake(
        &self,
        stream: TcpStream,
        state: &ConnState,
        head_timeout: Duration,
        peer: SocketAddr,
    ) -> Option<TlsStream<Drained>> {
        // Admission responses are small and latency-bound.
        let _ = stream.set_nodelay(true);
        let deadline = tokio::time::Instant::from_std(state.head_deadline(head_timeout));
        let accept = self.accept(stream, peer, state);
        let (reason, error) = match tokio::time::timeout_at(deadline, accept).await {
            Ok(Ok(tls)) => return Some(tls),
            Ok(Err(Failed::Io(e))) => (handshake_failure_reason(&e), e.to_string()),
            Ok(Err(Failed::Shed)) => (
                "shed",
                "too many handshakes waiting for the CPU; this one, among the oldest of those without credit or from its address, was closed"
                    .to_owned(),
            ),
            Ok(Err(Failed::Replayed)) => (
                "replayed",
                "a ClientHello seen before (a replay): closed without computing".to_owned(),
            ),
            Ok(Err(Failed::Gone)) => (
                "eof",
                "the client closed the connection before its handshake's turn".to_owned(),
            ),
            Err(_) => ("timeout", "no TLS handshake within the deadline".to_owned()),
        };
        self.metrics.handshake_failed(reason);
        if let Some(suppressed) = self.log_limit.check() {
            tracing::warn!(
                %peer, reason, error = %Clean(&error), suppressed,
                "TLS handshake failed (a wrong caBundle in the webhook configuration shows as \
                 peer_rejected_certificate)"
            );
        }
        None
    }

    async fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        state: &ConnState,
    ) -> Result<TlsStream<Drained>, Failed> {
        let acceptor = rustls::server::Acceptor::default();
        let hello = Hello::new(Drained(stream));
        let start = LazyConfigAcceptor::new(acceptor, hello)
            .await
            .map_err(Failed::Io)?;
        let StartHandshake { accepted, io, .. } = start;
        if !self.gate.first_time(io.head()) {
            return Err(Failed::Replayed);
        }
        let io = io.into_inner();
        // Waiting for the CPU is the server's doing, not the client's.
        state.server_turn();
        let slot = self.gate.slot(peer.ip()).await.ok_or(Failed::Shed)?;
        if slot.class == Class::Credited {
            state.patient();
        }
        if gone(&io.0) {
            return Err(Failed::Gone);
        }
        // The ClientHello is answered here: key exchange and signature. A
        // credited handshake (its sender's finish) where it is, at the
        // workers' priority; the others on the handshake thread, at a
        // lower one, so that a flood of them gets only the CPU left over.
        let config = self.config.clone();
        let start = move || StartHandshake::from_parts(accepted, io).into_stream(config);
        let class = slot.class;
        let accept = match class {
            Class::Credited => start(),
            Class::Uncredited => self
                .computing
                .run(None, start)
                .await
                .map_err(|e| Failed::Io(io::Error::other(e)))?,
        };
        drop(slot);
        state.client_turn();
        let tls = accept.await.map_err(Failed::Io)?;
        self.gate.finished(peer.ip(), class);
        Ok(tls)
    }
}

/// Whether the client has already closed or reset its connection: a
/// non-blocking peek that reads the end of the stream or an error.
fn gone(stream: &TcpStream) -> bool {
    let mut byte = 0u8;
    // SAFETY: a non-blocking peek of at most one byte into a local, on this
    // connection's own socket, open for as long as `stream`.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            (&raw mut byte).cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    match n {
        0 => true,
        n if n > 0 => false,
        _ => !matches!(
            io::Error::last_os_error().kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
        ),
    }
}

/// The connection while its ClientHello is read: keeps a copy of the
/// hello's first bytes ([`replay::HELLO_HEAD`]), which identify it.
struct Hello {
    io: Drained,
    head: [u8; replay::HELLO_HEAD],
    len: usize,
}

impl Hello {
    fn new(io: Drained) -> Self {
        Hello {
            io,
            head: [0; replay::HELLO_HEAD],
            len: 0,
        }
    }

    /// Keeps what `read` adds to the head, up to its size.
    fn keep(&mut self, read: &[u8]) {
        let take = read.len().min(self.head.len() - self.len);
        self.head[self.len..self.len + take].copy_from_slice(&read[..take]);
        self.len += take;
    }

    fn head(&self) -> &[u8] {
        &self.head[..self.len]
    }

    fn into_inner(self) -> Drained {
        self.io
    }
}

impl AsyncRead for Hello {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.io).poll_read(cx, buf);
        self.keep(&buf.filled()[before..]);
        read
    }
}

forward_io!(impl AsyncWrite for Hello => io);

/// A fixed label for a failed handshake, so a client cannot mint series.
pub(crate) fn handshake_failure_reason(e: &io::Error) -> &'static str {
    use rustls::AlertDescription as A;
    if let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return match tls {
            rustls::Error::AlertReceived(
                A::BadCertificate
                | A::UnknownCA
                | A::CertificateUnknown
                | A::CertificateExpired
                | A::UnsupportedCertificate
                | A::AccessDenied,
            ) => "peer_rejected_certificate",
            rustls::Error::AlertReceived(_) => "alert",
            rustls::Error::NoCertificatesPresented => "no_client_certificate",
            rustls::Error::InvalidCertificate(_) => "invalid_client_certificate",
            rustls::Error::PeerIncompatible(_) | rustls::Error::NoApplicationProtocol => {
                "incompatible"
            }
            _ => "protocol",
        };
    }
    match e.kind() {
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => "eof",
        io::ErrorKind::InvalidData => "protocol",
        _ => "io",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_failures_are_classified() {
        let tls = |e: rustls::Error| io::Error::new(io::ErrorKind::InvalidData, e);
        assert_eq!(
            handshake_failure_reason(&tls(rustls::Error::AlertReceived(
                rustls::AlertDescription::UnknownCA
            ))),
            "peer_rejected_certificate"
        );
        assert_eq!(
            handshake_failure_reason(&tls(rustls::Error::NoCertificatesPresented)),
            "no_client_certificate"
        );
        assert_eq!(
            handshake_failure_reason(&tls(rustls::Error::InvalidMessage(
                rustls::InvalidMessage::InvalidContentType
            ))),
            "protocol"
        );
        assert_eq!(
            handshake_failure_reason(&io::Error::from(io::ErrorKind::UnexpectedEof)),
            "eof"
        );
        for reason in [
            handshake_failure_reason(&io::Error::other("x")),
            "timeout",
            "shed",
            "replayed",
        ] {
            assert!(HANDSHAKE_FAILURE_REASONS.contains(&reason));
        }
    }
}
