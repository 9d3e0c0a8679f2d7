//! The `AdmissionReview` v1 envelope as this webhook reads and writes it:
//! borrowed views of the request (only the fields it uses; the rest are
//! skipped unparsed) and the response.

use std::borrow::Cow;

use base64_simd::STANDARD as BASE64;
use kube::core::Status;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::json::text::Text;
use crate::mutate::Injected;

/// `O` is what the object is read as: a pod view on the fast path, raw
/// JSON when that fails (the object is then not a readable pod). `Old` is
/// what `oldObject` is read as: skipped unread by `/mutate` (a Pod CREATE
/// has none), read by `/validate` to see whether an UPDATE changed the
/// template.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    remote = "Self",
    bound(deserialize = "O: Deserialize<'de>, Old: Deserialize<'de>")
)]
pub(super) struct ReviewIn<'a, O, Old = IgnoredAny> {
    #[serde(default, borrow)]
    pub(super) api_version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) request: Option<RequestIn<'a, O, Old>>,
}

objects_only! {
    impl<'de, 'a, O, Old> for ReviewIn<'a, O, Old> where ['de: 'a, O: Deserialize<'de>, Old: Deserialize<'de>];
}

#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    remote = "Self",
    bound(deserialize = "O: Deserialize<'de>, Old: Deserialize<'de>")
)]
pub(super) struct RequestIn<'a, O, Old = IgnoredAny> {
    #[serde(borrow)]
    pub(super) uid: Cow<'a, str>,
    #[serde(borrow)]
    pub(super) kind: GroupVersionKind<'a>,
    #[serde(default, borrow)]
    pub(super) resource: Option<GroupVersionResource<'a>>,
    #[serde(default, borrow)]
    pub(super) sub_resource: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub(super) name: Option<Text<'a>>,
    #[serde(default, borrow)]
    pub(super) namespace: Option<Text<'a>>,
    #[serde(borrow)]
    pub(super) operation: Cow<'a, str>,
    #[serde(default = "Option::default")]
    pub(super) object: Option<O>,
    #[serde(default = "Option::default")]
    pub(super) old_object: Option<Old>,
    #[serde(default)]
    pub(super) dry_run: Option<bool>,
}

objects_only! {
    impl<'de, 'a, O, Old> for RequestIn<'a, O, Old> where ['de: 'a, O: Deserialize<'de>, Old: Deserialize<'de>];
}

#[derive(Deserialize)]
#[serde(remote = "Self")]
pub(super) struct GroupVersionKind<'a> {
    #[serde(default, borrow)]
    pub(super) group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) kind: Cow<'a, str>,
}

objects_only! {
    impl<'de, 'a> for GroupVersionKind<'a> where ['de: 'a];
}

#[derive(Deserialize)]
#[serde(remote = "Self")]
pub(super) struct GroupVersionResource<'a> {
    #[serde(default, borrow)]
    pub(super) group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) resource: Cow<'a, str>,
}

objects_only! {
    impl<'de, 'a> for GroupVersionResource<'a> where ['de: 'a];
}

impl<O, Old> RequestIn<'_, O, Old> {
    /// A CREATE of a core/v1 Pod without subresource: the only request the
    /// webhook mutates.
    pub(super) fn is_pod_create(&self) -> bool {
        self.operation == "CREATE"
            && self.is_core_pod()
            && self.sub_resource.as_deref().is_none_or(str::is_empty)
    }

    /// An UPDATE of a core/v1 Pod, whole or of its ephemeral containers:
    /// what `/mutate` judges after admission (contract: select.pod-update).
    pub(super) fn is_pod_update(&self) -> bool {
        self.operation == "UPDATE"
            && self.is_core_pod()
            && self
                .sub_resource
                .as_deref()
                .is_none_or(|s| s.is_empty() || s == crate::mutate::EPHEMERAL_CONTAINERS)
    }

    /// Of kind core/v1 Pod, and of resource `pods` when the request names
    /// one.
    fn is_core_pod(&self) -> bool {
        self.kind.group.is_empty()
            && self.kind.version == "v1"
            && self.kind.kind == "Pod"
            && self
                .resource
                .as_ref()
                .is_none_or(|res| res.group.is_empty() && res.resource == "pods")
    }

    /// A CREATE or UPDATE of a whole object (no subresource): the only
    /// requests `/validate` judges. The kind is read from the object.
    pub(super) fn is_create_or_update(&self) -> bool {
        matches!(self.operation.as_ref(), "CREATE" | "UPDATE")
            && self.sub_resource.as_deref().is_none_or(str::is_empty)
    }
}

