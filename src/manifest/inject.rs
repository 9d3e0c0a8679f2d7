//! Injection of the objects of a manifest (contract: manifest.templates,
//! manifest.pass-through): a Pod as the webhook admits it, a workload's pod
//! template as the webhook will admit its pods (as `istioctl kube-inject`
//! does), a `List` item by item; anything else passes through. What happened to
//! each is recorded in order, for `inject` to print and for `test` to compare.

use serde_json::Value;

use crate::mutate::{self, Context, Decision, Denial, SkipReason};
use crate::workload::{self, WorkloadKind};

/// The apiserver refuses a request body over 3 MiB (`kubectl apply` sends
/// each object in one), so a bigger object could never be applied.
pub const MAX_REQUEST_BYTES: usize = 3 * 1024 * 1024;

/// The webhook's decision on one Pod or pod template.
#[derive(Debug)]
pub enum Outcome {
    Mutated,
    Unchanged,
    Skipped(SkipReason),
    Denied(Denial),
}

/// One Pod or pod template judged: where it is, how it went, its warnings,
/// and for a Pod the webhook's own patch.
#[derive(Debug)]
pub struct Judged {
    /// `document 2 (Deployment/web) spec.template`; empty for a lone Pod.
    pub at: String,
    pub outcome: Outcome,
    pub warnings: Vec<String>,
    /// The operations the webhook answers with (Pods only: a template's
    /// pods get their own).
    pub patch: Option<json_patch::Patch>,
}

/// Something besides a judgement that the reader should know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    /// Labelled as a sandbox but with no pod template: passed through.
    NoTemplate,
    /// A workload kind at a version whose template path is not known
    /// (`agents.x-k8s.io/v2` Sandbox): passed through.
    UnknownVersion,
    /// The egress token was left out of a template, or a template carries
    /// one that every replica would share.
    TemplateToken,
    /// The object is over the apiserver's request limit.
    TooLarge,
}

#[derive(Debug)]
pub enum Entry {
    Judged(Judged),
    Note {
        kind: NoteKind,
        at: String,
        text: String,
    },
}

/// Injects objects one after another and records what happened.
pub struct Injector<'a, 'c> {
    ctx: &'a Context<'c>,
    pub entries: Vec<Entry>,
    /// Whether a Pod's patch is kept in its entry (the default). A caller
    /// that needs none turns it off, so that what is recorded for each of
    /// many Pods stays a few hundred bytes.
    pub keep_patches: bool,
}

impl<'a, 'c> Injector<'a, 'c> {
    #[must_use]
    pub fn new(ctx: &'a Context<'c>) -> Self {
        Injector {
            ctx,
            entries: Vec::new(),
            keep_patches: true,
        }
    }

    /// Whether anything was denied (nothing is written then).
    #[must_use]
    pub fn denied(&self) -> bool {
        self.entries.iter().any(|e| {
            matches!(
                e,
                Entry::Judged(Judged {
                    outcome: Outcome::Denied(_),
                    ..
                })
            )
        })
    }

    /// Injects one object in place; true if it changed. `at` names it in
    /// what is recorded (empty for a lone Pod); `raw` is its own JSON text
    /// when the input was JSON, so number literals reach the webhook as
    /// written (`Value` turns big integers into floats).
    pub fn object(&mut self, v: &mut Value, raw: Option<&str>, at: &str) -> bool {
        let changed = self.inject(v, raw, at);
        if kind(v) != Some("List") {
            self.check_size(v, at);
        }
        changed
    }

