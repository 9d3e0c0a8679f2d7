use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let args = sandbox_webhook::cli::Args::parse();
    sandbox_webhook::cli::run(args)
}
