//! `AdmissionReview` in, `AdmissionReview` out.
//!
//! Invariant: a review reads its bytes once. The request envelope is read
//! into a borrowed view and the object straight into a pod view in the same
//! pass; the fields the webhook does not read are skipped unparsed
//! (docs/performance.md, "Why the code is shaped this way"). The response
//! (`wire::ReviewOut`) echoes uid, apiVersion and kind, carries the patch as
//! base64 and reuses kube's `Status`.

mod decode;
mod validate;
mod wire;

use std::borrow::Cow;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use kube::core::admission::AdmissionReview;
use kube::core::{DynamicObject, Status, TypeMeta};
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use thiserror::Error;

use crate::mutate::pod::PodView;
use crate::mutate::{self, Context, Decision, Denial, SkipReason};
use wire::{RequestIn, ResponseOut, ReviewIn, ReviewOut};

pub use decode::{DecodeError, decoded};
pub use validate::validate;

/// A request that cannot be answered with an `AdmissionReview` at all; the
/// server turns these into HTTP 400.
#[derive(Debug, Error)]
pub enum ReviewError {
    #[error("request body is empty")]
    Empty,
    #[error("request body is not UTF-8 JSON: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("request body is not an AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("cannot encode the response: {0}")]
    Encode(String),
}

/// How a review ended, for metrics and the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Mutated,
    Unchanged,
    /// `/validate`: the workload's template was judged and allowed.
    Allowed,
    Skipped(SkipReason),
    Denied(u16),
}

impl Outcome {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Mutated => "mutated",
            Outcome::Unchanged => "unchanged",
            Outcome::Allowed => "allowed",
            Outcome::Skipped(_) => "skipped",
            Outcome::Denied(_) => "denied",
        }
    }
}

/// The answer plus what the server logs about it.
#[derive(Debug)]
pub struct Reviewed {
    pub body: Vec<u8>,
    pub outcome: Outcome,
    pub uid: String,
    pub namespace: String,
    /// `metadata.name`, else `generateName` (pods from controllers have no
    /// name at admission).
    pub name: String,
    pub operation: String,
    pub dry_run: bool,
    pub patch_bytes: usize,
    pub message: Option<String>,
}

/// Answers one `AdmissionReview` request body.
///
/// The fast path reads the object straight into a pod view in the same pass
/// as the envelope. If that fails, the object is not a readable pod, or not
/// a pod at all: the envelope is read again with the object kept raw, and
/// only a Pod CREATE turns the bad object into a denial.
///
/// # Errors
/// A body that is not an `AdmissionReview` with a request (the server answers
/// HTTP 400), or a response that cannot be encoded.
pub fn review(body: &[u8], ctx: &Context<'_>) -> Result<Reviewed, ReviewError> {
    let body = text(body)?;
    if let Ok(review) = serde_json::from_str::<ReviewIn<'_, PodView<'_>>>(body) {
        let request = review.request.ok_or(ReviewError::NoRequest)?;
        let types = type_meta(review.api_version, review.kind);
        return match request.object.as_ref().filter(|_| request.is_pod_create()) {
            Some(pod) => {
                let decision = mutate::decide_view(pod, request.namespace.as_deref(), ctx);
                respond(&types, &request, pod_name(pod), decision)
            }
            None => respond(
                &types,
                &request,
                None,
                Decision::Skip(SkipReason::NotPodCreate),
            ),
        };
    }
    let review: ReviewIn<'_, &RawValue> = serde_json::from_str(body)?;
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let types = type_meta(review.api_version, review.kind);
    let decision = match request.object.filter(|_| request.is_pod_create()) {
        None => Decision::Skip(SkipReason::NotPodCreate),
        Some(raw) => Decision::Deny(Denial::MalformedPod(unreadable_pod(raw))),
    };
    respond(&types, &request, None, decision)
}

/// Why `raw` is not a readable pod, with positions relative to the object.
/// Only asked after the fast path failed to read this very object as a pod,
/// and the same reader on the same text fails the same way, so there is
/// always an error to report.
fn unreadable_pod(raw: &RawValue) -> String {
    PodView::parse(raw.get())
        .err()
        .map_or_else(|| "it is not a pod".to_owned(), |e| e.to_string())
}

/// The body as text, checked for UTF-8 once, so that `serde_json` can borrow
/// strings without validating each again. JSON must be UTF-8 (RFC 8259),
/// and the apiserver only sends UTF-8.
fn text(body: &[u8]) -> Result<&str, ReviewError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ReviewError::Empty);
    }
    Ok(std::str::from_utf8(body)?)
}

fn type_meta(api_version: Cow<'_, str>, kind: Cow<'_, str>) -> TypeMeta {
    TypeMeta {
        api_version: api_version.into_owned(),
        kind: kind.into_owned(),
    }
}

/// `metadata.name`, else `generateName`: what the log line calls a pod
/// whose request carries no name.
fn pod_name<'p>(pod: &'p PodView<'_>) -> Option<&'p str> {
    let meta = pod.metadata.as_ref()?;
    meta.name.as_deref().or(meta.generate_name.as_deref())
}

