//! A response made readable: its `patch` from base64 text back to the JSON
//! patch it carries (`review --decode`, and the case runner's expected
//! files). The wire form stays base64, as Go's `[]byte` expects.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::Value;
use thiserror::Error;

use crate::json::error::JsonError;

/// Why a response cannot be decoded: each is a broken promise of the
/// webhook's own answers.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("the response is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    #[error("the patch is not base64 text")]
    PatchNotText,
    #[error("the patch is not base64: {0}")]
    PatchNotBase64(#[source] base64::DecodeError),
    #[error("the patch is not a JSON patch: {0}")]
    PatchNotJsonPatch(#[source] JsonError),
    #[error("the patch cannot be shown: {0}")]
    PatchNotShown(#[source] serde_json::Error),
    #[error("a patch without patchType JSONPatch")]
    PatchType,
}

/// The `AdmissionReview` in `body`, with `response.patch` (when there is
/// one) replaced by the JSON patch its base64 text encodes. Key order is
/// kept.
///
/// # Errors
/// A body that is not JSON, or a patch that is not base64 text of a JSON
/// patch under `patchType: JSONPatch`.
pub fn decoded(body: &[u8]) -> Result<Value, DecodeError> {
    let mut review: Value = serde_json::from_slice(body).map_err(DecodeError::NotJson)?;
    let Some(response) = review.get_mut("response") else {
        return Ok(review);
    };
    if let Some(patch) = response.get_mut("patch") {
        let text = patch.as_str().ok_or(DecodeError::PatchNotText)?;
        let bytes = BASE64.decode(text).map_err(DecodeError::PatchNotBase64)?;
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            DecodeError::PatchNotJsonPatch(JsonError {
                path: "patch".to_owned(),
                problem: "is not UTF-8".to_owned(),
            })
        })?;
        let ops: json_patch::Patch =
            crate::json::error::from_str(text, "patch").map_err(DecodeError::PatchNotJsonPatch)?;
        *patch = serde_json::to_value(ops).map_err(DecodeError::PatchNotShown)?;
        if response.get("patchType").and_then(Value::as_str) != Some("JSONPatch") {
            return Err(DecodeError::PatchType);
        }
    }
    Ok(review)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn with_patch(patch: &Value, patch_type: &str) -> Vec<u8> {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": "u", "allowed": true, "patchType": patch_type, "patch": patch}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn decodes_the_patch_in_place() {
        let ops = r#"[{"op":"add","path":"/a","value":1}]"#;
        let review =
            decoded(&with_patch(&json!(BASE64.encode(ops)), "JSONPatch")).expect("decodes");
        assert_eq!(
            review["response"]["patch"],
            json!([{"op": "add", "path": "/a", "value": 1}])
        );
        assert_eq!(review["response"]["uid"], "u");
    }

    #[test]
    fn a_response_without_a_patch_is_unchanged() {
        let body = br#"{"response":{"uid":"u","allowed":false,"status":{"code":400}}}"#;
        let review = decoded(body).expect("decodes");
        assert_eq!(review, serde_json::from_slice::<Value>(body).expect("JSON"));
    }

    #[test]
    fn refuses_a_patch_that_is_not_base64_text_of_a_json_patch() {
        let ops = r#"[{"op":"add","path":"/a","value":1}]"#;
        let cases = [
            (
                with_patch(&json!(ops.as_bytes()), "JSONPatch"),
                "not base64 text",
            ),
            (with_patch(&json!("not base64!"), "JSONPatch"), "not base64"),
            (
                with_patch(&json!(BASE64.encode("{}")), "JSONPatch"),
                "not a JSON patch",
            ),
            (
                with_patch(&json!(BASE64.encode(ops)), "MergePatch"),
                "patchType",
            ),
            (b"{".to_vec(), "not JSON"),
            (
                with_patch(&json!(BASE64.encode("[5]")), "JSONPatch"),
                "not a JSON patch: patch[0]: expected one of the allowed forms, got the number 5",
            ),
            (
                with_patch(&json!(BASE64.encode(b"[\"\xff\"]")), "JSONPatch"),
                "not a JSON patch: patch: is not UTF-8",
            ),
        ];
        for (body, says) in cases {
            let err = decoded(&body).expect_err(says).to_string();
            assert!(err.contains(says), "{err}");
        }
    }
}
