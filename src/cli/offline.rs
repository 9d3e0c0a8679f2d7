//! `inject` and `review`: the mutation core without a server. `inject`'s
//! work is in `super::manifests`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::args::DecisionArgs;
use super::exit;
use super::io::{read_input, write_stdout};
use super::views::{Color, InjectOutput};
use crate::config::Config;
use exit::error as fail;

#[derive(Debug, clap::Args)]
pub struct InjectArgs {
    /// A manifest (YAML or JSON: a Pod, workloads, a List, several
    /// documents), a directory of them (.yaml, .yml, .json), or `-` for
    /// standard input; repeat it for several.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Read the directories given with -f and their subdirectories.
    #[arg(short = 'R', long)]
    pub recursive: bool,
    /// What to print: the manifests as read (changed objects rewritten),
    /// every object as YAML or JSON, the JSON patch of the one object, or
    /// a unified diff per file of the input and what -o manifest writes
    /// (exit 1 when there are changes, as `kubectl diff`).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: InjectOutput,
    /// Colour the diff of -o diff: auto (when standard output is a
    /// terminal and `NO_COLOR` is not set), always or never.
    #[arg(long, value_enum, default_value_t, value_name = "WHEN")]
    pub color: Color,
    /// Leave out the notes on standard error (a Pod or template skipped,
    /// an object passed through, the token left out of a template);
    /// warnings and denials are still printed.
    #[arg(short = 'q', long)]
    pub quiet: bool,
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
