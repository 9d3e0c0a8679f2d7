//! `AdmissionReview` in, `AdmissionReview` out.
//!
//! Invariant: a review reads its bytes once. The request envelope is read
//! into a borrowed view and the object straight into a pod view in the same
//! pass; the fields the webhook does not read are skipped unparsed
//! (docs/performance.md, "Why the code is shaped this way"). The response
//! (`wire::ResponseOut`) echoes uid, apiVersion and kind, carries the patch as
//! base64 and reuses kube's `Status`.

mod decode;
mod respond;
mod size;
mod validate;
mod wire;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use kube::core::admission::AdmissionReview;
use kube::core::{DynamicObject, TypeMeta};
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::mutate::read::pod::{PodView, Source};
use crate::mutate::{self, Context, Decision, Denial, SkipReason};
use respond::{Subject, encode, envelope, respond, text, type_meta};
use wire::{RequestIn, ResponseOut, ReviewIn};

pub use decode::{DecodeError, decoded};
pub use respond::{Outcome, ReviewError, Reviewed};
pub use size::{LOOKED_AT_ABOVE, MAX_ANNOTATION_BYTES, MAX_OBJECT_BYTES, MAX_OBJECT_VALUES};
pub use validate::validate;

/// Answers one `AdmissionReview` request body.
///
/// A body over [`LOOKED_AT_ABOVE`] is looked at first (`size`): what no
/// apiserver sends is refused, and what is not a Pod CREATE answered,
/// without reading the object. The fast path reads the object straight
/// into a pod view in the same pass as the envelope. If that fails, the object is not a readable pod, or not
/// a pod at all: the envelope is read again with the object kept raw, and
/// only a Pod CREATE turns the bad object into a denial. A Pod CREATE
/// without an object is denied too: there is no pod to admit.
///
/// # Errors
/// A body that is not an `AdmissionReview` with a request (the server answers
/// HTTP 400), or a response that cannot be encoded.
pub fn review(body: &[u8], ctx: &Context<'_>) -> Result<Reviewed, ReviewError> {
    let body = text(body)?;
    if let Some(answer) = size::look(body, size::Path::Mutate)? {
        return Ok(answer);
    }
    if let Ok(review) = serde_json::from_str::<ReviewIn<'_, PodView<'_>>>(body) {
        let mut request = review.request.ok_or(ReviewError::NoRequest)?;
        if request.is_pod_update() {
            return update(body, ctx);
        }
        let types = type_meta(review.api_version, review.kind);
        if let Some(pod) = request.object.as_mut() {
            pod.source = Source::Review(body);
        }
        return match request.object.as_ref().filter(|_| request.is_pod_create()) {
            Some(pod) => {
                let decision = mutate::decide_view(pod, request.namespace.as_deref(), ctx);
                let subject = Subject {
                    sandbox_id: pod.label(&ctx.config.keys().id),
                    ..Subject::default()
                };
                respond(&types, &request, pod_name(pod), decision, subject)
            }
            None => respond(
                &types,
                &request,
                None,
                without_pod(&request),
                Subject::default(),
            ),
        };
    }
    let review: ReviewIn<'_, &RawValue> = envelope(body)?;
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let types = type_meta(review.api_version, review.kind);
    let decision = match request.object.filter(|_| request.is_pod_create()) {
        None => without_pod(&request),
        Some(raw) => Decision::Deny(Denial::MalformedPod(PodView::unreadable(
            raw.get(),
            "request.object",
        ))),
    };
    respond(&types, &request, None, decision, Subject::default())
}

/// A Pod UPDATE (contract: select.pod-update): both objects read as pods,
/// off the path of every create. Either missing, or not a readable pod,
/// is a request no apiserver sends: nothing to judge.
fn update(body: &str, ctx: &Context<'_>) -> Result<Reviewed, ReviewError> {
    let review: ReviewIn<'_, &RawValue, &RawValue> = envelope(body)?;
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let types = type_meta(review.api_version, review.kind);
    let (new, old) = (
        request.object.and_then(|r| PodView::parse(r.get()).ok()),
        request
            .old_object
            .and_then(|r| PodView::parse(r.get()).ok()),
    );
    let decision = match (&new, &old) {
        (Some(new), Some(old)) => mutate::judge_update(
            new,
            old,
            request.sub_resource.as_deref(),
            request.namespace.as_deref(),
            ctx,
        )
        .into(),
        _ => Decision::Skip(SkipReason::NotPodCreate),
    };
    let subject = Subject {
        sandbox_id: new
            .as_ref()
            .and_then(|pod| pod.label(&ctx.config.keys().id)),
        ..Subject::default()
    };
    respond(
        &types,
        &request,
        new.as_ref().and_then(pod_name),
        decision,
        subject,
    )
}

/// A request whose object was not read as a pod: skipped unless it is a
/// Pod CREATE, whose object (null or missing) is then no pod at all.
fn without_pod<O, Old>(request: &RequestIn<'_, O, Old>) -> Decision {
    if request.is_pod_create() {
        Decision::Deny(Denial::MalformedPod(NO_OBJECT.to_owned()))
    } else {
        Decision::Skip(SkipReason::NotPodCreate)
    }
}

/// The apiserver always sends the pod on a CREATE; a review without one
/// cannot be admitted unmutated.
const NO_OBJECT: &str = "request.object: a Pod CREATE carries the pod, but it is null or missing";

/// `metadata.name`, else `generateName`: what the log line calls a pod
/// whose request carries no name.
fn pod_name<'p>(pod: &'p PodView<'_>) -> Option<&'p str> {
    let meta = pod.metadata.as_ref()?;
    meta.name.as_deref().or(meta.generate_name.as_deref())
}

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
    encode(&types, &ResponseOut::allowed(&request.uid))
}

/// [`null_review`] with what the server logs and counts about it (outcome
/// `unchanged`), for the server's null handler (`serve --null-handler`),
/// so that the load benchmark compares handlers on an identical stack.
///
/// # Errors
/// As [`null_review`].
pub fn null_reviewed(body: &[u8]) -> Result<Reviewed, ReviewError> {
    let (types, request) = null_envelope(body)?;
    let bare = Subject {
        bare: true,
        ..Subject::default()
    };
    respond(
        &types,
        &request,
        None,
        Decision::Admit(mutate::Admission::default()),
        bare,
    )
}

/// [`null_reviewed`] that answers with `patch`, whatever the object: the
/// server's fixed-patch handler (`serve --fixed-patch`), with which the
/// apiserver benchmark (bench/apiserver.sh) measures what applying a patch
/// of a given shape costs the apiserver.
///
/// # Errors
/// As [`null_review`].
pub fn fixed_reviewed(body: &[u8], patch: &mutate::Patch) -> Result<Reviewed, ReviewError> {
    let (types, request) = null_envelope(body)?;
    let admission = mutate::Admission {
        patch: patch.clone(),
        ..mutate::Admission::default()
    };
    respond(
        &types,
        &request,
        None,
        Decision::Admit(admission),
        Subject::default(),
    )
}

/// The envelope with the object skipped unread.
fn null_envelope(body: &[u8]) -> Result<(TypeMeta, RequestIn<'_, IgnoredAny>), ReviewError> {
    let review: ReviewIn<'_, IgnoredAny> = envelope(text(body)?)?;
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    Ok((type_meta(review.api_version, review.kind), request))
}

#[cfg(test)]
mod tests {
    mod audit;

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
        let body = b"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"x\":\"\xc3\x28\",\"request\":{\"uid\":\"u\",\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"operation\":\"DELETE\"}}";
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
