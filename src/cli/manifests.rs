//! `inject` on manifests as they are kept in repositories (SPEC 11): several
//! YAML documents, a `kind: List`, workloads whose pod template is injected
//! as `istioctl kube-inject` does. A single Pod takes the path of
//! `super::offline`; everything else comes here.
//!
//! An object the webhook does not change is written back as the text it was
//! read from, comments and key order included (`serde_yaml_ng` keeps neither).
//! A changed object is written by `super::yaml`, in its own key order, with
//! ambiguous strings quoted. Documents keep their order.

use std::process::ExitCode;

use serde_json::Value;

use super::args::DecisionArgs;
use super::{exit, yaml};
use crate::config::Config;
use crate::mutate::{self, Context, Decision};
use crate::workload::{self, WorkloadKind};

/// What became of the input: the text to print, notes for stderr, and the
/// denials (any one makes the command exit 1).
pub struct Injected {
    pub output: String,
    pub notes: Vec<String>,
    pub denials: Vec<String>,
}

/// A single Pod document goes the single-pod way; anything else is a
/// manifest stream. Input that does not parse is left to that path too, so
/// its error stays the same.
pub fn is_stream(input: &str, is_json: bool) -> bool {
    if is_json {
        return serde_json::from_str::<Value>(input).is_ok_and(|v| kind(&v) != Some("Pod"));
    }
    let docs = documents(input);
    let parsed: Vec<Option<Value>> = docs.iter().map(|d| parse(d).ok().flatten()).collect();
    match parsed.as_slice() {
        [Some(v)] => kind(v) != Some("Pod"),
        _ => docs.len() > 1,
    }
}

fn kind(v: &Value) -> Option<&str> {
    v.get("kind").and_then(Value::as_str)
}

/// YAML documents as written: split at `---` lines, each kept whole.
fn documents(input: &str) -> Vec<&str> {
    let mut docs = Vec::new();
    let mut start = 0;
    let mut offset = 0;
    for line in input.split_inclusive('\n') {
        let bare = line.trim_end();
        if bare == "---" || bare.starts_with("--- ") || bare.starts_with("---\t") {
            docs.push(&input[start..offset]);
            start = offset;
        }
        offset += line.len();
    }
    docs.push(&input[start..]);
    // A leading `---` makes an empty first piece; a document of only
    // comments is kept (it is written back as it was).
    docs.retain(|d| !d.trim().is_empty());
    docs
}

/// `None` for a document that holds no object (comments only, `null`).
fn parse(doc: &str) -> Result<Option<Value>, String> {
    let v: Value = serde_yaml_ng::from_str(doc).map_err(|e| e.to_string())?;
    Ok((!v.is_null()).then_some(v))
}

pub fn inject(input: &str, is_json: bool, ctx: &Context<'_>) -> Result<Injected, String> {
    let mut run = Run {
        ctx,
        notes: Vec::new(),
        denials: Vec::new(),
    };
    if is_json {
        let mut v: Value = serde_json::from_str(input).map_err(|e| e.to_string())?;
        let changed = run.object(&mut v, "the object");
        let output = if changed {
            serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n"
        } else {
            input.to_owned()
        };
        return Ok(run.done(output));
    }
    let mut output = String::new();
    for (i, doc) in documents(input).into_iter().enumerate() {
        let mut v = match parse(doc) {
            Ok(Some(v)) => v,
            Ok(None) => {
                push_doc(&mut output, doc);
                continue;
            }
            Err(e) => return Err(format!("document {}: {e}", i + 1)),
        };
        if run.object(&mut v, &format!("document {}", i + 1)) {
            output.push_str("---\n");
            output.push_str(&yaml::to_string(&v));
        } else {
            push_doc(&mut output, doc);
        }
    }
    Ok(run.done(output))
}

/// The stream as it is written when nothing in it changes: each document as
/// read, after a `---` of its own. The "before" of `-o diff`, so that the
/// separators the writer adds do not show as changes.
fn written_back(input: &str) -> String {
    let mut output = String::new();
    for doc in documents(input) {
        push_doc(&mut output, doc);
    }
    output
}

/// An untouched document, as it was, after a `---` of its own.
fn push_doc(output: &mut String, doc: &str) {
    if !doc.trim_start().starts_with("---") {
        output.push_str("---\n");
    }
    output.push_str(doc);
    if !doc.ends_with('\n') {
        output.push('\n');
    }
}

struct Run<'a, 'c> {
    ctx: &'a Context<'c>,
    notes: Vec<String>,
    denials: Vec<String>,
}

impl Run<'_, '_> {
    fn done(self, output: String) -> Injected {
        Injected {
            output,
            notes: self.notes,
            denials: self.denials,
        }
    }

