//! What no apiserver sends, refused before it is read.
//!
//! A review's working set (the pod view, the patch, the answer) is several
//! times its object: a 7 MiB pod with a million-element entrypoint took
//! 82 MiB. The apiserver cannot store an object over etcd's request limit
//! (1.5 MiB by default), nor a pod whose annotations exceed 256 KiB
//! (validation, which runs after mutating admission). So a large body is
//! looked at first, with the objects kept raw: a request that is not a Pod
//! CREATE (or, on `/validate`, not a CREATE or UPDATE) is answered without
//! reading its object at all, and an object over [`MAX_OBJECT_BYTES`], or
//! a pod over the annotation limit, is denied with a sentence. Only then is
//! the body read as usual. Bodies up to [`LOOKED_AT_ABOVE`] skip the look:
//! neither limit can be reached by them.

use std::borrow::Cow;
use std::collections::HashMap;

use kube::core::{Status, TypeMeta};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::respond::{Outcome, ReviewError, Reviewed, finish, type_meta};
use super::wire::{Audit, RequestIn, ResponseOut, ReviewIn};
use crate::mutate::SkipReason;

/// Bodies larger than this are looked at before they are read: none of
/// the limits below can be reached by a smaller one (a value takes at
/// least 3 bytes, `"",`), and the apiserver's pod reviews are a few KiB.
pub const LOOKED_AT_ABOVE: usize = 64 * 1024;

/// The largest object (`object`, `oldObject`) a review reads, as JSON:
/// twice etcd's default request limit of 1.5 MiB, which bounds an object's
/// stored (protobuf) form; its JSON is larger, but not twice as large for
/// any pod a person writes.
pub const MAX_OBJECT_BYTES: usize = 3 * 1024 * 1024;

/// The most JSON values (array elements and object members, counted
/// together) an object a review reads may hold. A review's working set
/// grows with the values, not the bytes: `/validate` holds about 200 bytes
/// per value (a 2.9 MB Deployment of 700,000 one-letter arguments took
/// 139 MiB). No pod or workload a person writes comes near; this keeps the
/// working set of one review near 20 MiB.
pub const MAX_OBJECT_VALUES: usize = 100_000;

/// Kubernetes' limit on a pod's annotations, keys and values together
/// (`TotalAnnotationSizeLimitB`).
pub const MAX_ANNOTATION_BYTES: usize = 256 * 1024;

/// Which path is looked at.
#[derive(Clone, Copy)]
pub(super) enum Path {
    Mutate,
    Validate,
}

/// The answer to a large body that need not (or must not) be read, or
/// `None` to read it as usual (also when the envelope does not parse: the
/// usual reading then names what broke).
pub(super) fn look(body: &str, path: Path) -> Result<Option<Reviewed>, ReviewError> {
    if body.len() <= LOOKED_AT_ABOVE {
        return Ok(None);
    }
    let Ok(review) = serde_json::from_str::<ReviewIn<'_, &RawValue, &RawValue>>(body) else {
        return Ok(None);
    };
    let Some(request) = review.request else {
        return Ok(None);
    };
    let types = type_meta(review.api_version, review.kind);
    let (judged, skip) = match path {
        Path::Mutate => (
            request.is_pod_create() || request.is_pod_update(),
            SkipReason::NotPodCreate,
        ),
        Path::Validate => (request.is_create_or_update(), SkipReason::NotAWorkload),
    };
    if !judged {
        let mut response = ResponseOut::allowed(&request.uid);
        response.audit = Some(Audit::default());
        return finish(
            &types,
            &request,
            None,
            response,
            Outcome::Skipped(skip),
            None,
            0,
        )
        .map(Some);
    }
    for (field, object) in [
        ("request.object", request.object),
        ("request.oldObject", request.old_object),
    ] {
        let json = object.map_or("", RawValue::get);
        let len = json.len();
        if len > MAX_OBJECT_BYTES {
            let message = format!(
                "{field} is {len} bytes of JSON, over the {MAX_OBJECT_BYTES} this webhook reads; the API server stores no object over etcd's request limit (1.5 MiB by default), so this one cannot be created: make it smaller (a large entrypoint or script belongs in a ConfigMap or the image)."
            );
            return refuse(&types, &request, message, 413, "RequestEntityTooLarge").map(Some);
        }
        let values = values(json);
        if values > MAX_OBJECT_VALUES {
            let message = format!(
                "{field} holds about {values} JSON values (list elements and fields), over the {MAX_OBJECT_VALUES} this webhook reads: make it smaller (a long argument list or many environment variables belong in a ConfigMap or a script)."
            );
            return refuse(&types, &request, message, 413, "RequestEntityTooLarge").map(Some);
        }
    }
    if let (Path::Mutate, Some(pod)) = (path, request.object) {
        let annotations = annotation_bytes(pod.get());
        if annotations > MAX_ANNOTATION_BYTES {
            let message = format!(
                "metadata.annotations are {annotations} bytes in total (keys and values), over Kubernetes' limit of {MAX_ANNOTATION_BYTES}, so the API server would refuse this pod: make them smaller."
            );
            return refuse(&types, &request, message, 400, "BadRequest").map(Some);
        }
    }
    Ok(None)
}

