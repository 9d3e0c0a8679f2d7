//! Which pods are left alone (contract: select.excluded-namespace,
//! select.sandbox-label, select.opt-out, select.order). Each reason has one
//! name, used as the metric label and in logs, and one sentence.

use super::context::Context;
use super::read::pod::PodView;

/// The namespace a request is judged in: the request's, else the pod's
/// own, else `default` (an empty one counts as none).
pub(super) fn request_namespace<'a>(request: Option<&'a str>, pod: &'a PodView<'_>) -> &'a str {
    request
        .filter(|n| !n.is_empty())
        .or(pod.namespace())
        .unwrap_or("default")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Not a CREATE of a core/v1 Pod without subresource.
    NotPodCreate,
    /// `/validate`: not a CREATE or UPDATE of a workload kind (contract:
    /// workload.skips).
    NotAWorkload,
    /// `/validate`: an UPDATE that leaves the pod template as it was.
    TemplateUnchanged,
    ExcludedNamespace,
    NotASandbox,
    OptOut,
    /// OpenSandbox's server already completed the pod, and its annotations
    /// ask for nothing more (contract: coexist.kept).
    ServerCompleted,
}

impl SkipReason {
    pub const ALL: [SkipReason; 7] = [
        SkipReason::NotPodCreate,
        SkipReason::NotAWorkload,
        SkipReason::TemplateUnchanged,
        SkipReason::ExcludedNamespace,
        SkipReason::NotASandbox,
        SkipReason::OptOut,
        SkipReason::ServerCompleted,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NotPodCreate => "not-pod-create",
            SkipReason::NotAWorkload => "not-a-workload",
            SkipReason::TemplateUnchanged => "template-unchanged",
            SkipReason::ExcludedNamespace => "excluded-namespace",
            SkipReason::NotASandbox => "not-a-sandbox",
            SkipReason::OptOut => "opt-out",
            SkipReason::ServerCompleted => "server-completed",
        }
    }

    #[must_use]
    pub fn sentence(self) -> &'static str {
        match self {
            SkipReason::NotPodCreate => "the request is not the creation of a pod",
            SkipReason::NotAWorkload => {
                "the request is not the creation or update of a workload with a pod template"
            }
            SkipReason::TemplateUnchanged => "the update leaves the pod template as it was",
            SkipReason::ExcludedNamespace => "the namespace is excluded from sandbox injection",
            SkipReason::NotASandbox => "the pod has no sandbox id label",
            SkipReason::OptOut => "the pod opted out of sandbox injection",
            SkipReason::ServerCompleted => {
                "an OpenSandbox installer (its server, or this webhook on an earlier pass) already completed the pod"
            }
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