    /// Injects one object in place; true if it changed.
    fn object(&mut self, v: &mut Value, at: &str) -> bool {
        let name = describe(v);
        if kind(v) == Some("List") {
            let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) else {
                return false;
            };
            let mut changed = false;
            for (i, item) in items.iter_mut().enumerate() {
                changed |= self.object(item, &format!("{at}, items[{i}]"));
            }
            return changed;
        }
        let namespace = v
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if kind(v) == Some("Pod") {
            return match self.decide(v, namespace.as_deref(), &format!("{at} ({name})")) {
                Some(patched) => {
                    *v = patched;
                    true
                }
                None => false,
            };
        }
        if let Some(kind) = WorkloadKind::of_object(v) {
            return self.workload(kind, v, namespace.as_deref(), &format!("{at} ({name})"));
        }
        let id = &self.ctx.config.keys().id;
        if v.pointer("/metadata/labels")
            .and_then(|l| l.get(id))
            .is_some()
        {
            self.notes.push(format!(
                "{at} ({name}): labelled {id} but not a Pod nor a workload with a pod template \
                 (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob, BatchSandbox, Sandbox); \
                 passed through unchanged"
            ));
        }
        false
    }

    /// The template injected as the pod webhook would inject its pods, less
    /// what belongs to one pod only: `expires-at` is computed at each pod's
    /// admission (the template keeps its `timeout`).
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
        let at = format!("{at} {}", kind.path);
        let Some(mut patched) = self.decide(&pod, ns, &at) else {
            return false;
        };
        let expires_at = &self.ctx.config.keys().expires_at;
        let had_expiry = pod
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(expires_at))
            .is_some();
        if !had_expiry
            && let Some(annotations) = patched
                .pointer_mut("/metadata/annotations")
                .and_then(Value::as_object_mut)
        {
            annotations.remove(expires_at);
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

    /// The pod webhook's decision on `pod`: the patched pod when it admits
    /// with changes, `None` when it leaves the pod alone or denies it.
    fn decide(&mut self, pod: &Value, ns: Option<&str>, at: &str) -> Option<Value> {
        match mutate::decide(&pod.to_string(), ns, self.ctx) {
            Decision::Deny(denial) => {
                self.denials.push(format!("{at}: {denial}"));
                None
            }
            Decision::Skip(reason) => {
                self.notes.push(format!(
                    "{at}: skipped ({}): {}",
                    reason.as_str(),
                    reason.sentence()
                ));
                None
            }
            Decision::Admit(admission) => {
                for w in &admission.warnings {
                    self.notes.push(format!("{at}: warning: {w}"));
                }
                let ops = admission.patch.operations().ok()?;
                if ops.is_empty() {
                    return None;
                }
                let mut patched = pod.clone();
                json_patch::patch(&mut patched, &ops).ok()?;
                Some(patched)
            }
        }
    }
}

/// `Deployment/web` (or the kind alone), for notes and denials.
fn describe(v: &Value) -> String {
    let kind = kind(v).unwrap_or("object");
    match v.pointer("/metadata/name").and_then(Value::as_str) {
        Some(name) => format!("{kind}/{name}"),
        None => kind.to_owned(),
    }
}

/// `inject` on a manifest stream: the output on stdout (with `diff_name`, a
/// unified diff of the stream's text before and after under that name),
/// notes on stderr, exit 1 if any pod or template is denied (nothing is
/// printed then).
pub fn run(
    input: &str,
    is_json: bool,
    config: &Config,
    decision: &DecisionArgs,
    diff_name: Option<&str>,
) -> ExitCode {
    let tokens = decision.tokens();
    let ctx = decision.context(config, tokens.as_ref());
    let injected = match inject(input, is_json, &ctx) {
        Ok(injected) => injected,
        Err(e) => return exit::error(format!("not a manifest: {e}")),
    };
    for note in &injected.notes {
        eprintln!("{note}");
    }
    if !injected.denials.is_empty() {
        for denial in &injected.denials {
            eprintln!("{denial}");
        }
        return exit::REJECTED;
    }
    let output = match diff_name {
        None => Ok(injected.output),
        // A JSON List is compared as pretty JSON, as a single Pod is.
        Some(name) if is_json => serde_json::from_str(input)
            .and_then(|before| Ok((before, serde_json::from_str(&injected.output)?)))
            .map_err(|e| e.to_string())
            .and_then(|(before, after)| super::views::diff_text(&before, &after, true, name)),
        // YAML: unchanged objects are written back as read, so only the
        // changed documents show in a diff of the text.
        Some(name) => Ok(super::views::text_diff(
            &written_back(input),
            &injected.output,
            name,
        )),
    };
    match output {
        Ok(text) => super::io::write_stdout(text.as_bytes()),
        Err(e) => exit::error(format!("internal error: {e}")),
    }
}
