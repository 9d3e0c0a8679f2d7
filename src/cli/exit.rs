//! The exit codes of every subcommand, documented in docs/behaviour.md
//! ("Exit codes"):
//! 0 done; 1 the input was read and judged and found wanting (a denial, an
//! invalid configuration in `config validate`, a failing case in `test`); 2 the command could not do
//! its job (usage, as clap also exits, or an unreadable, unparsable or
//! unusable input, or a failure to start).

use std::process::ExitCode;

pub const OK: ExitCode = ExitCode::SUCCESS;
pub const REJECTED: ExitCode = ExitCode::FAILURE;
pub const ERROR_CODE: u8 = 2;

/// The one way a command fails: exit code 2, and the message where its
/// user looks. That is the log once `serve` or `controller` installed it
/// (JSON when asked for, so a collector gets one format), else stderr as
/// `error: message`.
pub fn fail(message: impl std::fmt::Display) -> ExitCode {
    if tracing::dispatcher::has_been_set() {
        tracing::error!("{message}");
    } else {
        eprintln!("error: {message}");
    }
    ExitCode::from(ERROR_CODE)
}
