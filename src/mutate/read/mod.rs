//! Reading the pod: the crate's hand-written readers over the raw JSON of
//! an admission request, and the Kubernetes names they look for. Nothing
//! here knows what the webhook wants of a pod.

pub(crate) mod affinity;
pub(crate) mod k8s;
pub(crate) mod lists;
pub(crate) mod pod;
pub(crate) mod raw;
