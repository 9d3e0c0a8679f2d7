//! The invariants every answer of `review::review` must keep, beyond "no
//! panic": the response is JSON and echoes the request; a denial carries a
//! code and a sentence; a patch is base64 JSON Patch that applies to the
//! request's object; and the patched pod, admitted again, needs no patch
//! (`reinvocationPolicy: IfNeeded` relies on it).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use sandbox_webhook::config::Config;
use sandbox_webhook::review::{self, Outcome, ReviewError, Reviewed};
use serde::Deserialize;
use serde_json::Value;
use thiserror::Error;

use crate::with_context;

#[derive(Debug, Error)]
pub enum Violation {
    #[error("review could not encode its own answer: {0}")]
    Encode(String),
    #[error("review answered a body whose envelope does not read: {0}")]
    Envelope(serde_json::Error),
    #[error("the response is not JSON: {0}")]
    ResponseNotJson(serde_json::Error),
    #[error("the response does not echo {field}: request {request:?}, response {response}")]
    Echo {
        field: &'static str,
        request: String,
        response: Value,
    },
    #[error("malformed response: {problem}; response {response}")]
    Shape { problem: String, response: Value },
    #[error("the patch does not apply to the request object: {0}")]
    PatchDoesNotApply(String),
    #[error("re-admitting the patched pod {0}")]
    NotIdempotent(String),
}

/// What a body got, for the replay's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Not an `AdmissionReview` (HTTP 400 at the server).
    Refused,
    Answered(Outcome),
}

/// Reviews `body` under `config` and checks the answer.
///
/// # Errors
///
/// The invariant the answer breaks: a finding.
pub fn check_review(body: &[u8], config: &Config) -> Result<Answer, Violation> {
    let reviewed = match with_context(config, |ctx| review::review(body, ctx)) {
        Ok(r) => r,
        Err(ReviewError::Encode(e)) => return Err(Violation::Encode(e)),
        Err(_) => return Ok(Answer::Refused),
    };
    let envelope: Envelope = serde_json::from_slice(body).map_err(Violation::Envelope)?;
    let response = check_response(&reviewed, &envelope)?;
    if let Some(patch) = response {
        check_patch(body, &patch, config)?;
    }
    Ok(Answer::Answered(reviewed.outcome))
}

/// The fields a response must echo, read as `review` reads them (escapes
/// decoded, defaults for the missing ones).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<RequestUid>,
}

#[derive(Deserialize)]
struct RequestUid {
    uid: String,
}

/// Checks the response's shape; returns the decoded patch, if any.
fn check_response(
    reviewed: &Reviewed,
    envelope: &Envelope,
) -> Result<Option<json_patch::Patch>, Violation> {
    let response: Value =
        serde_json::from_slice(&reviewed.body).map_err(Violation::ResponseNotJson)?;
    let uid = envelope.request.as_ref().map_or("", |r| r.uid.as_str());
    for (field, pointer, expected) in [
        ("apiVersion", "/apiVersion", envelope.api_version.as_str()),
        ("kind", "/kind", envelope.kind.as_str()),
        ("uid", "/response/uid", uid),
    ] {
        if response.pointer(pointer).and_then(Value::as_str) != Some(expected) {
            return Err(Violation::Echo {
                field,
                request: expected.to_owned(),
                response,
            });
        }
    }
    let shape = |problem: &str| {
        Err(Violation::Shape {
            problem: problem.to_owned(),
            response: response.clone(),
        })
    };
    let answer = &response["response"];
    let Some(allowed) = answer["allowed"].as_bool() else {
        return shape("allowed is not a boolean");
    };
    if !answer["status"].is_object() {
        return shape("status is missing");
    }
    if let Some(warnings) = answer.get("warnings") {
        let Some(warnings) = warnings.as_array() else {
            return shape("warnings is not a list");
        };
        if warnings
            .iter()
            .any(|w| w.as_str().is_none_or(|w| w.chars().count() > 120))
        {
            return shape("a warning is not a string of at most 120 characters");
        }
    }
    let patch = answer.get("patch");
    if !allowed {
        let code = answer["status"]["code"].as_u64();
        if !matches!(code, Some(400 | 403 | 500)) {
            return shape("a denial's status.code is not 400, 403 or 500");
        }
        if answer["status"]["message"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            return shape("a denial has no status.message");
        }
        if patch.is_some() {
            return shape("a denial carries a patch");
        }
        return Ok(None);
    }
    let Some(patch) = patch else {
        if reviewed.outcome == Outcome::Mutated {
            return shape("outcome mutated without a patch");
        }
        return Ok(None);
    };
    if reviewed.outcome != Outcome::Mutated {
        return shape("a patch on an answer whose outcome is not mutated");
    }
    if answer["patchType"].as_str() != Some("JSONPatch") {
        return shape("patchType is not JSONPatch");
    }
    let Some(bytes) = patch.as_str().and_then(|p| BASE64.decode(p).ok()) else {
        return shape("patch is not base64 text");
    };
    match serde_json::from_slice::<json_patch::Patch>(&bytes) {
        Ok(p) if p.0.is_empty() => shape("the patch is empty"),
        Ok(p) => Ok(Some(p)),
        Err(_) => shape("the patch is not a JSON Patch"),
    }
}