fn refuse(
    types: &TypeMeta,
    request: &RequestIn<'_, &RawValue, &RawValue>,
    message: String,
    code: u16,
    reason: &str,
) -> Result<Reviewed, ReviewError> {
    let mut response = ResponseOut::allowed(&request.uid);
    response.allowed = false;
    response.status = Status::failure(&message, reason).with_code(code);
    response.audit = Some(Audit::default());
    finish(
        types,
        request,
        None,
        response,
        Outcome::Denied(code),
        Some(message),
        0,
    )
}

/// Array elements and object members in `json` (valid JSON), counted by
/// the commas and opening brackets outside strings: one pass, no parse.
fn values(json: &str) -> usize {
    let (mut count, mut in_string, mut escaped) = (0, false, false);
    for &b in json.as_bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => in_string = true,
                b',' | b'[' | b'{' => count += 1,
                _ => {}
            }
        }
    }
    count
}

#[derive(Deserialize)]
struct PodMeta<'a> {
    #[serde(default, borrow)]
    metadata: Option<Meta<'a>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(default, borrow)]
    annotations: Option<HashMap<Cow<'a, str>, Cow<'a, str>>>,
}

/// Bytes of the pod's annotations, keys and values, as Kubernetes counts
/// them; 0 when they cannot be read (the review then says why).
fn annotation_bytes(pod: &str) -> usize {
    serde_json::from_str::<PodMeta<'_>>(pod)
        .ok()
        .and_then(|p| p.metadata?.annotations)
        .map_or(0, |a| a.iter().map(|(k, v)| k.len() + v.len()).sum())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn review(operation: &str, pod: &serde_json::Value) -> String {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "team-a", "operation": operation, "object": pod}})
        .to_string()
    }

    fn pod(args: usize, annotation: usize) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "sb", "annotations": {"a": "x".repeat(annotation)}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": vec!["y"; args]}]}})
    }

    /// The answer to a CREATE of `pod`, which must be denied with `code`:
    /// it and its message.
    fn denied(pod: &serde_json::Value, code: u16) -> (Reviewed, String) {
        let answer = look(&review("CREATE", pod), Path::Mutate)
            .unwrap()
            .expect("denied");
        assert_eq!(answer.outcome, Outcome::Denied(code));
        let message = answer.message.clone().unwrap();
        (answer, message)
    }

    #[test]
    fn small_bodies_are_not_looked_at() {
        let body = review("CREATE", &pod(10, 10));
        assert!(look(&body, Path::Mutate).unwrap().is_none());
    }

    #[test]
    fn a_pod_no_apiserver_can_store_is_denied_unread() {
        // 800,000 arguments: 3.2 MB of JSON.
        let (answer, message) = denied(&pod(800_000, 10), 413);
        assert!(
            message.starts_with("request.object is 3200") && message.contains("over the 3145728"),
            "{message}"
        );
        let text = String::from_utf8(answer.body).unwrap();
        assert!(text.contains(r#""allowed":false"#) && text.contains("RequestEntityTooLarge"));
    }

    #[test]
    fn an_object_of_too_many_values_is_denied_unread() {
        let (_, message) = denied(&pod(120_000, 10), 413);
        assert!(
            message.starts_with("request.object holds about 1200"),
            "{message}"
        );
        assert!(
            look(&review("CREATE", &pod(90_000, 10)), Path::Mutate)
                .unwrap()
                .is_none()
        );
        // Commas, brackets and escaped quotes inside strings are not values.
        assert_eq!(values(r#"{"a":["x,[{","y\",{"],"b":{"c":1}}"#), 5);
    }

    #[test]
    fn annotations_over_the_limit_are_denied() {
        let (_, message) = denied(&pod(1, MAX_ANNOTATION_BYTES), 400);
        assert!(message.contains("262145 bytes"), "{message}");
        // At the limit exactly: read as usual.
        let body = review("CREATE", &pod(1, MAX_ANNOTATION_BYTES - 1));
        assert!(look(&body, Path::Mutate).unwrap().is_none());
    }

    #[test]
    fn what_is_not_judged_is_answered_without_reading_the_object() {
        let body = review("DELETE", &pod(800_000, 10));
        let answer = look(&body, Path::Mutate).unwrap().expect("answered");
        assert_eq!(answer.outcome, Outcome::Skipped(SkipReason::NotPodCreate));
        // A pod UPDATE is judged (contract: select.pod-update), so it is
        // held to the same limits.
        let body = review("UPDATE", &pod(800_000, 10));
        let answer = look(&body, Path::Mutate).unwrap().expect("answered");
        assert_eq!(answer.outcome, Outcome::Denied(413));
        let body = review("DELETE", &pod(800_000, 10));
        let answer = look(&body, Path::Validate).unwrap().expect("answered");
        assert_eq!(answer.outcome, Outcome::Skipped(SkipReason::NotAWorkload));
        // A large pod under the limits, and a body that is not a review:
        // read as usual.
        assert!(
            look(&review("CREATE", &pod(90_000, 10)), Path::Mutate)
                .unwrap()
                .is_none()
        );
        assert!(
            look(&"x".repeat(LOOKED_AT_ABOVE + 1), Path::Mutate)
                .unwrap()
                .is_none()
        );
    }
}
