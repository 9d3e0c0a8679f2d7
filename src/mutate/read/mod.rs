//! Reading the pod: the crate's hand-written readers over the raw JSON of
//! an admission request, and the Kubernetes names they look for. Nothing
//! here knows what the webhook wants of a pod.

// First, and `#[macro_use]`: the other readers use its macros.
#[macro_use]
pub(crate) mod visit;

pub(crate) mod affinity;
pub(crate) mod k8s;
pub(crate) mod lists;
pub(crate) mod pod;
pub(crate) mod raw;
pub(crate) mod text;
