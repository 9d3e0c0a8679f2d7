//! The HTTPS admission server (SPEC 9): `POST /mutate` over TLS, an admin
//! port, hot reload of certificate and configuration, limits, graceful
//! shutdown and metrics.
//!
//! [`Server::bind`] loads everything and binds both ports (so a bad
//! certificate or config fails before anything is served, and tests learn the
//! ports); [`Server::serve`] accepts until the shutdown future resolves, then
//! drains. [`run`] is both in one call.

mod admin;
pub mod metrics;
mod reload;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use chrono::{DateTime, Utc};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use thiserror::Error;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::{JoinHandle, JoinSet};
use tower_http::catch_panic::{CatchPanicLayer, ResponseForPanic};

use crate::config::{Config, ConfigError};
use crate::mutate::{Context, RandomTokens, TokenSource};
use crate::review::{self, Outcome, ReviewError, Reviewed};

use metrics::Metrics;
use reload::Watch;
pub use tls::{TlsError, TlsFiles};

/// Largest accepted AdmissionReview body. The apiserver sends at most two
/// objects (`object` and `oldObject`) of up to 3 MiB each (etcd's default
/// request limit bounds a stored object), plus the envelope (userInfo,
/// options, …), for which 1 MiB is ample: 2 × 3 MiB + 1 MiB = 7 MiB, the
/// same limit controller-runtime uses.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// How the admission time is read; a plain function so tests can pin it.
pub type Clock = fn() -> DateTime<Utc>;

/// Everything [`Server::bind`] needs. [`ServerConfig::new`] fills in the
/// production defaults.
#[derive(Clone)]
pub struct ServerConfig {
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
    /// How often certificate, client CA and config files are polled.
    pub reload_interval: Duration,
    /// Deadline for one admission request, body included; well under the
    /// apiserver's 10 s webhook timeout so the apiserver gets our answer.
    pub request_timeout: Duration,
    /// Time a client gets to send a request's headers. In hyper this clock
    /// also runs while a keep-alive connection is idle, so it doubles as the
    /// idle timeout: it must exceed the apiserver's (Go's 90 s
    /// `IdleConnTimeout`) so that the client, not us, closes idle
    /// connections; otherwise a request sent just as we close one fails the
    /// admission. Slow clients are further bounded by the handshake timeout,
    /// the request deadline (body) and `max_connections`.
    pub header_read_timeout: Duration,
    pub handshake_timeout: Duration,
    /// Bound on draining in-flight requests at shutdown.
    pub shutdown_timeout: Duration,
    /// Concurrent TLS connections; further clients wait in the listen backlog.
    pub max_connections: usize,
    pub clock: Clock,
    pub tokens: Arc<dyn TokenSource>,
    /// What answers `POST /mutate`.
    pub handler: Handler,
}

/// What answers `POST /mutate`. Everything around it (TLS, HTTP, limits,
/// deadline, metrics, the log line) is the same for both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Handler {
    /// The webhook: [`review::review`].
    #[default]
    Review,
    /// Allows every request without looking at the object
    /// ([`review::null_reviewed`]): the cost floor of the stack, for the
    /// load benchmark (bench/run.sh) to measure the real handler against.
    Null,
}

