//! The exit codes of every subcommand, documented in the README:
//! 0 done; 1 the input was read and judged and found wanting (a denial, an
//! invalid configuration in `config validate`, a failing case in `test`); 2 the command could not do
//! its job (usage, as clap also exits, or an unreadable, unparsable or
//! unusable input, or a failure to start).

use std::process::ExitCode;

pub const OK: ExitCode = ExitCode::SUCCESS;
pub const REJECTED: ExitCode = ExitCode::FAILURE;
pub const ERROR_CODE: u8 = 2;

/// Prints `error: message` on stderr and returns exit code 2.
pub fn error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(ERROR_CODE)
}
