//! The plain-HTTP admin port: liveness, readiness and metrics. It carries no
//! admission traffic, so it needs neither TLS nor the admission limits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::HttpError;
use super::metrics::Metrics;

#[derive(Clone)]
pub(crate) struct AdminState {
    pub ready: Arc<AtomicBool>,
    pub metrics: Arc<Metrics>,
}

pub(crate) fn router(state: AdminState) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(|| async { HttpError::NotFound })
        .method_not_allowed_fallback(|| async { HttpError::MethodNotAllowed { allow: "GET" } })
        .with_state(state)
}

async fn livez() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AdminState>) -> Response {
    if state.ready.load(Ordering::Acquire) {
        "ok\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn metrics(State(state): State<AdminState>) -> Response {
    match state.metrics.encode() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => HttpError::Internal.into_response(),
    }
}
