//! `diagnose`: what the lifecycle controller would do with one pod, through
//! the same functions it calls (`crate::lifecycle::plan`).

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, Utc};

use crate::lifecycle::{self, SandboxPod};

#[derive(Debug, clap::Args)]
pub struct DiagnoseArgs {
    /// Pod manifest (YAML or JSON, e.g. `kubectl get pod -o yaml`); `-` reads
    /// standard input.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: PathBuf,
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

pub fn diagnose(args: &DiagnoseArgs) -> ExitCode {
    match run(args) {
        Ok(text) => super::io::write_stdout(text.as_bytes()),
        Err(e) => super::exit::error(e),
    }
}

fn run(args: &DiagnoseArgs) -> Result<String, String> {
    let config = super::args::load_config(args.config.as_deref())?;
    let input = super::io::read_input(&args.file)?;
    let pod = parse_pod(&input)
        .map_err(|e| format!("{} is not a Pod manifest: {e}", args.file.display()))?;
    let now = args.now.unwrap_or_else(Utc::now);
    let plan = lifecycle::plan(&pod, &config, args.namespace.as_deref(), now);
    serde_json::to_string_pretty(&plan.diagnosis())
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// YAML is a superset of JSON, so one reader takes both.
fn parse_pod(input: &[u8]) -> Result<SandboxPod, String> {
    let value: serde_json::Value = serde_yaml_ng::from_slice(input).map_err(|e| e.to_string())?;
    match value.get("kind").and_then(|k| k.as_str()) {
        None | Some("Pod") => {}
        Some(other) => return Err(format!("kind is {other}, expected Pod")),
    }
    serde_json::from_value(value).map_err(|e| e.to_string())
}
