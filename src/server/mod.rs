//! The HTTPS admission server (contract: http.endpoints, http.tls, http.admin):
//! `POST /mutate` over TLS, an admin port, hot reload of certificate and
//! configuration, limits, graceful shutdown and metrics.
//!
//! - [`settings`]: what a server is built from, limits included.
//! - `http`: the `/mutate` handler and its errors; `budget`: the shared
//!   memory budget for request bodies.
//! - `listener`: the accept loop and connection cap; `conn`: one
//!   connection (handshake, head deadline, write timeout).
//! - `admin`: the admin port, serving `crate::admin`'s probes; `shutdown`:
//!   draining; `reload` and [`tls`]: hot reload.
//!
//! [`Server::bind`] loads everything and binds both ports (so a bad
//! certificate or config fails before anything is served, and tests learn the
//! ports); [`Server::bind_to`] does the same on [`Listeners`] bound
//! beforehand. [`Server::serve`] runs the lifecycle. [`run`] is both in one
//! call.

pub(crate) mod admin;
mod budget;
mod conn;
mod handshake;
mod heavy;
mod http;
mod listener;
pub(crate) mod log;
pub(crate) mod metrics;
mod reload;
pub(crate) mod settings;
pub(crate) mod shutdown;
pub(crate) mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::service::TowerToHyperService;
use thiserror::Error;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::admin::Readiness;
use crate::config::{Config, ConfigError};

use conn::{ConnSettings, http_builder};
use handshake::TlsSide;
use listener::{Limits, accept_until};
use metrics::Metrics;
use reload::Watch;
use shutdown::drain;

pub use http::HttpError;
pub use listener::{raise_fd_limit, tune_allocator};
pub use settings::{Clock, Handler, ServerSettings, Tuning};
pub use tls::{TlsError, TlsFiles};

/// Why the server could not start.
#[derive(Debug, Error)]
pub enum ServeError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    #[error("cannot start the thread for large reviews: {0}")]
    Thread(#[source] std::io::Error),
    #[error("cannot listen on {addr} ({what}): {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
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
    /// Where the key exchanges and signatures of handshakes without credit
    /// are computed, at a lower priority.
    handshakes: heavy::Heavy,
    app: Arc<http::AppState>,
    ready: Readiness,
    config_initial: Option<(PathBuf, Vec<u8>)>,
    settings: ServerSettings,
    admin: AbortOnDrop,
    admin_stop: watch::Sender<bool>,
}

impl Server {
    /// Loads the configuration and TLS credentials (failing with an error
    /// that names the file), then binds the admin and TLS listeners.
    ///
    /// # Errors
    /// The first of: the configuration, the TLS files, binding either port.
    pub async fn bind(settings: ServerSettings) -> Result<Server, ServeError> {
        let loaded = Loaded::load(&settings).await?;
        let listeners = Listeners::bind(settings.addr, settings.admin_addr)?;
        Ok(Self::start(settings, loaded, listeners))
    }

    /// The same on listeners bound beforehand, for a caller that must know
    /// the ports are its own before it writes the files `settings` name
    /// (`serve --dev`).
    ///
    /// # Errors
    /// The configuration or the TLS files, as [`Server::bind`].
    pub async fn bind_to(
        settings: ServerSettings,
        listeners: Listeners,
    ) -> Result<Server, ServeError> {
        let loaded = Loaded::load(&settings).await?;
        Ok(Self::start(settings, loaded, listeners))
    }

    fn start(settings: ServerSettings, loaded: Loaded, listeners: Listeners) -> Server {
        let Listeners {
            listener,
            local_addr,
            admin_listener,
            admin_addr,
        } = listeners;
        let ready = Readiness::default();
        let (admin_stop, admin_stopped) = watch::channel(false);
        let admin = tokio::spawn(admin::serve(
            admin_listener,
            ready.clone(),
            loaded.metrics.clone(),
            settings.tuning.clone(),
            admin_stopped,
        ));

        let app = Arc::new(http::AppState::new(
            &settings,
            loaded.config,
            loaded.metrics,
            loaded.heavy,
            ready.clone(),
        ));
        Server {
            listener,
            local_addr,
            admin_addr,
            tls: loaded.tls,
            handshakes: loaded.handshakes,
            app,
            ready,
            config_initial: loaded.config_initial,
            settings,
            admin: AbortOnDrop(admin),
            admin_stop,
        }
    }

