//! The pod's containers and volumes as it has them, whole: for checking
//! that one which carries a name the webhook injects is exactly what it
//! injects (`layout`), and for writing the pod's own back unchanged when
//! a list is rebuilt.
//!
//! The pod view reads a container into the few facts the decisions need
//! and keeps nothing else, so a container's whole text is not at hand. It
//! is read again here, from the text the view was read from, only when the
//! pod already holds something under one of the webhook's names: a second
//! pass (reinvocation), a pod made from an injected template, or a spoof.
//! A new sandbox never comes here, and the hot path reads nothing twice.

use serde::Deserialize;
use serde_json::value::RawValue;

/// Where a pod view was read from.
#[derive(Debug, Default, Clone, Copy)]
pub enum Source<'a> {
    /// Not known (a view made by hand).
    #[default]
    Unknown,
    /// The pod's own JSON text.
    Pod(&'a str),
    /// An `AdmissionReview` whose `request.object` is the pod.
    Review(&'a str),
}

/// The pod's lists, each item's JSON text as the pod has it, in order (the
/// same order and length as the view's lists: both read the same text).
#[derive(Debug, Default)]
pub(crate) struct RawLists<'a> {
    pub init_containers: Vec<&'a RawValue>,
    pub containers: Vec<&'a RawValue>,
    pub ephemeral_containers: Vec<&'a RawValue>,
    pub volumes: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct ReviewLists<'a> {
    #[serde(default, borrow)]
    request: Option<RequestLists<'a>>,
}

#[derive(Deserialize)]
struct RequestLists<'a> {
    #[serde(default, borrow)]
    object: Option<PodLists<'a>>,
}

#[derive(Deserialize)]
struct PodLists<'a> {
    #[serde(default, borrow)]
    spec: Option<SpecLists<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecLists<'a> {
    #[serde(default, borrow)]
    init_containers: Option<Vec<&'a RawValue>>,
    #[serde(default, borrow)]
    containers: Option<Vec<&'a RawValue>>,
    #[serde(default, borrow)]
    ephemeral_containers: Option<Vec<&'a RawValue>>,
    #[serde(default, borrow)]
    volumes: Option<Vec<&'a RawValue>>,
}

impl<'a> Source<'a> {
    /// The lists, read again from the source. `None` only when the source
    /// is unknown or does not read as it did for the view, which the
    /// callers treat as a bug.
    pub(crate) fn lists(self) -> Option<RawLists<'a>> {
        let pod = match self {
            Source::Unknown => return None,
            Source::Pod(text) => serde_json::from_str::<PodLists<'a>>(text).ok()?,
            Source::Review(text) => {
                serde_json::from_str::<ReviewLists<'a>>(text)
                    .ok()?
                    .request?
                    .object?
            }
        };
        let spec = pod.spec.unwrap_or(SpecLists {
            init_containers: None,
            containers: None,
            ephemeral_containers: None,
            volumes: None,
        });
        Some(RawLists {
            init_containers: spec.init_containers.unwrap_or_default(),
            containers: spec.containers.unwrap_or_default(),
            ephemeral_containers: spec.ephemeral_containers.unwrap_or_default(),
            volumes: spec.volumes.unwrap_or_default(),
        })
    }
}

/// A container's name, image and `targetContainerName`, read from its
/// text: what an UPDATE compares and an ephemeral container's target, which
/// the pod view does not keep (no create needs them).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Named<'a> {
    #[serde(default, borrow)]
    pub name: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    pub image: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    pub target_container_name: Option<std::borrow::Cow<'a, str>>,
}

impl<'a> Named<'a> {
    /// Read from a list item; one that does not read (a pod the view
    /// refused already) names nothing.
    pub(crate) fn of(raw: &'a RawValue) -> Self {
        serde_json::from_str(raw.get()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_lists_of_a_pod_or_of_a_review_whole() {
        let pod = r#"{"metadata":{"name":"p"},"spec":{"initContainers":[{"name":"a","x":[1, 2]}],
            "containers":[{"name":"b"},{"name":"c","env":[{"name":"E","value":"\u0041"}]}]}}"#;
        let lists = Source::Pod(pod).lists().unwrap();
        assert_eq!(lists.init_containers.len(), 1);
        assert_eq!(lists.init_containers[0].get(), r#"{"name":"a","x":[1, 2]}"#);
        assert_eq!(
            lists.containers[1].get(),
            r#"{"name":"c","env":[{"name":"E","value":"\u0041"}]}"#
        );
        assert!(lists.volumes.is_empty());

        let review = format!(r#"{{"apiVersion":"v1","request":{{"uid":"u","object":{pod}}}}}"#);
        let again = Source::Review(&review).lists().unwrap();
        assert_eq!(again.containers.len(), 2);
        assert_eq!(
            again.init_containers[0].get(),
            lists.init_containers[0].get()
        );

        assert!(Source::Unknown.lists().is_none());
        let empty = Source::Pod(r#"{"spec":null}"#).lists().unwrap();
        assert!(empty.containers.is_empty());
    }
}
