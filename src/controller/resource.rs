//! [`SandboxPod`] as a Kubernetes resource: the watch, deletes and status
//! patches decode the apiserver's Pods straight into it.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::lifecycle::SandboxPod;

impl kube::Resource for SandboxPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind((): &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }
    fn group((): &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }
    fn version((): &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural((): &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}
