//! `/validate`: an `AdmissionReview` of a workload in, allowed or denied out,
//! never a patch (contract: workload.no-patch). The envelope is read by the
//! same types as `/mutate`'s; the decision is [`workload::judge_change`].

use serde_json::Value;

use super::respond::{ReviewError, Reviewed, Subject, envelope, respond, text, type_meta};
use super::size::{Path, look};
use super::wire::ReviewIn;
use crate::mutate::{Admission, Context, Decision, SkipReason};
use crate::workload::{self, Verdict};

/// Answers one `AdmissionReview` of a workload CREATE or UPDATE. The object
/// (and, on UPDATE, the old object) is read whole: a workload is judged
/// once per change, not once per pod, so this path is not the hot one.
///
/// # Errors
/// As [`super::review`]: a body that is not an `AdmissionReview` with a
/// request, or a response that cannot be encoded.
pub fn validate(body: &[u8], ctx: &Context<'_>) -> Result<Reviewed, ReviewError> {
    let body = text(body)?;
    if let Some(answer) = look(body, Path::Validate)? {
        return Ok(answer);
    }
    let review: ReviewIn<'_, Value, Value> = envelope(body)?;
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let types = type_meta(review.api_version, review.kind);
    let object = request
        .object
        .as_ref()
        .filter(|_| request.is_create_or_update());
    let verdict = match object {
        None => Verdict::NotJudged(SkipReason::NotAWorkload),
        Some(object) => {
            let old = request
                .old_object
                .as_ref()
                .filter(|_| request.operation == "UPDATE");
            workload::judge_change(object, old, request.namespace.as_deref(), ctx)
        }
    };
    let decision = match verdict {
        Verdict::NotJudged(reason) => Decision::Skip(reason),
        Verdict::Allowed { warnings } => Decision::Admit(Admission {
            warnings,
            ..Admission::default()
        }),
        Verdict::Denied(denial) => Decision::Deny(denial),
    };
    let name = object
        .and_then(|o| o.get("metadata"))
        .and_then(|m| m.get("name").or_else(|| m.get("generateName")))
        .and_then(Value::as_str);
    let subject = Subject {
        workload: true,
        ..Subject::default()
    };
    respond(&types, &request, name, decision, subject)
}
