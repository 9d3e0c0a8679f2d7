//! Which pods are left alone (SPEC 1). Each reason has one name, used as the
//! metric label and in logs, and one sentence.

use super::Context;
use super::pod::PodView;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Not a CREATE of a core/v1 Pod without subresource.
    NotPodCreate,
    ExcludedNamespace,
    NotASandbox,
    OptOut,
}

impl SkipReason {
    pub const ALL: [SkipReason; 4] = [
        SkipReason::NotPodCreate,
        SkipReason::ExcludedNamespace,
        SkipReason::NotASandbox,
        SkipReason::OptOut,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NotPodCreate => "not-pod-create",
            SkipReason::ExcludedNamespace => "excluded-namespace",
            SkipReason::NotASandbox => "not-a-sandbox",
            SkipReason::OptOut => "opt-out",
        }
    }

    #[must_use]
    pub fn sentence(self) -> &'static str {
        match self {
            SkipReason::NotPodCreate => "the request is not the creation of a pod",
            SkipReason::ExcludedNamespace => "the namespace is excluded from sandbox injection",
            SkipReason::NotASandbox => "the pod has no sandbox id label",
            SkipReason::OptOut => "the pod opted out of sandbox injection",
        }
    }
}

/// Namespace first (an excluded namespace is never touched, whatever its
/// pods say), then the sandbox label; opt-out is read with the annotations.
pub fn skip_reason(pod: &PodView<'_>, namespace: &str, ctx: &Context<'_>) -> Option<SkipReason> {
    let config = ctx.config;
    if ctx.own_namespace == Some(namespace)
        || config.excluded_namespaces.iter().any(|n| n == namespace)
    {
        return Some(SkipReason::ExcludedNamespace);
    }
    if pod.label(&config.keys().id).is_none() {
        return Some(SkipReason::NotASandbox);
    }
    None
}
