//! `diagnose`: what the lifecycle controller would do with each pod, when
//! and why, through the same functions it calls
//! (`crate::lifecycle::diagnose`). A lone Pod gives one JSON object; a
//! `List` (`kubectl get pods -o yaml`), several documents or several files
//! give a JSON array of one object per pod, the pods of one owner among
//! them read as each other's siblings, as the controller's cache has them.

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::lifecycle::{self, SandboxPod};
use crate::manifest;

#[derive(Debug, clap::Args)]
#[command(after_long_help = FIELDS)]
pub struct DiagnoseArgs {
    /// Pods (YAML or JSON: a Pod, a List such as `kubectl get pods -o
    /// yaml` prints, several documents), a directory of them, or `-` for
    /// standard input; repeat it for several.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Read the directories given with -f and their subdirectories.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// The time to judge expiry at (RFC 3339); now by default.
    #[arg(long, value_name = "RFC3339", value_parser = super::args::parse_time)]
    pub now: Option<DateTime<Utc>>,
    /// Configuration file (YAML); the built-in defaults when omitted.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The controller's own namespace, which it ignores like the excluded ones.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
}

/// Every field of the output, for `--help` and `man diagnose`
/// (docs/behaviour.md, "diagnose", says the same).
const FIELDS: &str = "\
Output: one JSON object per pod (a JSON array of them unless the input is one Pod):
  pod                                  namespace/name
  expiry.expiresAt                     the expires-at annotation as written, or null
  expiry.expired                       expiresAt is at or before --now
  expiry.action                        none, delete-pod, delete-owner, shutdown-owner (an agent-sandbox Sandbox
                                       gets spec.shutdownTime), suspend-owner (it gets operatingMode Suspended),
                                       leave-owned (an owner of a kind not in controller.expiry.ownerActions: a
                                       warning Event), invalid (expiresAt is not RFC 3339: a warning Event,
                                       nothing deleted)
  expiry.at                            when the action is due (expiresAt in UTC, or the later one of another pod
                                       of the same owner in the input when the owner is acted on; at or before
                                       now when due, and then the controller acts at once); null when nothing is
                                       ever done (as for a pod being deleted, whose action is none)
  expiry.reason                        why, in words (e.g. namespace excluded, manual cleanup, expires-at passed)
  platform.hasPlatformConstraints      kubernetes.io/os or kubernetes.io/arch in the pod's nodeSelector or
                                       required node affinity (what the seed reads; not the annotation)
  platform.hasNonPlatformConstraints   any other key there
  platform.hasPlatform, hasNonPlatform the same two values under their older names, kept for scripts
  platform.platformAnnotation          the pod's <prefix>/platform annotation as written, or null
  platform.unschedulable               Pending, and the scheduler says no node takes its platform
  platform.message                     the scheduler's message when unschedulable, else null
  platform.reason                      why, in words
  injection.state                      how the pod stands against what this configuration injects: current,
                                       stale, not-injected, server-completed or opted-out (the controller's
                                       drift audit; a warning Event for stale and not-injected)
  injection.differs                    for a stale pod, the record's fields that differ (config, images, policy,
                                       revision; record when it cannot be read)
  injection.record                     the pod's <prefix>/injected record as written, or null
  injection.expected                   the record this configuration's webhook writes for the pod now
  injection.reason                     why, in words";

pub fn diagnose(args: &DiagnoseArgs) -> ExitCode {
    match run(args) {
        Ok(text) => super::io::write_stdout(text.as_bytes()),
        Err(e) => super::exit::fail(e),
    }
}

fn run(args: &DiagnoseArgs) -> Result<String, String> {
    let config = super::args::load_config(args.config.as_deref())?;
    let sources = super::io::sources(&args.files, args.recursive)?;
    let parsed = sources
        .iter()
        .map(|s| manifest::parse(&s.label, &s.text))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    // One object in one input: a Pod, answered with one object.
    if let [one] = parsed.as_slice()
        && let [object] = one.objects().collect::<Vec<_>>().as_slice()
        && object["kind"] != "List"
    {
        let mut pods = Vec::with_capacity(1);
        if object["kind"] != "Pod" {
            return Err(format!(
                "{} is a {}, not a Pod: diagnose reads Pods (a List of them too)",
                sources[0].label,
                manifest::describe(object)
            ));
        }
        collect(object, &sources[0].label, &mut pods)?;
        return render(&diagnoses(&pods, &config, args)[0]);
    }
    let mut pods = Vec::new();
    for (source, parsed) in sources.iter().zip(&parsed) {
        for (i, doc) in parsed.documents.iter().enumerate() {
            let Some(object) = &doc.value else { continue };
            let at = format!("{}, document {}", source.label, i + 1);
            if object["kind"] == "List" {
                let items = object["items"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                for (j, item) in items.iter().enumerate() {
                    collect(item, &format!("{at}, items[{j}]"), &mut pods)?;
                }
            } else {
                collect(object, &at, &mut pods)?;
            }
        }
    }
    if pods.is_empty() {
        return Err("the input holds no Pod".to_owned());
    }
    render(&diagnoses(&pods, &config, args))
}

fn diagnoses(
    pods: &[SandboxPod],
    config: &crate::config::Config,
    args: &DiagnoseArgs,
) -> Vec<lifecycle::Diagnosis> {
    let now = args.now.unwrap_or_else(Utc::now);
    lifecycle::diagnose_all(pods, config, args.namespace.as_deref(), now)
}

fn render(value: &impl serde::Serialize) -> Result<String, String> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// The Pod `object` read as the controller reads it; another kind is
/// passed over with a note on stderr.
fn collect(object: &Value, at: &str, pods: &mut Vec<SandboxPod>) -> Result<(), String> {
    if object["kind"] != "Pod" {
        eprintln!(
            "{at} ({}): not a Pod, passed over",
            manifest::describe(object)
        );
        return Ok(());
    }
    let pod = crate::json::error::from_value(object, "")
        .map_err(|e| format!("{at} is not a Pod the controller can read: {e}"))?;
    pods.push(pod);
    Ok(())
}