/// The `AdmissionReview` v1 response on the wire. kube-core's
/// `AdmissionResponse` writes `patch` as a JSON array of byte values, which
/// the apiserver accepts but which is three to four times the size of the
/// base64 text Go's `[]byte` is meant to carry; the patch is on every
/// sandbox create, so it goes out as base64. `status` reuses kube's type.
pub(super) struct ResponseOut<'a> {
    pub(super) uid: &'a str,
    pub(super) allowed: bool,
    /// Always present (empty when allowed): kube-rs clients require it.
    pub(super) status: Status,
    /// The JSON patch, written as base64 with `patchType: JSONPatch`.
    pub(super) patch: Option<&'a [u8]>,
    pub(super) warnings: &'a [String],
    /// `auditAnnotations`, on every answer but the benchmarks' null one.
    pub(super) audit: Option<Audit<'a>>,
}

/// What the apiserver's audit log records of an answer (contract:
/// audit.annotations). The apiserver prefixes each key with the webhook's
/// name and a `/`, so a key is a qualified name's last part (no `/`, at most
/// 63 characters). The keys and the decision are static text, and every
/// value is already in hand: writing them is a few copies, no second pass.
#[derive(Debug, Default)]
pub(super) struct Audit<'a> {
    /// `mutated`, `unchanged`, `allowed`, `skipped` or `denied`.
    pub(super) decision: &'static str,
    pub(super) skip_reason: Option<&'static str>,
    /// The pod's `<prefix>/id` label, as its JSON.
    pub(super) sandbox_id: Option<&'a RawValue>,
    pub(super) injected: Option<&'a Injected>,
}

/// Longest sandbox id written as it came: a label value has at most 63
/// characters, so a longer one (which the apiserver will refuse) is cut.
const SANDBOX_ID_MAX: usize = 63;

