//! The admission port's TLS handshakes, within their own CPU budget.
//!
//! A handshake costs the server a key exchange and a signature (some
//! 300 µs of CPU) and the client nothing when it replays a recorded
//! ClientHello. Run where they arrive, a flood of them queues ahead of
//! the reviews on every async worker, and the accept loop falls behind
//! until the kernel's listen backlog overflows (new connections then wait
//! a second for a SYN retransmit). So the ClientHello is read as any I/O,
//! and the step that computes runs with one of [`gate::HANDSHAKE_SLOTS`] slots
//! held: at most that many workers compute handshakes at once, the rest
//! keep answering. Handshakes that wait for a slot take turns by peer
//! address, and each address's wait is bounded ([`gate`]), so a flood
//! from one pod cannot queue the apiserver's handshakes behind it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;
use tokio_rustls::server::TlsStream;

use super::conn::{ConnState, Drained};
use super::log::{Clean, RateLimit};
#[cfg(test)]
use super::metrics::HANDSHAKE_FAILURE_REASONS;
use super::metrics::Metrics;

mod gate;

pub(crate) use gate::Gate;

/// The admission port's TLS side of a connection.
pub(crate) struct TlsSide {
    pub config: Arc<rustls::ServerConfig>,
    pub metrics: Arc<Metrics>,
    pub log_limit: RateLimit,
    pub gate: Gate,
}

/// Why a handshake did not complete, before it is a label.
enum Failed {
    Io(io::Error),
    Shed,
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
        let accept = self.accept(stream, peer);
        let (reason, error) = match tokio::time::timeout_at(deadline, accept).await {
            Ok(Ok(tls)) => return Some(tls),
            Ok(Err(Failed::Io(e))) => (handshake_failure_reason(&e), e.to_string()),
            Ok(Err(Failed::Shed)) => (
                "shed",
                "too many handshakes from this address waiting for the CPU; the oldest was closed"
                    .to_owned(),
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
    ) -> Result<TlsStream<Drained>, Failed> {
        let acceptor = rustls::server::Acceptor::default();
        let start = LazyConfigAcceptor::new(acceptor, Drained(stream))
            .await
            .map_err(Failed::Io)?;
        let slot = self.gate.slot(peer.ip()).await.ok_or(Failed::Shed)?;
        // The ClientHello is answered here: key exchange and signature.
        let accept = start.into_stream(self.config.clone());
        drop(slot);
        accept.await.map_err(Failed::Io)
    }
}

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
        ] {
            assert!(HANDSHAKE_FAILURE_REASONS.contains(&reason));
        }
    }
}
