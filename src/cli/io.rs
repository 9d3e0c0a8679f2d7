//! Reading a command's input and writing its output, the same way for every
//! subcommand: `-` is standard input, and a failed write is exit code 2.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

use super::exit;

/// The bytes of `path`, or of standard input when it is `-`.
pub(super) fn read_input(path: &Path) -> Result<Vec<u8>, String> {
    if path.as_os_str() == "-" {
        let mut buf = Vec::new();
        std::io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(buf)
    } else {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    }
}

/// Writes `bytes` to standard output and flushes: exit 0, or 2 when the
/// output cannot be written (a closed pipe, a full disk).
pub(super) fn write_stdout(bytes: &[u8]) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => exit::OK,
        Err(e) => exit::error(format!("cannot write output: {e}")),
    }
}
