//! The admission port's HTTP layer: `POST /mutate`, `POST /validate` and
//! their errors.
//!
//! Read the body within the shared budget, call the pure
//! [`review::review`] (or [`review::validate`]), on the async worker or,
//! for a large body, on the review thread (`heavy`), log, count, answer
//! with the answer charged to the budget until it is written. Both paths
//! share the budget, the timeouts and the metrics. Every failure is an
//! [`HttpError`] mapped to a status in one place, with a JSON body.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use thiserror::Error;
use tower_http::catch_panic::{CatchPanicLayer, ResponseForPanic};

use crate::admin::{Readiness, RouteError, probes::json_error};
use crate::config::Config;
use crate::mutate::Risk;
use crate::mutate::{Context, TokenSource};
use crate::review::{self, Outcome, ReviewError, Reviewed};

use super::budget::answer::Answer;
use super::budget::{BodyBudget, BodyError, Reservation};
use super::conn::ConnHandle;
use super::heavy::{Charge, HEAVY_BODY_BYTES, Heavy};
use super::log::{Clean, RateLimit};
use super::metrics::{Metrics, Webhook};
use super::settings::{Clock, Handler, MAX_BODY_BYTES, ServerSettings};

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
    /// No such path or method, or a failure inside.
    #[error(transparent)]
    Route(#[from] RouteError),
    #[error("request not completed within {0:?}")]
    Deadline(Duration),
    #[error("{}", BodyError::Shed)]
    SlowBody,
}

impl HttpError {
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            HttpError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            HttpError::Review(ReviewError::Encode(_)) => StatusCode::INTERNAL_SERVER_ERROR,
            HttpError::Review(_) | HttpError::Body(_) => StatusCode::BAD_REQUEST,
            HttpError::Route(route) => route.status(),
            HttpError::Deadline(_) | HttpError::SlowBody => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Whether the error is answered only once the whole body was read, so
    /// that the connection stays usable.
    fn after_body(&self) -> bool {
        matches!(self, HttpError::Review(_))
    }
}

impl From<BodyError> for HttpError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::TooLarge => HttpError::TooLarge,
            BodyError::Read(message) => HttpError::Body(message),
            BodyError::Shed => HttpError::SlowBody,
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        if let HttpError::Route(route) = self {
            return route.into_response();
        }
        let mut response = json_error(self.status(), &self);
        if self.after_body() {
            response.extensions_mut().insert(BodyConsumed);
        }
        response
    }
}

/// Marks an error response written after the request body was read whole.
#[derive(Clone, Copy)]
struct BodyConsumed;

/// Shared by all admission requests.
pub(crate) struct AppState {
    pub config: Arc<ArcSwap<Config>>,
    pub own_namespace: Option<String>,
    pub tokens: Arc<dyn TokenSource>,
    pub clock: Clock,
    pub request_timeout: Duration,
    pub metrics: Arc<Metrics>,
    pub handler: Handler,
    pub budget: Arc<BodyBudget>,
    /// Where reviews of large bodies run.
    pub heavy: Heavy,
    /// False from the shutdown signal on (and before serving starts).
    pub ready: Readiness,
    /// The warning for a rejected request, which any client can trigger:
    /// at most one a second (400 stalled bodies that reach their deadline
    /// together write one line, not 400).
    pub rejected_log: RateLimit,
}

impl AppState {
    /// The state a server built from `settings` shares between its
    /// admission requests, `config` loaded and the review thread started.
    pub(crate) fn new(
        settings: &ServerSettings,
        config: Config,
        metrics: Arc<Metrics>,
        heavy: Heavy,
        ready: Readiness,
    ) -> AppState {
        AppState {
            config: Arc::new(ArcSwap::from_pointee(config)),
            own_namespace: settings.own_namespace.clone(),
            tokens: settings.tokens.clone(),
            clock: settings.clock,
            request_timeout: settings.tuning.request_timeout,
            handler: settings.handler,
            budget: Arc::new(BodyBudget::new(
                settings.tuning.max_buffered_bytes,
                metrics.body_buffered.clone(),
                metrics.answer_buffered.clone(),
            )),
            heavy,
            metrics,
            ready,
            rejected_log: RateLimit::new(1),
        }
    }
}

