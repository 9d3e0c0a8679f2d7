//! What `/mutate` (`review`) and `/validate` (`validate`) share: the body
//! read as text, and a decision turned into the response, the
//! `AdmissionReview` written once into its buffer with what the server logs
//! and counts about it.

use std::borrow::Cow;

use kube::core::{Status, TypeMeta};
use thiserror::Error;

use serde_json::value::RawValue;

use super::wire::{Audit, RequestIn, ResponseOut};
use crate::json::error::JsonError;
use crate::mutate::{Admission, Decision, Risk, SkipReason};

/// A request that cannot be answered with an `AdmissionReview` at all; the
/// server turns these into HTTP 400.
#[derive(Debug, Error)]
pub enum ReviewError {
    #[error("request body is empty")]
    Empty,
    #[error("request body is not UTF-8 JSON: {0}")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("request body is not an AdmissionReview: {0}")]
    Json(JsonError),
    #[error("request body is not an AdmissionReview: request: is required but missing or null")]
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
    /// A pod OpenSandbox's server completed in a shape that could undo its
    /// policy, to be counted (contract: coexist.risks).
    pub risk: Option<Risk>,
}

/// The body as text, checked for UTF-8 once, so that `serde_json` can borrow
/// strings without validating each again. JSON must be UTF-8 (RFC 8259),
/// and the apiserver only sends UTF-8.
pub(super) fn text(body: &[u8]) -> Result<&str, ReviewError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ReviewError::Empty);
    }
    Ok(std::str::from_utf8(body)?)
}

/// The envelope read as `T`, with the path of what broke when it cannot
/// be: read plainly first, and again with the path tracked only when that
/// failed.
pub(super) fn envelope<'a, T: serde::Deserialize<'a>>(body: &'a str) -> Result<T, ReviewError> {
    serde_json::from_str(body)
        .or_else(|_| crate::json::error::from_str(body, "").map_err(ReviewError::Json))
}

pub(super) fn type_meta(api_version: Cow<'_, str>, kind: Cow<'_, str>) -> TypeMeta {
    TypeMeta {
        api_version: api_version.into_owned(),
        kind: kind.into_owned(),
    }
}

/// What an answer is about, for its audit annotations.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Subject<'a> {
    /// The pod's `<prefix>/id` label, as its JSON.
    pub(super) sandbox_id: Option<&'a RawValue>,
    /// `/validate`: an admitted workload is `allowed`, never `unchanged`,
    /// since nothing there could have changed it.
    pub(super) workload: bool,
    /// The benchmarks' null handler: no audit annotations, so its answer
    /// is [`super::null_review`]'s, byte for byte.
    pub(super) bare: bool,
}

/// `object_name` names the object when the request does not.
pub(super) fn respond<O, Old>(
    types: &TypeMeta,
    request: &RequestIn<'_, O, Old>,
    object_name: Option<&str>,
    decision: Decision,
    subject: Subject<'_>,
) -> Result<Reviewed, ReviewError> {
    let mut response = ResponseOut::allowed(&request.uid);
    let mut message = None;
    let mut risk = None;
    let admission;
    let mut injected = None;
    let (outcome, patch_bytes) = match decision {
        Decision::Skip(reason) => (Outcome::Skipped(reason), 0),
        Decision::ServerCompleted(completed) => {
            risk = completed.risk;
            admission = completed.admission;
            let unchanged = Outcome::Skipped(SkipReason::ServerCompleted);
            carry(&mut response, &admission, unchanged)
        }
        Decision::Admit(admitted) => {
            admission = admitted;
            injected = admission.injected.as_ref();
            let unchanged = if subject.workload {
                Outcome::Allowed
            } else {
                Outcome::Unchanged
            };
            carry(&mut response, &admission, unchanged)
        }
        Decision::Deny(denial) => {
            let code = denial.code();
            let text = denial.to_string();
            response.allowed = false;
            response.status = Status::failure(&text, denial.reason()).with_code(code);
            message = Some(text);
            (Outcome::Denied(code), 0)
        }
    };
    if !subject.bare {
        response.audit = Some(Audit {
            sandbox_id: subject.sandbox_id,
            injected,
            ..Audit::default()
        });
    }
    let mut reviewed = finish(
        types,
        request,
        object_name,
        response,
        outcome,
        message,
        patch_bytes,
    )?;
    reviewed.risk = risk;
    Ok(reviewed)
}

/// An admission's warnings and patch into `response`: `Mutated` with the
/// patch's size in bytes, or `unchanged` when there is nothing to patch.
fn carry<'a>(
    response: &mut ResponseOut<'a>,
    admission: &'a Admission,
    unchanged: Outcome,
) -> (Outcome, usize) {
    response.warnings = &admission.warnings;
    if admission.patch.is_empty() {
        return (unchanged, 0);
    }
    let patch = admission.patch.as_json();
    response.patch = Some(patch);
    (Outcome::Mutated, patch.len())
}

/// `response` encoded, with what the server logs and counts about it. Its
/// audit annotations (every answer but the null handler's) get the
/// decision from `outcome`.
pub(super) fn finish<O, Old>(
    types: &TypeMeta,
    request: &RequestIn<'_, O, Old>,
    object_name: Option<&str>,
    mut response: ResponseOut<'_>,
    outcome: Outcome,
    message: Option<String>,
    patch_bytes: usize,
) -> Result<Reviewed, ReviewError> {
    if let Some(audit) = response.audit.as_mut() {
        audit.decision = outcome.as_str();
        audit.skip_reason = match outcome {
            Outcome::Skipped(reason) => Some(reason.as_str()),
            _ => None,
        };
    }
    let body = encode(types, &response)?;
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
        risk: None,
    })
}

/// Every response echoes the request's uid, apiVersion and kind.
pub(super) fn encode(types: &TypeMeta, response: &ResponseOut<'_>) -> Result<Vec<u8>, ReviewError> {
    let mut body = Vec::with_capacity(response.size_hint());
    response
        .write(&types.api_version, &types.kind, &mut body)
        .map_err(|e| ReviewError::Encode(e.to_string()))?;
    Ok(body)
}
