//! The `AdmissionReview` v1 envelope as this webhook reads and writes it:
//! borrowed views of the request (only the fields it uses; the rest are
//! skipped unparsed) and the response.

use std::borrow::Cow;

use kube::core::Status;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// `O` is what the object is read as: a pod view on the fast path, raw
/// JSON when that fails (the object is then not a readable pod). `Old` is
/// what `oldObject` is read as: skipped unread by `/mutate` (a Pod CREATE
/// has none), read by `/validate` to see whether an UPDATE changed the
/// template.
#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "an object",
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

#[derive(Deserialize)]
#[serde(
    rename_all = "camelCase",
    expecting = "an object",
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
    pub(super) sub_resource: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) namespace: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(super) operation: Cow<'a, str>,
    #[serde(default = "Option::default")]
    pub(super) object: Option<O>,
    #[serde(default = "Option::default")]
    pub(super) old_object: Option<Old>,
    #[serde(default)]
    pub(super) dry_run: Option<bool>,
}

#[derive(Deserialize)]
#[serde(expecting = "an object")]
pub(super) struct GroupVersionKind<'a> {
    #[serde(default, borrow)]
    pub(super) group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) kind: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(expecting = "an object")]
pub(super) struct GroupVersionResource<'a> {
    #[serde(default, borrow)]
    pub(super) group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) resource: Cow<'a, str>,
}

impl<O, Old> RequestIn<'_, O, Old> {
    /// A CREATE of a core/v1 Pod without subresource: the only request the
    /// webhook mutates.
    pub(super) fn is_pod_create(&self) -> bool {
        let resource_is_pods = self
            .resource
            .as_ref()
            .is_none_or(|res| res.group.is_empty() && res.resource == "pods");
        self.operation == "CREATE"
            && self.kind.group.is_empty()
            && self.kind.version == "v1"
            && self.kind.kind == "Pod"
            && resource_is_pods
            && self.sub_resource.as_deref().is_none_or(str::is_empty)
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
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ReviewOut<'a> {
    pub(super) api_version: &'a str,
    pub(super) kind: &'a str,
    pub(super) response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResponseOut<'a> {
    pub(super) uid: &'a str,
    pub(super) allowed: bool,
    /// Always present (empty when allowed): kube-rs clients require it.
    pub(super) status: Status,
    /// Already a JSON string literal: base64 needs no escaping, so it is
    /// not scanned for any (docs/performance.md, "Why the code is shaped this way").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) patch: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub(super) warnings: &'a [String],
}

impl<'a> ResponseOut<'a> {
    pub(super) fn allowed(uid: &'a str) -> Self {
        ResponseOut {
            uid,
            allowed: true,
            status: Status::default(),
            patch: None,
            patch_type: None,
            warnings: &[],
        }
    }
}