pub(crate) fn router(state: Arc<AppState>) -> Router {
    let metrics = state.metrics.clone();
    let ready = state.ready.clone();
    Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .fallback(|| async { RouteError::NotFound })
        .method_not_allowed_fallback(|| async { RouteError::MethodNotAllowed { allow: "POST" } })
        .with_state(state)
        .layer(CatchPanicLayer::custom(PanicResponse(metrics)))
        .layer(middleware::from_fn_with_state(ready, close_when_needed))
}

/// `Connection: close` on the responses after which the connection must
/// not carry another request, so that the client (Go's `net/http`, in the
/// apiserver) opens a fresh one for its next request instead of sending it
/// on this one and failing with EOF: Go does not retry a POST.
/// - A response written before the request body was read whole leaves the
///   rest of that body on the wire, so hyper closes the connection after it.
/// - During the shutdown delay every connection is about to be closed: each
///   one that carries a request in that time is closed by its response, so
///   the client moves to a ready replica without a request lost in between.
async fn close_when_needed(
    State(ready): State<Readiness>,
    request: Request,
    next: Next,
) -> Response {
    let has_body = has_body(request.headers());
    let mut response = next.run(request).await;
    let read_whole = response.status() == StatusCode::OK
        || response.extensions().get::<BodyConsumed>().is_some();
    if (has_body && !read_whole) || !ready.get() {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

fn has_body(headers: &HeaderMap) -> bool {
    headers.contains_key(header::TRANSFER_ENCODING)
        || headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

/// `POST /mutate`: read the body, call the pure [`review::review`], log,
/// count, answer.
async fn mutate(State(state): State<Arc<AppState>>, request: Request) -> Response {
    answer(&state, request, Webhook::Mutate).await
}

/// `POST /validate`: the same, with [`review::validate`].
async fn validate(State(state): State<Arc<AppState>>, request: Request) -> Response {
    answer(&state, request, Webhook::Validate).await
}

async fn answer(state: &Arc<AppState>, request: Request, webhook: Webhook) -> Response {
    let started = Instant::now();
    let _in_flight = state.metrics.in_flight();
    let admitted = admit(state, request, webhook);
    let result = match tokio::time::timeout(state.request_timeout, admitted).await {
        Ok(result) => result,
        Err(_) => Err(HttpError::Deadline(state.request_timeout)),
    };
    let elapsed = started.elapsed();
    match result {
        Ok((reviewed, charge)) => {
            state
                .metrics
                .admission(webhook, &reviewed.operation, reviewed.outcome, elapsed);
            if let Some(risk) = reviewed.risk {
                state.metrics.server_completed_risk(risk);
            }
            log_admission(webhook, &reviewed, elapsed);
            let body = bytes::Bytes::from_owner(Answer::new(reviewed.body, charge));
            (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                body,
            )
                .into_response()
        }
        Err(e) => {
            state.metrics.admission_error(Some(webhook), Some(elapsed));
            if let Some(suppressed) = state.rejected_log.check() {
                let error = e.to_string();
                tracing::warn!(
                    webhook = webhook_name(webhook),
                    status = e.status().as_u16(),
                    error = %Clean(&error),
                    duration_us = micros(elapsed),
                    suppressed,
                    "admission request rejected"
                );
            }
            e.into_response()
        }
    }
}

async fn admit(
    state: &Arc<AppState>,
    request: Request,
    webhook: Webhook,
) -> Result<(Reviewed, Reservation), HttpError> {
    let (parts, body) = request.into_parts();
    let (conn, peer) = parts
        .extensions
        .get::<ConnHandle>()
        .map_or((None, None), |c| (Some(c.state.clone()), Some(c.peer)));
    if !is_json(&parts.headers) {
        return Err(HttpError::UnsupportedMediaType);
    }
    // Refuse a declared oversize body before reading any of it.
    let declared = match parts.headers.get(header::CONTENT_LENGTH) {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| HttpError::Body("Content-Length is not a number".into()))?,
        ),
        None => None,
    };
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Err(HttpError::TooLarge);
    }
    let (bytes, reservation) = state.budget.read(Body::new(body), declared).await?;
    let reviewed = if bytes.len() > HEAVY_BODY_BYTES {
        let (app, body) = (state.clone(), bytes.clone());
        state
            .heavy
            .run(
                peer.map(|peer| Charge {
                    peer,
                    bytes: body.len(),
                }),
                move || reviewed(&app, &body, webhook),
            )
            .await
            .map_err(|_| RouteError::Internal)??
    } else {
        reviewed(state, &bytes, webhook)?
    };
    drop(bytes);
    // From here the budget holds the answer instead of the body.
    let charge = reservation.into_answer(reviewed.body.len(), conn).await?;
    Ok((reviewed, charge))
}

