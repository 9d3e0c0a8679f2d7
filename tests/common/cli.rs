//! The binary under test, run to completion.

use std::process::Command;

/// A command for the `sandbox-webhook` binary cargo built for the tests.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sandbox-webhook"))
}

/// Runs `command`, fails the test (showing stderr) unless it exits 0, and
/// returns its stdout.
#[track_caller]
pub fn stdout_of(command: &mut Command) -> Vec<u8> {
    let out = command.output().expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}
