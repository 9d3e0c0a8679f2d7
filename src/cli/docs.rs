//! `completions SHELL` and `man [COMMAND]`: generated from the same clap
//! definitions as `--help`, so they cannot drift from the flags.

use std::process::ExitCode;

use clap_complete::Shell;

use super::exit;

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete in, e.g. `sandbox-webhook completions bash >
    /// /etc/bash_completion.d/sandbox-webhook`.
    #[arg(value_name = "SHELL")]
    pub shell: Shell,
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// A subcommand (`serve`, `inject`, `config validate`...) whose page
    /// to print instead of the main page, sandbox-webhook(1).
    #[arg(value_name = "COMMAND", num_args = 0..)]
    pub command: Vec<String>,
}

/// `cmd` is the whole command line's definition (`Args::command()`).
pub fn completions(args: &CompletionsArgs, mut cmd: clap::Command) -> ExitCode {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "sandbox-webhook", &mut out);
    super::io::write_stdout(&out)
}

/// Prints the roff page: `sandbox-webhook man | man -l -`.
pub fn man(args: &ManArgs, mut cmd: clap::Command) -> ExitCode {
    // Subcommand pages are named as `man` names them: sandbox-webhook-serve.
    let mut name = cmd.get_name().to_owned();
    let version = cmd.get_version().map(str::to_owned);
    cmd.build();
    for sub in &args.command {
        let Some(found) = cmd.find_subcommand(sub) else {
            return exit::fail(format!("no such command: {name} {sub}"));
        };
        name = format!("{name}-{sub}");
        cmd = found.clone().name(name.clone());
        if let Some(version) = &version {
            cmd = cmd.version(version.clone());
        }
    }
    let mut out = Vec::new();
    if let Err(e) = clap_mangen::Man::new(cmd).render(&mut out) {
        return exit::fail(format!("cannot render the man page: {e}"));
    }
    super::io::write_stdout(&out)
}