/// The handler's answer to the body `bytes`.
fn reviewed(state: &AppState, bytes: &[u8], webhook: Webhook) -> Result<Reviewed, ReviewError> {
    match state.handler {
        Handler::Null => return review::null_reviewed(bytes),
        Handler::Fixed(patch) => return review::fixed_reviewed(bytes, patch),
        Handler::Review => {}
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
    match webhook {
        Webhook::Mutate => review::review(bytes, &ctx),
        Webhook::Validate => review::validate(bytes, &ctx),
    }
}

fn webhook_name(webhook: Webhook) -> &'static str {
    match webhook {
        Webhook::Mutate => "mutate",
        Webhook::Validate => "validate",
    }
}

/// `application/json`, with or without parameters such as `charset`.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// One line per admission. Every request-derived value goes through
/// [`Clean`], so a pod name with a newline cannot forge a line; the denial
/// text is `denial`, not `message`, which JSON logs use for the event itself.
fn log_admission(webhook: Webhook, r: &Reviewed, elapsed: Duration) {
    let duration_us = micros(elapsed);
    let outcome = r.outcome.as_str();
    let webhook = webhook_name(webhook);
    let (uid, namespace, name, operation) = (
        Clean(&r.uid),
        Clean(&r.namespace),
        Clean(&r.name),
        Clean(&r.operation),
    );
    match r.outcome {
        Outcome::Skipped(reason) => tracing::info!(
            %uid, %namespace, %name, %operation, outcome, reason = reason.as_str(),
            risk = r.risk.map(Risk::as_str),
            dry_run = r.dry_run, duration_us, webhook, "admission"
        ),
        Outcome::Denied(code) => tracing::info!(
            %uid, %namespace, %name, %operation, outcome, code,
            denial = %Clean(r.message.as_deref().unwrap_or_default()),
            dry_run = r.dry_run, duration_us, webhook, "admission"
        ),
        Outcome::Mutated | Outcome::Unchanged | Outcome::Allowed => tracing::info!(
            %uid, %namespace, %name, %operation, outcome, patch_bytes = r.patch_bytes,
            dry_run = r.dry_run, duration_us, webhook, "admission"
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
        tracing::error!(panic = %Clean(detail), "admission handler panicked");
        self.0.panicked();
        RouteError::Internal.into_response()
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
        assert_eq!(HttpError::from(RouteError::NotFound).status(), 404);
        let post = RouteError::MethodNotAllowed { allow: "POST" };
        assert_eq!(HttpError::from(post).status(), 405);
        assert_eq!(HttpError::Deadline(Duration::from_secs(5)).status(), 503);
        assert_eq!(HttpError::SlowBody.status(), 503);
    }

    #[test]
    fn only_errors_after_the_whole_body_keep_the_connection() {
        assert!(HttpError::Review(ReviewError::Empty).after_body());
        for early in [
            HttpError::TooLarge,
            HttpError::UnsupportedMediaType,
            HttpError::Route(RouteError::NotFound),
            HttpError::Route(RouteError::MethodNotAllowed { allow: "POST" }),
            HttpError::Deadline(Duration::from_secs(5)),
            HttpError::SlowBody,
            HttpError::Body("x".into()),
            HttpError::Route(RouteError::Internal),
        ] {
            assert!(!early.after_body(), "{early}");
        }
    }
}