    /// The bound admission (TLS) address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound admin (plain HTTP) address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// The lifecycle: ready → `shutdown` resolves → `/readyz` 503 while
    /// still accepting and answering for the shutdown delay → stop
    /// accepting → let in-flight requests finish (for at most the shutdown
    /// timeout) → stop the admin port → return.
    ///
    /// # Errors
    /// None so far: what can fail is found by [`Server::bind`].
    pub async fn serve(self, shutdown: impl Future<Output = ()>) -> Result<(), ServeError> {
        let tuning = self.settings.tuning;
        let (ready, local_addr, admin_addr) = (self.ready, self.local_addr, self.admin_addr);
        let metrics = self.app.metrics.clone();
        let _reloaders = spawn_reloaders(&self.tls, &self.app, self.config_initial, &tuning);

        let conn = Arc::new(ConnSettings {
            http: http_builder(&tuning),
            service: TowerToHyperService::new(http::router(self.app)),
            tuning: tuning.clone(),
        });
        let side = Arc::new(TlsSide {
            config: self.tls.config.clone(),
            gate: handshake::Gate::default(),
            computing: self.handshakes,
            metrics: metrics.clone(),
            log_limit: log::RateLimit::new(10),
        });
        let limits = Limits {
            name: "admission",
            cap: usize::try_from(tuning.max_connections).unwrap_or(usize::MAX),
        };
        let (conn_stop, conn_stopped) = watch::channel(false);

        ready.set(true);
        tracing::info!(%local_addr, %admin_addr, "serving admission requests");
        let stop_accepting = async {
            shutdown.await;
            ready.set(false);
            tracing::info!(
                delay = ?tuning.shutdown_delay,
                "shutdown requested: /readyz is 503; still serving until endpoints are updated"
            );
            tokio::time::sleep(tuning.shutdown_delay).await;
        };
        let mut connections = accept_until(
            &self.listener,
            &limits,
            &metrics,
            stop_accepting,
            |stream, peer, state| {
                let (conn, side) = (conn.clone(), side.clone());
                let mut stop = conn_stopped.clone();
                async move {
                    let head_timeout = conn.tuning.head_timeout;
                    // Not cut at shutdown: a TLS 1.3 client sends its
                    // request right after its last handshake message, before
                    // the server has read that message. The head deadline
                    // bounds it.
                    let tls = side.handshake(stream, &state, head_timeout, peer).await;
                    if let Some(tls) = tls {
                        conn.serve_http(tls, state, peer, &mut stop).await;
                    }
                }
            },
        )
        .await;

        drop(self.listener);
        tracing::info!(
            open = connections.len(),
            "no longer accepting; draining in-flight requests"
        );
        let aborted = drain(&mut connections, &conn_stop, tuning.shutdown_timeout).await;
        if aborted > 0 {
            tracing::warn!(
                aborted,
                timeout = ?tuning.shutdown_timeout,
                "connections still open after the shutdown timeout were closed"
            );
        }
        let _ = self.admin_stop.send(true);
        let mut admin = self.admin;
        let _ = (&mut admin.0).await;
        tracing::info!("stopped");
        Ok(())
    }
}

/// The admission port's HTTP service alone, with no socket and no TLS:
/// what a [`Server`] built from the same settings answers on each
/// connection, for tests that check a request's answer (status, headers,
/// body, metrics) in-process with `tower::ServiceExt::oneshot`. What needs
/// a connection (TLS, timeouts, keep-alive, draining, limits on the bytes
/// as they arrive) is the [`Server`]'s.
#[doc(hidden)]
pub struct Admission {
    app: Arc<http::AppState>,
}

impl Admission {
    /// Loads `settings` as [`Server::bind`] does (the TLS files included),
    /// binding no port; ready, as a serving server is.
    ///
    /// # Errors
    /// The configuration or the TLS files, as [`Server::bind`].
    pub async fn load(settings: &ServerSettings) -> Result<Admission, ServeError> {
        let loaded = Loaded::load(settings).await?;
        let ready = Readiness::default();
        ready.set(true);
        let app = http::AppState::new(settings, loaded.config, loaded.metrics, loaded.heavy, ready);
        Ok(Admission { app: Arc::new(app) })
    }

    /// The router a connection's requests go to.
    pub fn router(&self) -> axum::Router {
        http::router(self.app.clone())
    }

    /// What the admin port's `/metrics` would show.
    ///
    /// # Errors
    /// When the text exposition cannot be written.
    pub fn metrics(&self) -> Result<String, std::fmt::Error> {
        crate::admin::metrics::Exposition::encode(self.app.metrics.as_ref())
    }
}

/// What start-up reads before anything is served.
struct Loaded {
    metrics: Arc<Metrics>,
    config: Config,
    config_initial: Option<(PathBuf, Vec<u8>)>,
    tls: tls::Tls,
    heavy: heavy::Heavy,
    handshakes: heavy::Heavy,
}