/// Applies the patch to the request's object, then admits the patched pod
/// again under the same configuration, clock and token.
fn check_patch(body: &[u8], patch: &json_patch::Patch, config: &Config) -> Result<(), Violation> {
    // serde_json's tree has a nesting limit that the webhook's one-pass read
    // (which skips unread fields without building them) does not: a body
    // nested deeper than that cannot be patched here, and is not checked.
    let Ok(mut request) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    let Some(object) = request.pointer_mut("/request/object") else {
        return Err(Violation::PatchDoesNotApply(
            "the request has no object".into(),
        ));
    };
    // The webhook draws a new egress token at random, after the pod was
    // written, so no pod can hold it beforehand; the harness's token is
    // fixed and the fuzzer copies it into pods. A pod that already holds it
    // is denied when admitted again (the token is then the pod's, and in
    // its containers: contract egress.token-exposure), which no real pod
    // can meet. Its patch must still apply.
    let holds_token = holds(object, crate::TOKEN);
    json_patch::patch(object, patch).map_err(|e| Violation::PatchDoesNotApply(e.to_string()))?;
    if holds_token {
        return Ok(());
    }
    let again = request.to_string();
    let second = with_context(config, |ctx| review::review(again.as_bytes(), ctx))
        .map_err(|e| Violation::NotIdempotent(format!("is refused: {e}")))?;
    match second.outcome {
        Outcome::Unchanged | Outcome::Skipped(_) => Ok(()),
        other => Err(Violation::NotIdempotent(format!(
            "is {}: {}",
            other.as_str(),
            String::from_utf8_lossy(&second.body)
        ))),
    }
}

/// Whether a string value anywhere in `value` contains `needle`.
fn holds(value: &Value, needle: &str) -> bool {
    match value {
        Value::String(s) => s.contains(needle),
        Value::Array(items) => items.iter().any(|v| holds(v, needle)),
        Value::Object(map) => map.values().any(|v| holds(v, needle)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configs;

    /// The fuzzer's finding: a pod whose image holds the harness's fixed
    /// token is mutated, and its patch applies; its second admission (then
    /// denied, the token being in a container) is not held against it.
    #[test]
    fn a_pod_holding_the_fixed_token_is_not_a_finding() {
        let body = include_bytes!("../corpus/review_raw/a-pod-that-holds-the-harnesss-fixed-token");
        for (name, config) in &configs().all {
            check_review(body, config).unwrap_or_else(|v| panic!("configuration {name}: {v}"));
        }
        let other =
            String::from_utf8_lossy(body).replace(crate::TOKEN, "notTheTokenNotTheTokenNotTheTok0");
        for (name, config) in &configs().all {
            check_review(other.as_bytes(), config)
                .unwrap_or_else(|v| panic!("configuration {name}, another image: {v}"));
        }
    }
}
