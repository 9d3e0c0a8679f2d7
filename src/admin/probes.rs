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

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::*;

    struct Empty;

    impl Exposition for Empty {
        fn encode(&self) -> Result<String, std::fmt::Error> {
            Ok(String::new())
        }
    }

    /// `method path` against the probe routes: the status, the `Allow` and
    /// `Content-Type` headers, and the body.
    async fn answer(ready: &Readiness, method: &str, path: &str) -> (u16, String, String, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .unwrap();
        let response = probes(ready.clone(), Arc::new(Empty))
            .oneshot(request)
            .await
            .unwrap();
        let header = |name| {
            response
                .headers()
                .get(name)
                .map_or("", |v| v.to_str().unwrap())
                .to_owned()
        };
        let (allow, kind) = (header(header::ALLOW), header(header::CONTENT_TYPE));
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            allow,
            kind,
            String::from_utf8(body.to_vec()).unwrap(),
        )
    }

    /// Both admin ports answer exactly this, and an unknown path or method
    /// in the JSON of the admission port's errors (contract: http.admin).
    #[tokio::test]
    async fn probes_and_their_errors_byte_for_byte() {
        let ready = Readiness::default();
        let json = "application/json";
        assert_eq!(answer(&ready, "GET", "/livez").await.3, "ok\n");
        let not_ready = answer(&ready, "GET", "/readyz").await;
        assert_eq!((not_ready.0, not_ready.3.as_str()), (503, "not ready\n"));
        ready.set(true);
        assert_eq!(answer(&ready, "GET", "/readyz").await.3, "ok\n");
        let none = r#"{"error":"no such path","status":404}"#;
        let none = (404, String::new(), json.to_owned(), none.to_owned());
        assert_eq!(answer(&ready, "GET", "/nowhere").await, none);
        let post = r#"{"error":"method not allowed (use GET)","status":405}"#;
        let post = (405, "GET".to_owned(), json.to_owned(), post.to_owned());
        assert_eq!(answer(&ready, "POST", "/metrics").await, post);
    }
}