impl ServerConfig {
    pub fn new(tls: TlsFiles) -> Self {
        ServerConfig {
            addr: SocketAddr::from(([0u16; 8], 8443)),
            admin_addr: SocketAddr::from(([0u16; 8], 8080)),
            tls,
            config_path: None,
            own_namespace: None,
            reload_interval: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(95),
            handshake_timeout: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(15),
            max_connections: 1024,
            clock: Utc::now,
            tokens: Arc::new(RandomTokens),
            handler: Handler::Review,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("cannot listen on {addr} ({what}): {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Everything that goes wrong with one HTTP request, mapped to a status in
/// one place ([`HttpError::status`]) and answered as
/// `{"error": "...", "status": N}`.
#[derive(Debug, Error)]
pub enum HttpError {
    #[error("request body is larger than {MAX_BODY_BYTES} bytes")]
    TooLarge,
    #[error("Content-Type must be application/json")]
    UnsupportedMediaType,
    #[error(transparent)]
    Review(#[from] ReviewError),
    #[error("cannot read the request body: {0}")]
    Body(String),
    #[error("no such path")]
    NotFound,
    #[error("method not allowed (use {allow})")]
    MethodNotAllowed { allow: &'static str },
    #[error("request not completed within {0:?}")]
    Deadline(Duration),
    #[error("internal error")]
    Internal,
}

impl HttpError {
    pub fn status(&self) -> StatusCode {
        match self {
            HttpError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            HttpError::Review(ReviewError::Encode(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            HttpError::Review(_) | HttpError::Body(_) => StatusCode::BAD_REQUEST,
            HttpError::NotFound => StatusCode::NOT_FOUND,
            HttpError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            HttpError::Deadline(_) => StatusCode::SERVICE_UNAVAILABLE,
            HttpError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = serde_json::json!({ "error": self.to_string(), "status": status.as_u16() });
        let mut response = (status, axum::Json(body)).into_response();
        if let HttpError::MethodNotAllowed { allow } = self {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

/// Shared by all admission requests.
struct AppState {
    config: Arc<ArcSwap<Config>>,
    own_namespace: Option<String>,
    tokens: Arc<dyn TokenSource>,
    clock: Clock,
    request_timeout: Duration,
    metrics: Arc<Metrics>,
    handler: Handler,
}

/// Aborts a background task when dropped, so no task outlives its server.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A server with its ports bound, not yet accepting admission requests.
/// The admin port already answers (`/readyz` is 503 until [`Server::serve`]).
pub struct Server {
    listener: TcpListener,
    local_addr: SocketAddr,
    admin_addr: SocketAddr,
    tls: tls::Tls,
    router: Router,
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
    config: Arc<ArcSwap<Config>>,
    config_initial: Option<(PathBuf, Vec<u8>)>,
    settings: ServerConfig,
    admin_task: AbortOnDrop,
    admin_stop: watch::Sender<bool>,
}

impl Server {
    /// Loads the configuration and TLS credentials (failing with an error
    /// that names the file), then binds the admin and TLS listeners.
    pub async fn bind(settings: ServerConfig) -> Result<Server, ServeError> {
        let metrics = Arc::new(Metrics::new());
        let (config, config_initial) = match &settings.config_path {
            Some(path) => {
                let bytes = tokio::fs::read(path)
                    .await
                    .map_err(|source| ConfigError::Read {
                        path: path.clone(),
                        source,
                    })?;
                let config = Config::from_file_bytes(path, &bytes)?;
                (config, Some((path.clone(), bytes)))
            }
            None => (Config::default(), None),
        };
        let config = Arc::new(ArcSwap::from_pointee(config));
        let tls = tls::Tls::load(settings.tls.clone()).await?;

        let admin_listener = bind(settings.admin_addr, "admin").await?;
        let admin_addr = local_addr(&admin_listener, settings.admin_addr, "admin")?;
        let listener = bind(settings.addr, "admission").await?;
        let local_addr = local_addr(&listener, settings.addr, "admission")?;

        let ready = Arc::new(AtomicBool::new(false));
        let (admin_stop, mut admin_stopped) = watch::channel(false);
        let admin_router = admin::router(admin::AdminState {
            ready: ready.clone(),
            metrics: metrics.clone(),
        });
        let admin_task = tokio::spawn(async move {
            if let Err(e) = axum::serve(admin_listener, admin_router)
                .with_graceful_shutdown(async move { stopped(&mut admin_stopped).await })
                .await
            {
                tracing::error!(error = %e, "admin server failed");
            }
        });

        let state = Arc::new(AppState {
            config: config.clone(),
            own_namespace: settings.own_namespace.clone(),
            tokens: settings.tokens.clone(),
            clock: settings.clock,
            request_timeout: settings.request_timeout,
            metrics: metrics.clone(),
            handler: settings.handler,
        });
        let router = Router::new()
            .route("/mutate", post(mutate))
            .fallback(|| async { HttpError::NotFound })
            .method_not_allowed_fallback(|| async { HttpError::MethodNotAllowed { allow: "POST" } })
            .with_state(state)
            .layer(CatchPanicLayer::custom(PanicResponse(metrics.clone())));

        Ok(Server {
            listener,
            local_addr,
            admin_addr,
            tls,
            router,
            ready,
            metrics,
            config,
            config_initial,
            settings,
            admin_task: AbortOnDrop(admin_task),
            admin_stop,
        })
    }

    /// The bound admission (TLS) address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound admin (plain HTTP) address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// Serves until `shutdown` resolves, then stops accepting, lets in-flight
    /// requests finish (for at most `shutdown_timeout`) and returns.
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let Server {
            listener,
            local_addr,
            admin_addr,
            tls,
            router,
            ready,
            metrics,
            config,
            config_initial,
            settings,
            admin_task,
            admin_stop,
        } = self;

        let mut reloaders: Vec<AbortOnDrop> = tls
            .spawn_reloaders(settings.reload_interval, &metrics.cert_reloads)
            .into_iter()
            .map(AbortOnDrop)
            .collect();
        if let Some((path, bytes)) = config_initial {
            let config = config.clone();
            let config_path = path.clone();
            reloaders.push(AbortOnDrop(reload::spawn(
                Watch {
                    what: "config",
                    paths: vec![path],
                    initial: vec![bytes],
                    interval: settings.reload_interval,
                    counter: metrics.config_reloads.clone(),
                },
                move |contents| {
                    config.store(Arc::new(Config::from_file_bytes(
                        &config_path,
                        &contents[0],
                    )?));
                    Ok::<_, ConfigError>(())
                },
            )));
        }

        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(settings.header_read_timeout)
            .keep_alive(true);
        let conn = Arc::new(ConnSettings {
            acceptor: tls.acceptor.clone(),
            http,
            service: TowerToHyperService::new(router),
            handshake_timeout: settings.handshake_timeout,
        });

        let permits = Arc::new(Semaphore::new(settings.max_connections.max(1)));
        let open = Arc::new(AtomicUsize::new(0));
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut connections = JoinSet::new();
        ready.store(true, Ordering::Release);
        tracing::info!(%local_addr, %admin_addr, "serving admission requests");

        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            // A permit first: at the cap, stop accepting and let the kernel's
            // backlog hold new clients rather than accepting and dropping.
            let permit = tokio::select! {
                biased;
                () = &mut shutdown => break,
                Some(_) = connections.join_next(), if !connections.is_empty() => continue,
                permit = permits.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let (stream, peer) = tokio::select! {
                biased;
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Usually out of file descriptors; back off instead
                        // of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let conn = conn.clone();
            let stop = stop_rx.clone();
            let open = open.clone();
            open.fetch_add(1, Ordering::Relaxed);
            connections.spawn(async move {
                serve_connection(&conn, stream, peer, stop).await;
                drop(permit);
                if open.fetch_sub(1, Ordering::Relaxed) == 1 {
                    release_free_memory();
                }
            });
        }

        ready.store(false, Ordering::Release);
        drop(listener);
        drop(reloaders);
        let open = connections.len();
        tracing::info!(open, "shutting down: no new connections, draining");
        let _ = stop_tx.send(true);
        let drained = tokio::time::timeout(settings.shutdown_timeout, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                aborted = connections.len(),
                timeout = ?settings.shutdown_timeout,
                "connections still open after the shutdown timeout; closing them"
            );
            connections.shutdown().await;
        }
        let _ = admin_stop.send(true);
        let mut admin_task = admin_task;
        // Scrapers may hold keep-alive connections; do not wait on them long.
        let _ = tokio::time::timeout(Duration::from_secs(1), &mut admin_task.0).await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// Binds, serves until `shutdown` resolves, drains and returns.
pub async fn run(
    settings: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    Server::bind(settings).await?.serve(shutdown).await
}

async fn bind(addr: SocketAddr, what: &'static str) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { what, addr, source })
}

fn local_addr(
    listener: &TcpListener,
    addr: SocketAddr,
    what: &'static str,
) -> Result<SocketAddr, ServeError> {
    listener
        .local_addr()
        .map_err(|source| ServeError::Bind { what, addr, source })
}

struct ConnSettings {
    acceptor: tokio_rustls::TlsAcceptor,
    http: hyper::server::conn::http1::Builder,
    service: TowerToHyperService<Router>,
    handshake_timeout: Duration,
}

/// One TLS connection: handshake (bounded), then HTTP/1.1 until the client
/// closes or shutdown asks the connection to finish its current request.
async fn serve_connection(
    conn: &ConnSettings,
    stream: TcpStream,
    peer: SocketAddr,
    mut stop: watch::Receiver<bool>,
) {
    // Admission responses are small and latency-bound.
    let _ = stream.set_nodelay(true);
    let handshake = tokio::time::timeout(conn.handshake_timeout, conn.acceptor.accept(stream));
    let tls = tokio::select! {
        result = handshake => match result {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%peer, "TLS handshake timed out");
                return;
            }
        },
        () = stopped(&mut stop) => return,
    };
    let connection = conn
        .http
        .serve_connection(TokioIo::new(tls), conn.service.clone());
    let mut connection = std::pin::pin!(connection);
    let result = tokio::select! {
        result = connection.as_mut() => result,
        () = stopped(&mut stop) => {
            // Finishes the request being read or answered, then closes.
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, error = %e, "connection ended with an error");
    }
}

/// Called when the last connection closes. glibc's malloc keeps what a burst
/// of connections freed (TLS and HTTP buffers, bodies) in its heaps, so after
/// 128 connections the process would stay at about twice its idle RSS;
/// `malloc_trim` hands the free pages back. It takes about a millisecond, so
/// it runs on the blocking pool, and only when no connection is open.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tokio::task::spawn_blocking(|| {
        // SAFETY: malloc_trim only returns free memory to the kernel; it is
        // thread-safe and touches no memory that is in use.
        unsafe { libc::malloc_trim(0) };
    });
}

/// Resolves once shutdown has begun (or the server is gone). The borrow
/// `wait_for` returns is not `Send`, so it is dropped here, before any await.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// `POST /mutate`: read the body, call the pure [`review::review`], log,
/// count, answer.
async fn mutate(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let started = Instant::now();
    let _in_flight = state.metrics.in_flight();
    let result = match tokio::time::timeout(state.request_timeout, admit(&state, request)).await {
        Ok(result) => result,
        Err(_) => Err(HttpError::Deadline(state.request_timeout)),
    };
    let elapsed = started.elapsed();
    match result {
        Ok(reviewed) => {
            state
                .metrics
                .admission(&reviewed.operation, reviewed.outcome, elapsed);
            log_admission(&reviewed, elapsed);
            (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                reviewed.body,
            )
                .into_response()
        }
        Err(e) => {
            state.metrics.admission_error(Some(elapsed));
            tracing::warn!(
                status = e.status().as_u16(),
                error = %e,
                duration_us = elapsed.as_micros() as u64,
                "admission request rejected"
            );
            e.into_response()
        }
    }
}

async fn admit(state: &AppState, request: Request) -> Result<Reviewed, HttpError> {
    let (parts, body) = request.into_parts();
    if !is_json(&parts.headers) {
        return Err(HttpError::UnsupportedMediaType);
    }
    // Refuse a declared oversize body before reading any of it.
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Err(HttpError::TooLarge);
    }
    let bytes = Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|e| {
            if e.downcast_ref::<LengthLimitError>().is_some() {
                HttpError::TooLarge
            } else {
                HttpError::Body(e.to_string())
            }
        })?
        .to_bytes();
    if state.handler == Handler::Null {
        return Ok(review::null_reviewed(&bytes)?);
    }
    // One atomic load; the guard keeps this request's config alive even if a
    // reload swaps it meanwhile.
    let config = state.config.load();
    let ctx = Context {
        config: &config,
        now: (state.clock)(),
        own_namespace: state.own_namespace.as_deref(),
        tokens: state.tokens.as_ref(),
    };
    Ok(review::review(&bytes, &ctx)?)
}

/// `application/json`, with or without parameters such as `charset`.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

fn log_admission(r: &Reviewed, elapsed: Duration) {
    let duration_us = elapsed.as_micros() as u64;
    let outcome = r.outcome.as_str();
    match r.outcome {
        Outcome::Skipped(reason) => tracing::info!(
            uid = %r.uid, namespace = %r.namespace, name = %r.name, operation = %r.operation,
            outcome, reason = reason.as_str(), dry_run = r.dry_run, duration_us, "admission"
        ),
        Outcome::Denied(code) => tracing::info!(
            uid = %r.uid, namespace = %r.namespace, name = %r.name, operation = %r.operation,
            outcome, code, message = r.message.as_deref().unwrap_or_default(),
            dry_run = r.dry_run, duration_us, "admission"
        ),
        Outcome::Mutated | Outcome::Unchanged => tracing::info!(
            uid = %r.uid, namespace = %r.namespace, name = %r.name, operation = %r.operation,
            outcome, patch_bytes = r.patch_bytes, dry_run = r.dry_run, duration_us, "admission"
        ),
    }
}

/// Turns a handler panic into a counted 500 with the usual JSON body; the
/// connection and the process carry on.
#[derive(Clone)]
struct PanicResponse(Arc<Metrics>);

impl ResponseForPanic for PanicResponse {
    type ResponseBody = Body;

    fn response_for_panic(
        &mut self,
        err: Box<dyn std::any::Any + Send + 'static>,
    ) -> axum::http::Response<Body> {
        let detail = err
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| err.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)");
        tracing::error!(panic = detail, "admission handler panicked");
        self.0.panicked();
        HttpError::Internal.into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_type_allows_parameters_only_on_json() {
        let mut h = HeaderMap::new();
        assert!(!is_json(&h));
        for (value, ok) in [
            ("application/json", true),
            ("application/json; charset=utf-8", true),
            ("Application/JSON ;charset=UTF-8", true),
            ("application/jsonx", false),
            ("text/plain", false),
            ("application/yaml", false),
        ] {
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_json(&h), ok, "{value}");
        }
    }

    #[test]
    fn every_error_maps_to_its_status() {
        assert_eq!(HttpError::TooLarge.status(), 413);
        assert_eq!(HttpError::UnsupportedMediaType.status(), 415);
        assert_eq!(HttpError::Review(ReviewError::Empty).status(), 400);
        assert_eq!(HttpError::Review(ReviewError::NoRequest).status(), 400);
        let not_utf8 = review::null_review(b"{\"x\":\"\xff\"}").unwrap_err();
        assert!(matches!(not_utf8, ReviewError::NotUtf8(_)), "{not_utf8}");
        assert_eq!(HttpError::Review(not_utf8).status(), 400);
        assert_eq!(
            HttpError::Review(ReviewError::Encode("x".into())).status(),
            500
        );
        assert_eq!(HttpError::NotFound.status(), 404);
        assert_eq!(HttpError::MethodNotAllowed { allow: "POST" }.status(), 405);
        assert_eq!(HttpError::Deadline(Duration::from_secs(5)).status(), 503);
    }
}
