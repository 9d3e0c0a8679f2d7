//! The controller's plain-HTTP admin port: `/livez`, `/readyz`, `/metrics`,
//! like `serve`'s. It carries no traffic from users, so it needs no limits
//! beyond axum's defaults.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;

use super::metrics::ControllerMetrics;

/// Ready once the controller has a client and takes part in the election;
/// a standby is ready too (it serves nothing, and must not be restarted).
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

#[derive(Clone)]
struct AdminState {
    ready: Readiness,
    metrics: Arc<ControllerMetrics>,
}

pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

pub async fn serve(
    listener: TcpListener,
    ready: Readiness,
    metrics: Arc<ControllerMetrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let router = Router::new()
        .route("/livez", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found\n") })
        .with_state(AdminState { ready, metrics });
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn readyz(State(state): State<AdminState>) -> Response {
    if state.ready.get() {
        "ok\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn metrics_text(State(state): State<AdminState>) -> Response {
    match state.metrics.encode() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n").into_response(),
    }
}
