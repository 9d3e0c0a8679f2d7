//! The `sandbox-webhook` command line: one `Args` struct, one module per
//! subcommand, named after it; `main` only parses and calls [`run`].

mod args;
mod certs;
mod config;
mod controller;
mod dev;
mod diagnose;
mod docs;
pub mod exit;
mod inject;
mod io;
mod logging;
mod review;
mod serve;
mod signals;
mod test;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

pub use args::DecisionArgs;

/// `docs/cli.md`'s text: [`docs::markdown`] of the whole command line.
#[must_use]
pub fn markdown() -> String {
    docs::markdown(&Args::command())
}

pub use docs::limits_markdown;

#[derive(Debug, Parser)]
#[command(
    name = "sandbox-webhook",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("SANDBOX_WEBHOOK_REVISION"), ")"),
    about = "Mutating admission webhook for OpenSandbox sandbox pods"
)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTPS admission webhook.
    #[command(after_help = LOG_HELP)]
    Serve(Box<serve::ServeArgs>),
    /// Write a private CA and a serving certificate (ca.crt, tls.crt, tls.key).
    Certs(certs::CertsArgs),
    /// Mutate a Pod (YAML or JSON) like the webhook would and print it, or
    /// the pod templates of the workloads in manifests.
    Inject(inject::InjectArgs),
    /// Answer an `AdmissionReview` (JSON) exactly as the server would.
    Review(review::ReviewArgs),
    /// Run the lifecycle controller: expiry and platform scheduling.
    #[command(after_help = LOG_HELP)]
    Controller(Box<controller::ControllerArgs>),
    /// Print, as JSON, what the lifecycle controller would do with a Pod.
    Diagnose(diagnose::DiagnoseArgs),
    /// Check a configuration file, or print the built-in one.
    Config(config::ConfigArgs),
    /// Run a directory of fixtures (pods or reviews and their expected
    /// results) against a configuration.
    Test(test::TestArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(docs::CompletionsArgs),
    /// Print the man page (roff), e.g. `sandbox-webhook man | man -l -`.
    Man(docs::ManArgs),
    /// Print the command-line reference in Markdown, as docs/cli.md keeps
    /// it: `sandbox-webhook docs > docs/cli.md`.
    Docs(docs::DocsArgs),
}

/// The environment the long-running commands read besides their flags.
const LOG_HELP: &str = "Environment:\n  RUST_LOG       log filter, e.g. info (the default), debug, \
     sandbox_webhook=debug,hyper=info\n  POD_NAMESPACE  default of --namespace";

#[must_use]
pub fn run(args: Args) -> ExitCode {
    match args.command {
        Command::Serve(a) => serve::serve(*a),
        Command::Certs(a) => certs::certs(a),
        Command::Inject(a) => inject::inject(&a),
        Command::Review(a) => review::review(&a),
        Command::Controller(a) => controller::controller(*a),
        Command::Diagnose(a) => diagnose::diagnose(&a),
        Command::Config(a) => config::config(a),
        Command::Completions(a) => docs::completions(&a, Args::command()),
        Command::Man(a) => docs::man(&a, Args::command()),
        Command::Docs(a) => docs::docs(&a, &Args::command()),
        Command::Test(a) => test::test(&a),
    }
}
