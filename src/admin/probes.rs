//! `/livez`, `/readyz` and `/metrics`: the routes of both admin ports
//! (`serve`'s and the controller's), and the JSON error every HTTP port of
//! the crate answers a request it cannot serve with.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::metrics::Exposition;
use super::readiness::Readiness;

/// A request no route serves, or one that failed inside: the errors the
/// admin ports and the admission port share (the admission port's own are
/// `server::HttpError`, which wraps these).
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("no such path")]
    NotFound,
    #[error("method not allowed (use {allow})")]
    MethodNotAllowed { allow: &'static str },
    #[error("internal error")]
    Internal,
}

impl RouteError {
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            RouteError::NotFound => StatusCode::NOT_FOUND,
            RouteError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            RouteError::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for RouteError {
    fn into_response(self) -> Response {
        let mut response = json_error(self.status(), &self);
        if let RouteError::MethodNotAllowed { allow } = self {
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        response
    }
}

/// The body of every error answer: `{"error": <sentence>, "status": <code>}`.
pub(crate) fn json_error(status: StatusCode, error: &impl std::fmt::Display) -> Response {
    let body = serde_json::json!({ "error": error.to_string(), "status": status.as_u16() });
    (status, axum::Json(body)).into_response()
}

/// What the admin handlers read: readiness and the metrics to expose.
struct Probes<M> {
    ready: Readiness,
    metrics: Arc<M>,
}

// Derived `Clone` would ask `M: Clone`; only the `Arc` is cloned.
impl<M> Clone for Probes<M> {
    fn clone(&self) -> Self {
        Probes {
            ready: self.ready.clone(),
            metrics: Arc::clone(&self.metrics),
        }
    }
}

/// `/livez`, `/readyz` and `/metrics`, the routes of both admin ports
/// (`serve`'s and the controller's); unknown paths and methods are answered
/// like the admission port's.
pub(crate) fn probes<M: Exposition>(ready: Readiness, metrics: Arc<M>) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz::<M>))
        .route("/metrics", get(metrics_text::<M>))
        .fallback(|| async { RouteError::NotFound })
        .method_not_allowed_fallback(|| async { RouteError::MethodNotAllowed { allow: "GET" } })
        .with_state(Probes { ready, metrics })
}

async fn livez() -> &'static str {
    "ok\n"
}

async fn readyz<M: Exposition>(State(state): State<Probes<M>>) -> Response {
    if state.ready.get() {
        "ok\n".into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready\n").into_response()
    }
}

async fn metrics_text<M: Exposition>(State(state): State<Probes<M>>) -> Response {
    match state.metrics.encode() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => RouteError::Internal.into_response(),
    }
}
