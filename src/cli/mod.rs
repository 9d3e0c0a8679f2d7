//! The `sandbox-webhook` command line: one `Args` struct, one module per
//! subcommand; `main` only parses and calls [`run`].

mod certs;
mod config;
mod controller;
mod dev;
mod diagnose;
mod docs;
mod fixtures;
mod io;
mod logging;
mod manifests;
mod offline;
mod serve;
mod views;

use std::path::PathBuf;
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::mutate::{Context, FixedToken, RandomTokens, TokenSource};

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
    Inject(offline::InjectArgs),
    /// Answer an `AdmissionReview` (JSON) exactly as the server would.
    Review(offline::ReviewArgs),
    /// Run the lifecycle controller: expiry and platform scheduling.
    #[command(after_help = LOG_HELP)]
    Controller(Box<controller::ControllerArgs>),
    /// Print, as JSON, what the lifecycle controller would do with a Pod.
    Diagnose(diagnose::DiagnoseArgs),
    /// Check a configuration file, or print the built-in one.
    Config(config::ConfigArgs),
    /// Run a directory of fixtures (pods or reviews and their expected
    /// results) against a configuration.
    Test(fixtures::TestArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(docs::CompletionsArgs),
    /// Print the man page (roff), e.g. `sandbox-webhook man | man -l -`.
    Man(docs::ManArgs),
}

/// The environment the long-running commands read besides their flags.
const LOG_HELP: &str = "Environment:\n  RUST_LOG       log filter, e.g. info (the default), debug, \
     sandbox_webhook=debug,hyper=info\n  POD_NAMESPACE  default of --namespace";

/// The exit codes of every subcommand, documented in the README:
/// 0 done; 1 the input was read and judged and found wanting (a denial, an
/// invalid configuration in `config validate`, a failing case in `test`); 2 the command could not do
/// its job (usage, as clap also exits, or an unreadable, unparsable or
/// unusable input, or a failure to start).
pub mod exit {
    use std::process::ExitCode;

    pub const OK: ExitCode = ExitCode::SUCCESS;
    pub const REJECTED: ExitCode = ExitCode::FAILURE;
    pub const ERROR_CODE: u8 = 2;

    /// Prints `error: message` on stderr and returns exit code 2.
    pub fn error(message: impl std::fmt::Display) -> ExitCode {
        eprintln!("error: {message}");
        ExitCode::from(ERROR_CODE)
    }
}

/// Options shared by the offline commands: they make output reproducible.
#[derive(Debug, clap::Args)]
pub struct DecisionArgs {
    /// Configuration file (YAML); the built-in defaults when omitted.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Admission time (RFC 3339) used to compute expires-at; now by default.
    #[arg(long, value_name = "RFC3339", value_parser = parse_time)]
    pub now: Option<DateTime<Utc>>,
    /// Egress token to use when the pod has none (random by default):
    /// visible ASCII characters, at least one.
    #[arg(long, value_name = "TOKEN", value_parser = parse_egress_token)]
    pub egress_token: Option<String>,
    /// The webhook's own namespace, which is always excluded (`serve
    /// --namespace`). `--webhook-namespace`, its old name, still works.
    #[arg(long = "namespace", value_name = "NS", alias = "webhook-namespace")]
    pub webhook_namespace: Option<String>,
}

/// The `--config` file of the offline commands, or the built-in defaults.
fn load_config(path: Option<&std::path::Path>) -> Result<Config, String> {
    match path {
        Some(path) => Config::load(path).map_err(|e| e.to_string()),
        None => Ok(Config::default()),
    }
}

impl DecisionArgs {
    fn load_config(&self) -> Result<Config, String> {
        load_config(self.config.as_deref())
    }

    /// The egress tokens these flags ask for: the fixed one, or random ones.
    fn tokens(&self) -> Box<dyn TokenSource> {
        match &self.egress_token {
            Some(t) => Box::new(FixedToken(t.clone())),
            None => Box::new(RandomTokens),
        }
    }

    /// What the core decides with: `config`, at `--now` (or now), in
    /// `--namespace`.
    fn context<'a>(&'a self, config: &'a Config, tokens: &'a dyn TokenSource) -> Context<'a> {
        Context {
            config,
            now: self.now.unwrap_or_else(Utc::now),
            own_namespace: self.webhook_namespace.as_deref(),
            tokens,
        }
    }
}

fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("not an RFC 3339 time: {e}"))
}

/// The rule the webhook applies to a pod's own token: a token it would deny
/// on the pod is refused here, not written into the output.
fn parse_egress_token(s: &str) -> Result<String, String> {
    if crate::mutate::is_egress_token(s) {
        Ok(s.to_owned())
    } else {
        Err("must be a non-empty string of visible ASCII characters (no spaces); omit the flag for a random token".into())
    }
}

#[must_use]
pub fn run(args: Args) -> ExitCode {
    match args.command {
        Command::Serve(a) => serve::serve(*a),
        Command::Certs(a) => certs::certs(a),
        Command::Inject(a) => manifests::inject(&a),
        Command::Review(a) => offline::review(&a),
        Command::Controller(a) => controller::controller(*a),
        Command::Diagnose(a) => diagnose::diagnose(&a),
        Command::Config(a) => config::config(a),
        Command::Completions(a) => docs::completions(&a),
        Command::Man(a) => docs::man(&a),
        Command::Test(a) => fixtures::test(&a),
    }
}