/// `object_name` names the object when the request does not.
fn respond<O, Old>(
    types: &TypeMeta,
    request: &RequestIn<'_, O, Old>,
    object_name: Option<&str>,
    decision: Decision,
) -> Result<Reviewed, ReviewError> {
    let mut response = ResponseOut::allowed(&request.uid);
    let mut message = None;
    let mut patch_bytes = 0;
    let warnings;
    let outcome = match decision {
        Decision::Skip(reason) => Outcome::Skipped(reason),
        Decision::Admit(admission) => {
            warnings = admission.warnings;
            response.warnings = &warnings;
            if admission.patch.is_empty() {
                Outcome::Unchanged
            } else {
                let patch = admission.patch.as_json();
                patch_bytes = patch.len();
                response.patch = Some(quoted_base64(patch)?);
                response.patch_type = Some("JSONPatch");
                Outcome::Mutated
            }
        }
        Decision::Deny(denial) => {
            let code = denial.code();
            let text = denial.to_string();
            response.allowed = false;
            response.status = Status::failure(&text, denial.reason()).with_code(code);
            message = Some(text);
            Outcome::Denied(code)
        }
    };
    let body = encode(types, response)?;

    let name = request
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .or(object_name)
        .unwrap_or_default()
        .to_owned();
    Ok(Reviewed {
        body,
        outcome,
        uid: request.uid.to_string(),
        namespace: request.namespace.as_deref().unwrap_or_default().to_owned(),
        name,
        operation: request.operation.to_string(),
        dry_run: request.dry_run.unwrap_or(false),
        patch_bytes,
        message,
    })
}

/// Every response echoes the request's uid, apiVersion and kind.
fn encode(types: &TypeMeta, response: ResponseOut<'_>) -> Result<Vec<u8>, ReviewError> {
    let review = ReviewOut {
        api_version: &types.api_version,
        kind: &types.kind,
        response,
    };
    let patch_len = review.response.patch.as_ref().map_or(0, |p| p.get().len());
    let mut body = Vec::with_capacity(patch_len + ENVELOPE_BUFFER);
    serde_json::to_writer(&mut body, &review).map_err(|e| ReviewError::Encode(e.to_string()))?;
    Ok(body)
}

/// The patch as a JSON string literal of its base64 text.
fn quoted_base64(patch: &[u8]) -> Result<Box<RawValue>, ReviewError> {
    let mut quoted = String::with_capacity(patch.len().div_ceil(3) * 4 + 2);
    quoted.push('"');
    BASE64.encode_string(patch, &mut quoted);
    quoted.push('"');
    RawValue::from_string(quoted).map_err(|e| ReviewError::Encode(e.to_string()))
}

/// Everything in a response besides the patch: uid, kinds, status, warnings.
const ENVELOPE_BUFFER: usize = 512;

/// A response as kube's typed review, for callers that inspect it. kube-core
/// expects `patch` as an array of bytes, so the base64 text is decoded first.
///
/// # Errors
/// A body that is not an `AdmissionReview`, or a patch that is not base64.
pub fn parse_response(body: &[u8]) -> Result<AdmissionReview<DynamicObject>, serde_json::Error> {
    use serde::de::Error;
    let mut value: serde_json::Value = serde_json::from_slice(body)?;
    if let Some(patch) = value.pointer_mut("/response/patch")
        && let Some(text) = patch.as_str()
    {
        let bytes = BASE64
            .decode(text)
            .map_err(|e| serde_json::Error::custom(format!("patch is not base64: {e}")))?;
        *patch = serde_json::Value::from(bytes);
    }
    serde_json::from_value(value)
}

/// Allows everything without looking at the object: the cost floor of any
/// webhook on this stack (envelope parse, object skipped, response encoded).
/// Benchmarks measure the real review against it.
///
/// # Errors
/// As [`review`], for a body that is not an `AdmissionReview`.
pub fn null_review(body: &[u8]) -> Result<Vec<u8>, ReviewError> {
    let (types, request) = null_envelope(body)?;
    encode(&types, ResponseOut::allowed(&request.uid))
}

/// [`null_review`] with what the server logs and counts about it (outcome
/// `unchanged`), for the server's null handler (`serve --null-handler`),
/// so that the load benchmark compares handlers on an identical stack.
///
/// # Errors
/// As [`null_review`].
pub fn null_reviewed(body: &[u8]) -> Result<Reviewed, ReviewError> {
    let (types, request) = null_envelope(body)?;
    respond(
        &types,
        &request,
        None,
        Decision::Admit(mutate::Admission::default()),
    )
}

/// The envelope with the object skipped unread.
fn null_envelope(body: &[u8]) -> Result<(TypeMeta, RequestIn<'_, IgnoredAny>), ReviewError> {
    let review: ReviewIn<'_, IgnoredAny> = serde_json::from_str(text(body)?)?;
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    Ok((type_meta(review.api_version, review.kind), request))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::mutate::FixedToken;

    /// Bytes that are not UTF-8 are refused even inside a field nobody
    /// reads: the body is checked once, up front.
    #[test]
    fn refuses_bodies_that_are_not_utf8() {
        let config = Config::default();
        let tokens = FixedToken("t".into());
        let ctx = Context {
            config: &config,
            now: chrono::Utc::now(),
            own_namespace: None,
            tokens: &tokens,
        };
        let body = b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"x\":\"\xc3\x28\",\"request\":{\"uid\":\"u\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"operation\":\"CREATE\"}}";
        let err = review(body, &ctx).unwrap_err();
        assert!(matches!(err, ReviewError::NotUtf8(_)), "{err}");
        assert!(
            err.to_string()
                .starts_with("request body is not UTF-8 JSON")
        );
        let valid = String::from_utf8_lossy(body).into_owned();
        let ok = review(valid.as_bytes(), &ctx).unwrap();
        assert_eq!(ok.outcome, Outcome::Skipped(SkipReason::NotPodCreate));
    }
}
