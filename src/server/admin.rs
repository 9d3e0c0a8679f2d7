//! `serve`'s plain-HTTP admin port: liveness, readiness and metrics, on the
//! routes of `crate::admin`. It carries no admission traffic, so it needs no
//! TLS, but it is bounded like the admission port (contract: limits.admin-connections, http.admin): its own
//! small connection cap, at which the longest idle admin connection makes room,
//! as on the admission port (so a flood of idle connections can neither lock
//! out the kubelet's probes nor exhaust file descriptors, and churn never cuts
//! a probe in flight), the same head, idle and write timeouts, and a short
//! request deadline.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;

use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::conn::{ConnSettings, Drained, http_builder};
use super::listener::{Limits, accept_until};
use super::metrics::Metrics;
use super::settings::Tuning;
use super::shutdown::{drain, stopped};
use crate::admin::{Readiness, probes};

/// Admin handlers answer from memory; anything slower is stuck.
const ADMIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Scrapers may hold keep-alive connections; shutdown does not wait on them
/// long.
const ADMIN_DRAIN: Duration = Duration::from_secs(1);

/// The server's admin routes: [`probes`] within a short request deadline.
fn router(ready: Readiness, metrics: Arc<Metrics>) -> Router {
    probes(ready, metrics).layer(tower_http::timeout::TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        ADMIN_REQUEST_TIMEOUT,
    ))
}

/// Serves the admin port until `stop` turns true, then closes its
/// connections (briefly draining them).
pub(crate) async fn serve(
    listener: TcpListener,
    ready: Readiness,
    metrics: Arc<Metrics>,
    tuning: Tuning,
    mut stop: watch::Receiver<bool>,
) {
    let limits = Limits {
        name: "admin",
        cap: usize::try_from(tuning.admin_max_connections).unwrap_or(usize::MAX),
    };
    let conn = Arc::new(ConnSettings {
        http: http_builder(&tuning),
        service: TowerToHyperService::new(router(ready, metrics.clone())),
        tuning,
    });
    let (conn_stop, conn_stopped) = watch::channel(false);
    let mut stop_accepting = stop.clone();
    let mut connections = accept_until(
        &listener,
        &limits,
        &metrics,
        async move { stopped(&mut stop_accepting).await },
        |stream, peer: SocketAddr, state| {
            let conn = conn.clone();
            let mut stop = conn_stopped.clone();
            async move {
                let _ = stream.set_nodelay(true);
                conn.serve_http(Drained(stream), state, peer, &mut stop)
                    .await;
            }
        },
    )
    .await;
    drop(listener);
    drain(&mut connections, &conn_stop, ADMIN_DRAIN).await;
    stopped(&mut stop).await;
}
