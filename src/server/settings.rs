//! What a server is built from: [`ServerSettings`] (addresses, files, clock,
//! token source) and [`Tuning`], the limits and timeouts. `Tuning` is a clap
//! argument group that `serve` flattens, so a new tuning flag is one field
//! here: its doc comment is the `--help` text and its clap default is the
//! production default ([`Tuning::default`] parses an empty command line).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::Parser;

use crate::mutate::{RandomTokens, TokenSource};

use super::tls::TlsFiles;

/// Largest accepted `AdmissionReview` body. The apiserver sends at most two
/// objects (`object` and `oldObject`) of up to 3 MiB each (etcd's default
/// request limit bounds a stored object), plus the envelope (userInfo,
/// options, …), for which 1 MiB is ample: 2 × 3 MiB + 1 MiB = 7 MiB, the
/// same limit controller-runtime uses.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// How the admission time is read; a plain function so tests can pin it.
pub type Clock = fn() -> DateTime<Utc>;

/// Limits and timeouts of both listeners (contract: limits.*, each flag its own
/// rule). Every bound here is what keeps a client that is not the apiserver
/// from holding a resource.
#[derive(Debug, Clone, Parser)]
#[command(no_binary_name = true)]
pub struct Tuning {
    /// Maximum concurrent admission (TLS) connections. At the cap, a new
    /// connection evicts the longest idle one: between requests, or not yet
    /// through its first request (idle since its accept). A connection with
    /// a request in flight is never evicted, and one that fell idle within
    /// the last second (its client is likely to reuse it) goes last.
    /// Lowered at start-up to fit the open-files limit, which is first
    /// raised to its hard limit.
    #[arg(long, value_name = "N", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Maximum concurrent admin (plain HTTP) connections. At the cap, a new
    /// connection evicts the longest idle one, as on the admission port, so
    /// probes always get through and one in flight is never cut.
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub admin_max_connections: u32,
    /// Deadline for one admission request (body included), e.g. 5s.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Time a new connection gets for its TLS handshake plus its first
    /// request head, and a later request for its head once its first byte
    /// has arrived.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub head_timeout: Duration,
    /// How long a keep-alive connection may sit idle between requests. It
    /// must exceed the apiserver's own idle timeout (Go's 90 s
    /// `IdleConnTimeout`), so that the client, not the server, closes idle
    /// connections: a request the client sends just as the server closes
    /// would fail the admission, and Go does not retry a POST.
    #[arg(long, value_name = "DURATION", default_value = "95s", value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// How long a response write may make no progress before the connection
    /// is closed (a client that never reads its responses).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub write_timeout: Duration,
    /// Total bytes of request bodies buffered at once, across connections,
    /// charged as the bytes arrive (not as declared). Bodies over 256 KiB
    /// draw from three quarters of it, so a few large stalled bodies never
    /// starve the small reviews the apiserver sends; a body that does not
    /// fit sheds the slowest bodies (answered 503). Must stay well under the
    /// pod's memory limit.
    #[arg(long, value_name = "BYTES", default_value_t = 64 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(MIN_BUDGET..=MAX_BUDGET))]
    pub max_buffered_bytes: u64,
    /// After SIGTERM: how long `/readyz` is 503 while new connections are
    /// still accepted and answered, so that endpoints are updated before the
    /// listener closes.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration_or_zero)]
    pub shutdown_delay: Duration,
    /// How long shutdown waits, after the delay, for requests on their way
    /// (in flight, or already sent on an open connection), e.g. 15s.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    /// How often certificate, client CA and config files are polled.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration, hide = true)]
    pub reload_interval: Duration,
}

/// Two maximum-size bodies: anything smaller could refuse a legitimate
/// 7 MiB review outright.
const MIN_BUDGET: u64 = 2 * MAX_BODY_BYTES as u64;
/// The semaphore behind the budget counts in `u32` chunks; 4 GiB is far
/// beyond any sensible memory limit anyway.
const MAX_BUDGET: u64 = u32::MAX as u64;

