//! `sandbox-webhook test DIR`: the case runner of [`crate::case_runner`], the
//! same code the project's golden test runs, for a platform team's own cases.

use std::path::PathBuf;
use std::process::ExitCode;

use super::exit;
use crate::case_runner::{self, Format, Options};

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Directory of cases: NAME.pod.yaml or NAME.pod.yml (a Pod, or
    /// workloads and several documents, judged as inject judges them) or
    /// NAME.review.json, NAME.expected.yaml and an optional
    /// NAME.config.yaml. An expected or config file without its case fails.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Configuration (YAML) for the cases without a NAME.config.yaml; the
    /// built-in defaults when omitted.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Write each case's result to its NAME.expected.yaml instead of
    /// comparing, as inject writes YAML (review the diff before committing
    /// it).
    #[arg(long)]
    pub update: bool,
    /// Report format: text for people, tap or junit for CI systems.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: Format,
}

/// Exit 0 when every case passed (or was updated), 1 when one failed, 2 when
/// the directory or the configuration cannot be used.
pub fn test(args: &TestArgs) -> ExitCode {
    let config = match super::args::load_config(args.config.as_deref()) {
        Ok(config) => config,
        Err(e) => return exit::fail(e),
    };
    let options = Options {
        config,
        update: args.update,
        ..Options::default()
    };
    let results = match case_runner::run(&args.dir, &options) {
        Ok(results) => results,
        Err(e) => return exit::fail(e),
    };
    let suite = args.dir.display().to_string();
    match case_runner::render(&results, &suite, args.output) {
        Ok(report) => print!("{report}"),
        Err(e) => return exit::fail(format!("cannot write the report: {e}")),
    }
    if case_runner::all_passed(&results) {
        exit::OK
    } else {
        exit::REJECTED
    }
}
