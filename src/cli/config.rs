//! `config validate FILE` and `config defaults`: the same strict reader the
//! server uses at start-up and at every reload.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::exit;
use crate::config::{Config, ConfigError};

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Check a configuration file exactly as `serve` would load it: exit 0
    /// with a short OK line, 1 with every mistake in it (one a line), 2 if
    /// it cannot be read.
    Validate {
        /// The configuration file (YAML).
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
    /// Print the built-in configuration as YAML (`config validate` accepts it).
    Defaults,
}

pub fn config(args: ConfigArgs) -> ExitCode {
    match args.command {
        ConfigCommand::Validate { file } => validate(&file),
        ConfigCommand::Defaults => defaults(),
    }
}

fn validate(file: &Path) -> ExitCode {
    match Config::load(file) {
        Ok(config) => {
            for warning in config.controller.warnings() {
                eprintln!("{}: warning: {warning}", file.display());
            }
            let egress = config.egress.image.as_deref().unwrap_or("off");
            println!(
                "{}: OK (prefix {}, execd image {}, egress image {egress})",
                file.display(),
                config.prefix,
                config.execd.image
            );
            exit::OK
        }
        Err(e @ ConfigError::Read { .. }) => exit::fail(e),
        Err(e) => {
            eprintln!("{e}");
            exit::REJECTED
        }
    }
}

fn defaults() -> ExitCode {
    let text = match Config::default().to_yaml() {
        Ok(text) => text,
        Err(e) => return exit::fail(e),
    };
    let header = "# The built-in configuration of sandbox-webhook (what runs without --config).\n";
    super::io::write_stdout(format!("{header}{text}").as_bytes())
}
