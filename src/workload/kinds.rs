//! The workload kinds (contract: workload.kinds) and where each keeps its pod
//! template.

use serde_json::Value;
use thiserror::Error;

/// One workload kind whose objects carry a pod template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadKind {
    /// API group; never empty (no core kind has a pod template).
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// The plural resource, as webhook rules name it.
    pub resource: &'static str,
    /// The template's path, as denials quote it (`spec.template`).
    pub path: &'static str,
    /// The same path field by field, for lookups (a field name never
    /// contains a dot, so `path` is these joined with dots).
    pub fields: &'static [&'static str],
}

const TEMPLATE: &[&str] = &["spec", "template"];

/// The kinds, in the order the contract lists them (contract:
/// workload.kinds, workload.webhook-configuration), one entry per
/// served version (a version may move the template). The chart's
/// `ValidatingWebhookConfiguration` lists the same groups, versions and
/// resources.
pub const KINDS: [WorkloadKind; 9] = [
    apps("Deployment", "deployments"),
    apps("StatefulSet", "statefulsets"),
    apps("DaemonSet", "daemonsets"),
    apps("ReplicaSet", "replicasets"),
    WorkloadKind {
        group: "batch",
        version: "v1",
        kind: "Job",
        resource: "jobs",
        path: "spec.template",
        fields: TEMPLATE,
    },
    WorkloadKind {
        group: "batch",
        version: "v1",
        kind: "CronJob",
        resource: "cronjobs",
        path: "spec.jobTemplate.spec.template",
        fields: &["spec", "jobTemplate", "spec", "template"],
    },
    WorkloadKind {
        group: "sandbox.opensandbox.io",
        version: "v1alpha1",
        kind: "BatchSandbox",
        resource: "batchsandboxes",
        path: "spec.template",
        fields: TEMPLATE,
    },
    // agent-sandbox: v1beta1 (the only version 1.0 serves) keeps the
    // template where v1alpha1 did; its template metadata holds only labels
    // and annotations, all the pod webhook writes there.
    sandbox("v1alpha1"),
    sandbox("v1beta1"),
];

const fn sandbox(version: &'static str) -> WorkloadKind {
    WorkloadKind {
        group: "agents.x-k8s.io",
        version,
        kind: "Sandbox",
        resource: "sandboxes",
        path: "spec.podTemplate",
        fields: &["spec", "podTemplate"],
    }
}

const fn apps(kind: &'static str, resource: &'static str) -> WorkloadKind {
    WorkloadKind {
        group: "apps",
        version: "v1",
        kind,
        resource,
        path: "spec.template",
        fields: TEMPLATE,
    }
}

/// A template that is there but cannot be one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum WorkloadError {
    #[error("{kind} {path} is not an object")]
    TemplateNotObject {
        kind: &'static str,
        path: &'static str,
    },
}

/// A workload's pod template and where it is.
#[derive(Debug, Clone, Copy)]
pub struct Template<'a> {
    pub kind: &'static WorkloadKind,
    /// The template object (`metadata` and `spec`).
    pub value: &'a Value,
}

impl Template<'_> {
    /// The path denials are prefixed with.
    #[must_use]
    pub fn path(&self) -> &'static str {
        self.kind.path
    }
}

impl WorkloadKind {
    /// The kind of `apiVersion` + `kind`, if it is one of [`KINDS`]. The
    /// version counts: another version may keep its template elsewhere.
    #[must_use]
    pub fn of(api_version: &str, kind: &str) -> Option<&'static WorkloadKind> {
        let (group, version) = api_version.split_once('/')?;
        KINDS
            .iter()
            .find(|k| k.group == group && k.version == version && k.kind == kind)
    }

    /// The entries of [`KINDS`] for `kind` in `api_version`'s group, when
    /// `api_version` itself is not among them: a workload at a version this
    /// table does not know (say `agents.x-k8s.io/v1`), whose template may be
    /// anywhere. Empty for every other object.
    #[must_use]
    pub fn other_versions(api_version: &str, kind: &str) -> Vec<&'static WorkloadKind> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let known: Vec<&'static WorkloadKind> = KINDS
            .iter()
            .filter(|k| k.group == group && k.kind == kind)
            .collect();
        if known.iter().any(|k| k.version == version) {
            Vec::new()
        } else {
            known
        }
    }

    /// The kind of an object, read from its `apiVersion` and `kind`.
    #[must_use]
    pub fn of_object(object: &Value) -> Option<&'static WorkloadKind> {
        let text = |field| object.get(field).and_then(Value::as_str);
        WorkloadKind::of(text("apiVersion")?, text("kind")?)
    }

    /// This kind's template in `object`; `Ok(None)` when the object has
    /// none (the apiserver's own validation is the judge of that).
    ///
    /// # Errors
    /// A value at the template's path that is not an object.
    pub fn template<'a>(
        &'static self,
        object: &'a Value,
    ) -> Result<Option<Template<'a>>, WorkloadError> {
        let mut value = object;
        for field in self.fields {
            match value.get(field) {
                Some(v) if !v.is_null() => value = v,
                _ => return Ok(None),
            }
        }
        if !value.is_object() {
            return Err(WorkloadError::TemplateNotObject {
                kind: self.kind,
                path: self.path,
            });
        }
        Ok(Some(Template { kind: self, value }))
    }

    /// The template for writing, for `inject` on manifests; `None` when
    /// there is none or it is not an object.
    pub fn template_mut<'a>(&self, object: &'a mut Value) -> Option<&'a mut Value> {
        let mut value = object;
        for field in self.fields {
            value = value.get_mut(field)?;
        }
        value.is_object().then_some(value)
    }
}

/// The pod template of a workload object: `Ok(None)` when the object is not
/// one of [`KINDS`] or has no template.
///
/// # Errors
/// As [`WorkloadKind::template`].
pub fn find_template(object: &Value) -> Result<Option<Template<'_>>, WorkloadError> {
    match WorkloadKind::of_object(object) {
        Some(kind) => kind.template(object),
        None => Ok(None),
    }
}
