//! `inject` and `review`: the mutation core without a server.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::Value;

use super::args::DecisionArgs;
use super::exit;
use super::io::{read_input, write_stdout};
use super::views::{self, InjectOutput};
use crate::config::Config;
use crate::mutate::{self, Decision};
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
    /// `AdmissionReview` (JSON); `-` reads standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,
    /// Print the response with its patch decoded to JSON, not base64, and
    /// indented (for people; the server always sends base64).
    #[arg(long)]
    pub decode: bool,
    #[command(flatten)]
    pub decision: DecisionArgs,
}

/// The configuration and the input bytes every offline command starts from.
fn load(decision: &DecisionArgs, file: &Path) -> Result<(Config, Vec<u8>), String> {
    Ok((decision.load_config()?, read_input(file)?))
}

pub fn inject(args: &InjectArgs) -> ExitCode {
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
        // A JSON patch addresses one object; a diff of the stream's text
        // shows every changed document in place.
        if args.output == InjectOutput::Patch {
            return fail(
                "-o patch takes a single Pod (a JSON patch addresses one object); this input holds several documents, a List or a workload: use -o diff",
            );
        }
        let diff_name =
            (args.output == InjectOutput::Diff).then(|| args.file.display().to_string());
        return super::manifests::run(
            &text,
            is_json,
            &config,
            &args.decision,
            diff_name.as_deref(),
        );
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
    let tokens = args.decision.tokens();
    let ctx = args.decision.context(&config, tokens.as_ref());
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

pub fn review(args: &ReviewArgs) -> ExitCode {
    let (config, input) = match load(&args.decision, &args.file) {
        Ok(loaded) => loaded,
        Err(e) => return fail(e),
    };
    let tokens = args.decision.tokens();
    let ctx = args.decision.context(&config, tokens.as_ref());
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