impl Default for Tuning {
    fn default() -> Self {
        // The clap defaults are the one source of truth; an empty command
        // line cannot fail to parse.
        Tuning::try_parse_from(std::iter::empty::<&str>()).unwrap_or_else(|e| {
            unreachable!("the tuning defaults parse: {e}");
        })
    }
}

/// Everything [`super::Server::bind`] needs. [`ServerSettings::new`] fills
/// in the production defaults.
#[derive(Clone)]
pub struct ServerSettings {
    /// TLS (admission) listener.
    pub addr: SocketAddr,
    /// Plain-HTTP admin listener.
    pub admin_addr: SocketAddr,
    pub tls: TlsFiles,
    /// The configuration file; the built-in defaults when `None` (and then
    /// nothing is reloaded).
    pub config_path: Option<PathBuf>,
    /// The webhook's own namespace, always excluded from mutation.
    pub own_namespace: Option<String>,
    pub tuning: Tuning,
    pub clock: Clock,
    pub tokens: Arc<dyn TokenSource>,
    /// What answers `POST /mutate`.
    pub handler: Handler,
    /// Log lines the logging queue dropped, for `log_lines_dropped_total`
    /// (`serve` installs the queue; none when embedded).
    pub log_lines_dropped: Option<tracing_appender::non_blocking::ErrorCounter>,
}

impl ServerSettings {
    #[must_use]
    pub fn new(tls: TlsFiles) -> Self {
        ServerSettings {
            addr: SocketAddr::from(([0u16; 8], 8443)),
            admin_addr: SocketAddr::from(([0u16; 8], 8080)),
            tls,
            config_path: None,
            own_namespace: None,
            tuning: Tuning::default(),
            clock: Utc::now,
            tokens: Arc::new(RandomTokens),
            handler: Handler::Review,
            log_lines_dropped: None,
        }
    }
}

/// What answers `POST /mutate`. Everything around it (TLS, HTTP, limits,
/// deadline, metrics, the log line) is the same for both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Handler {
    /// The webhook: [`crate::review::review`].
    #[default]
    Review,
    /// Allows every request without looking at the object
    /// ([`crate::review::null_reviewed`]): the cost floor of the stack, for
    /// the load benchmark (bench/run.sh) to measure the real handler against.
    Null,
    /// Answers every request with this patch without looking at the object
    /// ([`crate::review::fixed_reviewed`]): the apiserver benchmark
    /// (bench/apiserver.sh) compares patch shapes with it.
    Fixed(&'static crate::mutate::Patch),
}

/// A positive duration in the one grammar of [`crate::duration`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    crate::duration::parse_positive(s).map_err(|e| e.to_string())
}

/// The same, zero allowed (`--shutdown-delay 0s` turns the delay off).
fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    crate::duration::parse(s).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_only_where_it_turns_something_off() {
        assert!(parse_duration("0s").is_err());
        assert_eq!(parse_duration_or_zero("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
    }

    /// The idle timeout among them: 95 s, past Go's 90 s.
    /// contract: limits.idle-timeout
    #[test]
    fn defaults_are_the_documented_production_values() {
        let t = Tuning::default();
        assert_eq!(t.max_connections, 1024);
        assert_eq!(t.admin_max_connections, 64);
        assert_eq!(t.request_timeout, Duration::from_secs(5));
        assert_eq!(t.head_timeout, Duration::from_secs(5));
        assert_eq!(t.idle_timeout, Duration::from_secs(95));
        assert_eq!(t.write_timeout, Duration::from_secs(10));
        assert_eq!(t.max_buffered_bytes, 64 * 1024 * 1024);
        assert_eq!(t.shutdown_delay, Duration::from_secs(5));
        assert_eq!(t.shutdown_timeout, Duration::from_secs(15));
    }

    #[test]
    fn a_budget_below_two_bodies_is_refused() {
        let small = (MIN_BUDGET - 1).to_string();
        assert!(Tuning::try_parse_from(["--max-buffered-bytes", small.as_str()]).is_err());
    }
}