impl Audit<'_> {
    fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        out.extend_from_slice(br#","auditAnnotations":{"decision":""#);
        out.extend_from_slice(self.decision.as_bytes());
        out.push(b'"');
        if let Some(reason) = self.skip_reason {
            out.extend_from_slice(br#","skip-reason":""#);
            out.extend_from_slice(reason.as_bytes());
            out.push(b'"');
        }
        if let Some(id) = self.sandbox_id.map(RawValue::get) {
            // The label's own JSON text, when it is a short string; a long
            // one is read and cut, anything else is no id.
            if id.starts_with('"') && id.len() <= SANDBOX_ID_MAX + 2 {
                out.extend_from_slice(br#","sandbox-id":"#);
                out.extend_from_slice(id.as_bytes());
            } else if let Ok(id) = serde_json::from_str::<String>(id) {
                let cut = id
                    .char_indices()
                    .nth(SANDBOX_ID_MAX)
                    .map_or(id.as_str(), |(at, _)| &id[..at]);
                out.extend_from_slice(br#","sandbox-id":"#);
                serde_json::to_writer(&mut *out, cut)?;
            }
        }
        if let Some(injected) = self.injected {
            if let Some(policy) = injected.policy() {
                out.extend_from_slice(br#","policy":""#);
                out.extend_from_slice(policy.as_bytes());
                out.push(b'"');
            }
            out.extend_from_slice(br#","images":""#);
            out.extend_from_slice(injected.images_escaped().as_bytes());
            out.push(b'"');
        }
        out.push(b'}');
        Ok(())
    }

    /// Bytes enough for the annotations.
    fn size_hint(&self) -> usize {
        let images = self.injected.map_or(0, |i| i.images().len() * 5 / 4);
        160 + images + self.sandbox_id.map_or(0, |id| id.get().len().min(80))
    }
}

impl<'a> ResponseOut<'a> {
    pub(super) fn allowed(uid: &'a str) -> Self {
        ResponseOut {
            uid,
            allowed: true,
            status: Status::default(),
            patch: None,
            warnings: &[],
            audit: None,
        }
    }

    /// The whole `AdmissionReview` into `out`, which should have room for
    /// [`ResponseOut::size_hint`] bytes: the fixed keys as they are, strings,
    /// status and warnings through `serde_json`, and the patch encoded as
    /// base64 straight into the buffer. Base64 needs no escaping, so it
    /// goes in without an intermediate `String` or `RawValue` and without
    /// being scanned again; `base64-simd` encodes it with the CPU's vector
    /// instructions, at a sixth of the `base64` crate's cost on a 1 KB
    /// patch (docs/performance.md, "Why the code is shaped this way"). The
    /// keys and their order are those of kube's `AdmissionReview`.
    pub(super) fn write(
        &self,
        api_version: &str,
        kind: &str,
        out: &mut Vec<u8>,
    ) -> serde_json::Result<()> {
        out.extend_from_slice(br#"{"apiVersion":"#);
        serde_json::to_writer(&mut *out, api_version)?;
        out.extend_from_slice(br#","kind":"#);
        serde_json::to_writer(&mut *out, kind)?;
        out.extend_from_slice(br#","response":{"uid":"#);
        serde_json::to_writer(&mut *out, self.uid)?;
        out.extend_from_slice(if self.allowed {
            br#","allowed":true,"status":"#
        } else {
            br#","allowed":false,"status":"#
        });
        serde_json::to_writer(&mut *out, &self.status)?;
        if let Some(patch) = self.patch {
            out.extend_from_slice(br#","patch":""#);
            // Into the buffer's spare room: no zeroing of bytes the
            // encoder overwrites at once.
            BASE64.encode_append(patch, out);
            out.extend_from_slice(br#"","patchType":"JSONPatch""#);
        }
        if !self.warnings.is_empty() {
            out.extend_from_slice(br#","warnings":"#);
            serde_json::to_writer(&mut *out, self.warnings)?;
        }
        if let Some(audit) = &self.audit {
            audit.write(out)?;
        }
        out.extend_from_slice(b"}}");
        Ok(())
    }

    /// Bytes enough for the response: the base64 patch and room for the
    /// rest (uid, kinds, status, warnings).
    pub(super) fn size_hint(&self) -> usize {
        self.patch.map_or(0, |p| BASE64.encoded_length(p.len()))
            + ENVELOPE_BUFFER
            + self.audit.as_ref().map_or(0, Audit::size_hint)
    }
}

/// Everything in a response besides the patch: uid, kinds, status, warnings.
const ENVELOPE_BUFFER: usize = 512;

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use proptest::prelude::*;

    use super::*;

    /// The `patch` text of a response carrying `patch`.
    fn patch_text(patch: &[u8]) -> String {
        let mut response = ResponseOut::allowed("u");
        response.patch = Some(patch);
        let mut out = Vec::with_capacity(response.size_hint());
        response
            .write("admission.k8s.io/v1", "AdmissionReview", &mut out)
            .expect("a response is always written");
        let json: serde_json::Value = serde_json::from_slice(&out).expect("the response is JSON");
        assert_eq!(json["response"]["patchType"], "JSONPatch");
        json["response"]["patch"]
            .as_str()
            .expect("patch is a string")
            .to_owned()
    }

    /// The vector encoder's text is standard padded base64 (what Go's
    /// `[]byte` decodes) at every length up to 700 bytes, so across each of
    /// its block sizes and every tail, with every byte value.
    #[test]
    fn the_patch_is_standard_base64_at_every_length() {
        for n in 0..=700_usize {
            let patch: Vec<u8> = (0..n)
                .map(|i| u8::try_from((i * 37 + n) % 256).unwrap())
                .collect();
            let text = patch_text(&patch);
            assert_eq!(text, STANDARD.encode(&patch), "{n} bytes");
            assert_eq!(text.len(), n.div_ceil(3) * 4, "{n} bytes");
        }
    }

    proptest! {
        #[test]
        fn the_patch_is_standard_base64(patch in proptest::collection::vec(any::<u8>(), 0..4096)) {
            prop_assert_eq!(patch_text(&patch), STANDARD.encode(&patch));
        }
    }
}