impl Loaded {
    async fn load(settings: &ServerSettings) -> Result<Loaded, ServeError> {
        let metrics = Arc::new(Metrics::new());
        if let Some(dropped) = &settings.log_lines_dropped {
            metrics.log_lines_dropped.follow(dropped.clone());
        }
        let (config, config_initial) = match &settings.config_path {
            Some(path) => {
                let bytes = reload::read_all(std::slice::from_ref(path))
                    .await
                    .map_err(|e| ConfigError::Read {
                        path: e.path,
                        source: e.source,
                    })?
                    .swap_remove(0);
                let config = Config::from_file_bytes(path, &bytes)?;
                (config, Some((path.clone(), bytes)))
            }
            None => (Config::default(), None),
        };
        let tls = tls::Tls::load(settings.tls.clone()).await?;
        if let Some(expiry) = tls.expiry {
            metrics.certificate_expiry.set(expiry);
        }
        let heavy = heavy::Heavy::start("heavy-reviews", true).map_err(ServeError::Thread)?;
        let handshakes =
            heavy::Heavy::start("tls-handshakes", false).map_err(ServeError::Thread)?;
        log_start(settings, &config);
        Ok(Loaded {
            metrics,
            config,
            config_initial,
            tls,
            heavy,
            handshakes,
        })
    }
}

/// The admission and admin listeners, bound.
pub struct Listeners {
    listener: TcpListener,
    local_addr: SocketAddr,
    admin_listener: TcpListener,
    admin_addr: SocketAddr,
}

impl Listeners {
    /// Binds the admin port, then the admission port.
    ///
    /// # Errors
    /// [`ServeError::Bind`], naming the port that cannot be bound.
    pub fn bind(addr: SocketAddr, admin_addr: SocketAddr) -> Result<Listeners, ServeError> {
        let admin_listener = bind(admin_addr, "admin")?;
        let admin_local = local_addr(&admin_listener, admin_addr, "admin")?;
        let listener = bind(addr, "admission")?;
        let local = local_addr(&listener, addr, "admission")?;
        Ok(Listeners {
            listener,
            local_addr: local,
            admin_listener,
            admin_addr: admin_local,
        })
    }
}

/// Binds, serves until `shutdown` resolves, drains and returns.
///
/// # Errors
/// As [`Server::bind`].
pub async fn run(
    settings: ServerSettings,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    Server::bind(settings).await?.serve(shutdown).await
}

/// Certificate, client CA and (when a file is given) config pollers; they
/// stop when the returned guards are dropped.
fn spawn_reloaders(
    tls: &tls::Tls,
    app: &Arc<http::AppState>,
    config_initial: Option<(PathBuf, Vec<u8>)>,
    tuning: &Tuning,
) -> Vec<AbortOnDrop> {
    let metrics = &app.metrics;
    let mut reloaders: Vec<AbortOnDrop> = tls
        .spawn_reloaders(tuning.reload_interval, metrics)
        .into_iter()
        .map(AbortOnDrop)
        .collect();
    if let Some((path, bytes)) = config_initial {
        let config = app.config.clone();
        let config_path = path.clone();
        reloaders.push(AbortOnDrop(reload::spawn(
            Watch {
                what: "config",
                paths: vec![path],
                initial: vec![bytes],
                interval: tuning.reload_interval,
                counter: metrics.config_reloads.clone(),
                last_success: Some(metrics.config_last_reload_success.clone()),
            },
            move |contents| {
                let next = Config::from_file_bytes(&config_path, &contents[0])?;
                log_config("configuration reloaded", &next);
                config.store(Arc::new(next));
                Ok::<_, ConfigError>(())
            },
        )));
    }
    reloaders
}

/// The line an operator looks for first: which build, which file, what it
/// will inject.
fn log_start(settings: &ServerSettings, config: &Config) {
    let config_path = settings
        .config_path
        .as_deref()
        .map_or_else(|| "(built-in defaults)".into(), |p| p.display().to_string());
    tracing::info!(
        version = metrics::VERSION,
        revision = metrics::REVISION,
        config = %config_path,
        "starting sandbox-webhook"
    );
    log_config("configuration loaded", config);
}

fn log_config(what: &str, config: &Config) {
    tracing::info!(
        prefix = %config.prefix,
        excluded_namespaces = ?config.excluded_namespaces,
        execd_image = %config.execd.image,
        egress_image = config.egress.image.as_deref().unwrap_or("(none)"),
        "{what}"
    );
}

/// Connections the kernel holds for the accept loop: four times tokio's
/// 1,024 (the kernel caps it at `net.core.somaxconn`, 4,096 by default).
/// Past it a new client's SYN is dropped and retried a second later; under a
/// flood of new connections, a longer line rides out a stall of the loop
/// (the node's other pods taking the CPU) without that second.
const LISTEN_BACKLOG: u32 = 4096;

fn bind(addr: SocketAddr, what: &'static str) -> Result<TcpListener, ServeError> {
    let listen = || {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(LISTEN_BACKLOG)
    };
    listen().map_err(|source| ServeError::Bind { what, addr, source })
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
