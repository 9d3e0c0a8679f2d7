//! `review`: an `AdmissionReview` answered by the mutation core without a
//! server, exactly as the server would answer it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::args::DecisionArgs;
use super::exit;
use super::io::{read_input, write_stdout};
use crate::config::Config;
use exit::fail;

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