    fn inject(&mut self, v: &mut Value, raw: Option<&str>, at: &str) -> bool {
        let name = describe(v);
        let located = |what: &str| {
            if at.is_empty() {
                String::new()
            } else {
                format!("{at} ({what})")
            }
        };
        if kind(v) == Some("List") {
            let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) else {
                return false;
            };
            let mut changed = false;
            for (i, item) in items.iter_mut().enumerate() {
                changed |= self.object(item, None, &format!("{at}, items[{i}]"));
            }
            return changed;
        }
        let namespace = v
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if kind(v) == Some("Pod") {
            let text = raw.map_or_else(|| v.to_string(), str::to_owned);
            return match self.decide(v, &text, namespace.as_deref(), located(&name), true) {
                Some(patched) => {
                    *v = patched;
                    true
                }
                None => false,
            };
        }
        if let Some(kind) = WorkloadKind::of_object(v) {
            return self.workload(kind, v, namespace.as_deref(), &located(&name));
        }
        let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let object_kind = kind(v).unwrap_or("");
        let known = WorkloadKind::other_versions(api_version, object_kind);
        if !known.is_empty() {
            let known: Vec<String> = known
                .iter()
                .map(|k| format!("{}/{}", k.group, k.version))
                .collect();
            self.entries.push(Entry::Note {
                kind: NoteKind::UnknownVersion,
                at: located(&name),
                text: format!(
                    "{object_kind} {api_version} is not a version inject knows ({}): \
                     passed through unchanged; the webhook still injects its pods at admission",
                    known.join(", ")
                ),
            });
            return false;
        }
        let id = &self.ctx.config.keys().id;
        if v.pointer("/metadata/labels")
            .and_then(|l| l.get(id))
            .is_some()
        {
            self.entries.push(Entry::Note {
                kind: NoteKind::NoTemplate,
                at: located(&name),
                text: format!(
                    "labelled {id} but not a Pod nor a workload with a pod template \
                     (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, BatchSandbox, Sandbox); \
                     passed through unchanged"
                ),
            });
        }
        false
    }

    /// The template injected as the pod webhook will inject its pods, less
    /// what belongs to one pod only: `expires-at` is computed at each pod's
    /// admission (the template keeps its `timeout`), and the egress token is
    /// made for each pod at its admission (a token in the template would be
    /// shared by every replica, land in the repository, and change at every
    /// run).
    fn workload(
        &mut self,
        kind: &'static WorkloadKind,
        v: &mut Value,
        ns: Option<&str>,
        at: &str,
    ) -> bool {
        let Ok(Some(template)) = kind.template(v) else {
            return false;
        };
        let pod = workload::template_pod(template.value);
        let at = format!("{at} {}", kind.path).trim_start().to_owned();
        let keys = self.ctx.config.keys();
        let annotation = |p: &Value, key: &str| {
            p.pointer("/metadata/annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let had_token = annotation(&pod, &keys.egress_auth_token).is_some();
        let Some(mut patched) = self.decide(&pod, &pod.to_string(), ns, at.clone(), false) else {
            if had_token {
                self.shared_token_note(&at);
            }
            return false;
        };
        let token = annotation(&patched, &keys.egress_auth_token);
        if let Some(annotations) = patched
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            if annotation(&pod, &keys.expires_at).is_none() {
                annotations.remove(&keys.expires_at);
            }
            if !had_token {
                annotations.remove(&keys.egress_auth_token);
            }
        }
        // Annotations the patch made only for what was taken out again.
        let emptied = patched
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(serde_json::Map::is_empty);
        if emptied
            && pod.pointer("/metadata/annotations").is_none()
            && let Some(meta) = patched.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("annotations");
        }
        match token {
            Some(token) if !had_token => {
                mutate::strip_egress_token(&mut patched, &token);
                self.entries.push(Entry::Note {
                    kind: NoteKind::TemplateToken,
                    at: at.clone(),
                    text: format!(
                        "the egress token is left out of the template: the webhook gives each pod its own at admission ({})",
                        keys.egress_auth_token
                    ),
                });
            }
            Some(_) => self.shared_token_note(&at),
            None => {}
        }
        if patched == pod {
            return false;
        }
        let Some(target) = kind.template_mut(v) else {
            return false;
        };
        for field in ["metadata", "spec"] {
            if let Some(value) = patched.get_mut(field).map(Value::take) {
                target[field] = value;
            }
        }
        true
    }

    fn shared_token_note(&mut self, at: &str) {
        let key = &self.ctx.config.keys().egress_auth_token;
        self.entries.push(Entry::Note {
            kind: NoteKind::TemplateToken,
            at: at.to_owned(),
            text: format!(
                "the template carries {key}, so every replica shares one egress token; remove it and the webhook gives each pod its own"
            ),
        });
    }

    /// The pod webhook's decision on `pod` (whose JSON text is `text`),
    /// recorded: the patched pod when it admits with changes, `None` when
    /// it leaves the pod alone or denies it.
    fn decide(
        &mut self,
        pod: &Value,
        text: &str,
        ns: Option<&str>,
        at: String,
        keep_patch: bool,
    ) -> Option<Value> {
        let (outcome, warnings, patched, patch) = match mutate::decide(text, ns, self.ctx) {
            Decision::Deny(denial) => (Outcome::Denied(denial), Vec::new(), None, None),
            Decision::Skip(reason) => (Outcome::Skipped(reason), Vec::new(), None, None),
            // What OpenSandbox's server built is the server's: kept as built.
            Decision::ServerCompleted(completed) if completed.admission.patch.is_empty() => (
                Outcome::Skipped(SkipReason::ServerCompleted),
                completed.admission.warnings,
                None,
                None,
            ),
            Decision::ServerCompleted(mutate::Completed { admission, .. })
            | Decision::Admit(admission) => {
                let applied = admission.patch.operations().ok().and_then(|ops| {
                    let mut patched = pod.clone();
                    json_patch::patch(&mut patched, &ops).ok()?;
                    Some((patched, ops))
                });
                match applied {
                    Some((patched, ops)) if !ops.is_empty() => (
                        Outcome::Mutated,
                        admission.warnings,
                        Some(patched),
                        Some(ops),
                    ),
                    Some((_, ops)) => (Outcome::Unchanged, admission.warnings, None, Some(ops)),
                    // A patch that does not apply is a bug in the core;
                    // the denial says so rather than printing a half pod.
                    None => (
                        Outcome::Denied(Denial::PatchEncoding(
                            "the patch does not apply to the pod".to_owned(),
                        )),
                        Vec::new(),
                        None,
                        None,
                    ),
                }
            }
        };
        self.entries.push(Entry::Judged(Judged {
            at,
            outcome,
            warnings,
            patch: patch
                .filter(|_| keep_patch && self.keep_patches)
                .map(json_patch::Patch),
        }));
        patched
    }

    fn check_size(&mut self, v: &Value, at: &str) {
        let size = serde_json::to_vec(v).map_or(0, |b| b.len());
        if size > MAX_REQUEST_BYTES {
            let what = if at.is_empty() {
                describe(v)
            } else {
                format!("{at} ({})", describe(v))
            };
            #[expect(clippy::cast_precision_loss, reason = "a size shown to one decimal")]
            let mib = size as f64 / (1024.0 * 1024.0);
            self.entries.push(Entry::Note {
                kind: NoteKind::TooLarge,
                at: what,
                text: format!(
                    "{mib:.1} MiB as JSON, over the apiserver's 3 MiB request limit: kubectl apply will fail"
                ),
            });
        }
    }
}

fn kind(v: &Value) -> Option<&str> {
    v.get("kind").and_then(Value::as_str)
}

/// `Deployment/web` (or the kind alone), for notes and denials.
#[must_use]
pub fn describe(v: &Value) -> String {
    let kind = kind(v).unwrap_or("object");
    match v.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => format!("{kind}/{name}"),
        None => kind.to_owned(),
    }
}
