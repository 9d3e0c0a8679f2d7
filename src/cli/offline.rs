//! `inject` and `review`: the mutation core without a server.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use chrono::Utc;
use serde_json::Value;

use super::views::{self, InjectOutput};
use super::{DecisionArgs, exit};
use crate::config::Config;
use crate::mutate::{self, Context, Decision, FixedToken, RandomTokens, TokenSource};
use exit::error as fail;

#[derive(Debug, clap::Args)]
pub struct InjectArgs {
    /// Pod manifest (YAML or JSON); `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,
    /// What to print: the mutated manifest, the JSON patch, or a unified
    /// diff of the manifest before and after.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: InjectOutput,
    #[command(flatten)]
    pub decision: DecisionArgs,
}

#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// AdmissionReview (JSON); `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,
    /// Print the response with its patch decoded to JSON, not base64, and
    /// indented (for people; the server always sends base64).
    #[arg(long)]
    pub decode: bool,
    #[command(flatten)]
    pub decision: DecisionArgs,
}

fn read_input(path: &PathBuf) -> Result<Vec<u8>, String> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    }
}

pub(super) fn tokens(args: &DecisionArgs) -> Box<dyn TokenSource> {
    match &args.egress_token {
        Some(t) => Box::new(FixedToken(t.clone())),
        None => Box::new(RandomTokens),
    }
}

/// The configuration and the input bytes every offline command starts from.
fn load(decision: &DecisionArgs, file: &PathBuf) -> Result<(Config, Vec<u8>), String> {
    Ok((decision.load_config()?, read_input(file)?))
}

pub fn inject(args: InjectArgs) -> ExitCode {
    let (config, input) = match load(&args.decision, &args.file) {
        Ok(loaded) => loaded,
        Err(e) => return fail(e),
    };
    let is_json = input
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    // Several documents, a List, a workload: see `super::manifests`.
    let text = String::from_utf8_lossy(&input);
    if super::manifests::is_stream(&text, is_json) {
        // Not yet: one patch or diff per injected template.
        if args.output != InjectOutput::Manifest {
            return fail(
                "-o patch and -o diff take a single Pod; this input holds several documents, a List or a workload",
            );
        }
        return super::manifests::run(&text, is_json, &config, &args.decision);
    }
    let parsed: Result<Value, String> = if is_json {
        serde_json::from_slice(&input).map_err(|e| e.to_string())
    } else {
        serde_yaml_ng::from_slice(&input).map_err(|e| e.to_string())
    };
    let mut pod = match parsed {
        Ok(v) => v,
        Err(e) => {
            return fail(format!(
                "{} is not a Pod manifest: {e}",
                args.file.display()
            ));
        }
    };
    // JSON goes to the core as written, so number literals reach it intact
    // (serde_json's Value would turn big integers and -0 into floats).
    let raw = if is_json {
        String::from_utf8_lossy(&input).into_owned()
    } else {
        pod.to_string()
    };
    let tokens = tokens(&args.decision);
    let ctx = Context {
        config: &config,
        now: args.decision.now.unwrap_or_else(Utc::now),
        own_namespace: args.decision.webhook_namespace.as_deref(),
        tokens: tokens.as_ref(),
    };
    let before = pod.clone();
    let mut patch = None;
    match mutate::decide(&raw, None, &ctx) {
        Decision::Deny(denial) => {
            eprintln!("{denial}");
            return exit::REJECTED;
        }
        Decision::Skip(reason) => {
            eprintln!("skipped ({}): {}", reason.as_str(), reason.sentence());
        }
        Decision::Admit(admission) => {
            for w in &admission.warnings {
                eprintln!("warning: {w}");
            }
            let applied = admission
                .patch
                .operations()
                .map_err(|e| e.to_string())
                .and_then(|ops| json_patch::patch(&mut pod, &ops).map_err(|e| e.to_string()));
            if let Err(e) = applied {
                return fail(format!("internal error: the patch does not apply: {e}"));
            }
            patch = Some(admission.patch);
        }
    }
    let out = match args.output {
        InjectOutput::Manifest => manifest(&pod, is_json),
        InjectOutput::Patch => views::patch_text(patch.as_ref()),
        InjectOutput::Diff => {
            views::diff_text(&before, &pod, is_json, &args.file.display().to_string())
        }
    };
    match out {
        Ok(text) => write_stdout(text.as_bytes()),
        Err(e) => fail(e),
    }
}

fn manifest(pod: &Value, is_json: bool) -> Result<String, String> {
    if is_json {
        serde_json::to_string_pretty(pod)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string())
    } else {
        // Quoted for YAML 1.1 readers, as manifests are (cli/yaml.rs).
        Ok(super::yaml::to_string(pod))
    }
}

pub fn review(args: ReviewArgs) -> ExitCode {
    let (config, input) = match load(&args.decision, &args.file) {
        Ok(loaded) => loaded,
        Err(e) => return fail(e),
    };
    let tokens = tokens(&args.decision);
    let ctx = Context {
        config: &config,
        now: args.decision.now.unwrap_or_else(Utc::now),
        own_namespace: args.decision.webhook_namespace.as_deref(),
        tokens: tokens.as_ref(),
    };
    match crate::review::review(&input, &ctx) {
        Ok(reviewed) if args.decode => {
            let decoded = crate::review::decoded(&reviewed.body)
                .map_err(|e| e.to_string())
                .and_then(|v| serde_json::to_string_pretty(&v).map_err(|e| e.to_string()));
            match decoded {
                Ok(text) => write_stdout((text + "\n").as_bytes()),
                Err(e) => fail(format!("internal error: {e}")),
            }
        }
        Ok(reviewed) => {
            let mut body = reviewed.body;
            body.push(b'\n');
            write_stdout(&body)
        }
        Err(e) => fail(e),
    }
}

fn write_stdout(bytes: &[u8]) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => exit::OK,
        Err(e) => fail(format!("cannot write output: {e}")),
    }
}
