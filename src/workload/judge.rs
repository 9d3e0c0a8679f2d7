//! The pre-flight: a workload's pod template judged exactly as the pod
//! webhook will judge the pods made from it.

use serde_json::{Map, Value};

use super::kinds::{Template, WorkloadKind};
use crate::mutate::{self, Context, Decision, Denial, FixedToken, SkipReason};

/// How a workload fares.
#[derive(Debug)]
pub enum Verdict {
    /// Allowed without judging a template, for a reason that goes to logs
    /// and metrics.
    NotJudged(SkipReason),
    /// The pod webhook would admit the template's pods. Its warnings come
    /// along, prefixed with the template's path.
    Allowed { warnings: Vec<String> },
    /// The pod webhook would deny the template's pods: its denial, inside a
    /// [`Denial::InTemplate`] that names the template's path.
    Denied(Denial),
}

/// Warnings are at most this many characters (contract: workload.warnings),
/// prefix included.
const MAX_WARNING: usize = 120;

/// The token the judged pod would get. Nothing is written, so the token is
/// never seen; a fixed one keeps the pre-flight from drawing randomness
/// (or failing to) for a value it throws away.
const UNSEEN_TOKEN: &str = "pre-flight-token-never-written";

/// Judges a workload on CREATE (`old` is `None`) or UPDATE. On UPDATE a
/// template left as it was is not judged again, so that a configuration
/// tightened since the workload was created does not block the writes of
/// its controller (status without a subresource, finalizers): its pods are
/// judged by the pod webhook anyway. `namespace` is the request's; an empty
/// one falls back to the object's own.
#[must_use]
pub fn judge_change(
    object: &Value,
    old: Option<&Value>,
    namespace: Option<&str>,
    ctx: &Context<'_>,
) -> Verdict {
    let Some(kind) = WorkloadKind::of_object(object) else {
        return Verdict::NotJudged(SkipReason::NotAWorkload);
    };
    // A template that is missing or not an object carries no sandbox label;
    // the apiserver's own validation judges its shape.
    let Ok(Some(template)) = kind.template(object) else {
        return Verdict::NotJudged(SkipReason::NotASandbox);
    };
    let old_template = old
        .filter(|old| WorkloadKind::of_object(old) == Some(kind))
        .and_then(|old| kind.template(old).ok().flatten());
    if old_template.is_some_and(|t| t.value == template.value) {
        return Verdict::NotJudged(SkipReason::TemplateUnchanged);
    }
    let namespace = namespace.filter(|n| !n.is_empty()).or_else(|| {
        object
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
    });
    judge(&template, namespace, ctx)
}

/// Judges one template as the pod webhook judges a pod made from it in
/// `namespace`: same configuration, same clock, same decision. A template
/// without the sandbox label is not judged, even if it is malformed (the
/// pod webhook never reads such a pod either).
#[must_use]
pub fn judge(template: &Template<'_>, namespace: Option<&str>, ctx: &Context<'_>) -> Verdict {
    let id = &ctx.config.keys().id;
    let labelled = template
        .value
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(|l| l.get(id))
        .is_some();
    if !labelled {
        return Verdict::NotJudged(SkipReason::NotASandbox);
    }
    let pod = template_pod(template.value).to_string();
    let tokens = FixedToken(UNSEEN_TOKEN.to_owned());
    let ctx = Context {
        config: ctx.config,
        now: ctx.now,
        own_namespace: ctx.own_namespace,
        tokens: &tokens,
    };
    let path = template.path();
    match mutate::decide(&pod, namespace, &ctx) {
        Decision::Skip(reason) => Verdict::NotJudged(reason),
        Decision::ServerCompleted(completed) if completed.admission.patch.is_empty() => {
            Verdict::NotJudged(SkipReason::ServerCompleted)
        }
        Decision::ServerCompleted(mutate::Completed { admission, .. })
        | Decision::Admit(admission) => Verdict::Allowed {
            warnings: admission
                .warnings
                .iter()
                .map(|w| prefixed(path, w))
                .collect(),
        },
        Decision::Deny(denial) => Verdict::Denied(Denial::InTemplate {
            path,
            denial: Box::new(denial),
        }),
    }
}

/// The Pod the template's controller would create: `apiVersion`, `kind`,
/// and the template's `metadata` and `spec` as they are.
#[must_use]
pub fn template_pod(template: &Value) -> Value {
    let mut pod = Map::with_capacity(4);
    pod.insert("apiVersion".into(), "v1".into());
    pod.insert("kind".into(), "Pod".into());
    for field in ["metadata", "spec"] {
        if let Some(v) = template.get(field) {
            pod.insert(field.into(), v.clone());
        }
    }
    Value::Object(pod)
}

/// `path: warning`, cut to [`MAX_WARNING`] characters with an ellipsis.
fn prefixed(path: &str, warning: &str) -> String {
    let text = format!("{path}: {warning}");
    match text.char_indices().nth(MAX_WARNING - 1) {
        Some((end, _)) if text.chars().count() > MAX_WARNING => format!("{}…", &text[..end]),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// contract: workload.warnings
    #[test]
    fn warnings_are_cut_to_120_characters_with_their_prefix() {
        assert_eq!(prefixed("spec.template", "short"), "spec.template: short");
        let exact = "é".repeat(MAX_WARNING - "spec.template: ".len());
        assert_eq!(
            prefixed("spec.template", &exact).chars().count(),
            MAX_WARNING
        );
        assert!(!prefixed("spec.template", &exact).ends_with('…'));
        let long = prefixed("spec.template", &"é".repeat(500));
        assert_eq!(long.chars().count(), MAX_WARNING);
        assert!(long.starts_with("spec.template: é") && long.ends_with("é…"));
    }
}
