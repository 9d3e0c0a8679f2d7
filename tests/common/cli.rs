//! The binary under test, run to completion.

use std::process::Command;

/// A command for the `sandbox-webhook` binary cargo built for the tests.
pub fn bin() -> Command {
    Command::new(crate::processes::bin_path())
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

/// How a run of the binary ended, its output as text.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Run {
    /// The run of a process that exited (not killed), with UTF-8 output.
    fn from(out: std::process::Output) -> Run {
        Run {
            code: out.status.code().expect("exited, not killed"),
            stdout: String::from_utf8(out.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(out.stderr).expect("stderr is UTF-8"),
        }
    }
}

/// Runs the binary with `args` in `dir`, standard input closed.
pub fn run(args: &[&str], dir: &std::path::Path) -> Run {
    let out = bin()
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the binary runs");
    Run::from(out)
}

/// Runs the binary with `args` in `dir`, `input` on its standard input.
pub fn run_with_input(args: &[&str], dir: &std::path::Path, input: &[u8]) -> Run {
    use std::io::Write;
    let mut command = bin();
    command
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = crate::children::spawn(command).expect("the binary runs");
    let mut stdin = child.stdin.take().expect("a piped stdin");
    // A command that refuses its arguments exits without reading stdin:
    // the pipe then breaks, and its exit status and stderr say why.
    if let Err(e) = stdin.write_all(input) {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "stdin: {e}");
    }
    drop(stdin);
    Run::from(child.wait_with_output().expect("the binary ends"))
}

/// Fails the test unless the run exited with `code` and its stderr holds
/// `says`.
#[track_caller]
pub fn assert_exit(r: &Run, code: i32, says: &str) {
    assert_eq!(r.code, code, "stderr: {}\nstdout: {}", r.stderr, r.stdout);
    assert!(
        r.stderr.contains(says),
        "no {says:?} in stderr: {}",
        r.stderr
    );
}

/// Fails the test unless the run exited with `code` and printed exactly
/// `stdout`.
#[track_caller]
pub fn assert_prints(r: &Run, code: i32, stdout: &str) {
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (code, stdout),
        "stderr: {}",
        r.stderr
    );
}

/// Fails the test unless each of `lines` is a whole line of `text`.
#[track_caller]
pub fn assert_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(
            text.lines().any(|l| l == *line),
            "no line {line:?} in\n{text}"
        );
    }
}

/// A fresh temporary directory holding one file `name` with `text`: the
/// directory (the file lasts as long as it) and the file's path.
pub fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// How a run of [`run_bounded`] ended.
pub struct Bounded {
    /// `None` when it was killed at its time limit.
    pub code: Option<i32>,
    /// Standard error, and the size of standard output (which may be large).
    pub stderr: String,
    pub stdout_bytes: u64,
    pub stdout: std::path::PathBuf,
    /// The process's peak resident memory (`ru_maxrss`).
    pub peak_kib: u64,
    pub took: std::time::Duration,
    _out: tempfile::TempDir,
}

/// Runs `program args...` in `dir`, standard input closed and its output
/// in files, killed if it runs past `limit`; how it ended and its peak
/// RSS. For the binary under test on hostile files, where a hang or the
/// memory it takes is what fails.
pub fn run_bounded(
    program: &str,
    args: &[&str],
    dir: &std::path::Path,
    limit: std::time::Duration,
) -> Bounded {
    use std::sync::atomic::{AtomicBool, Ordering};
    let out = tempfile::tempdir().unwrap();
    let stdout = out.path().join("stdout");
    let stderr = out.path().join("stderr");
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap());
    let started = std::time::Instant::now();
    let child = crate::children::spawn(command).expect("the binary runs");
    let pid = i32::try_from(child.id()).unwrap();
    let done = std::sync::Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if started.elapsed() > limit {
                    // SAFETY: a child this test started and has not reaped.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        })
    };
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for (and reaps) this test's own child.
    let reaped = unsafe { libc::wait4(pid, &raw mut status, 0, &raw mut usage) };
    assert_eq!(reaped, pid, "wait4");
    let took = started.elapsed();
    done.store(true, Ordering::Relaxed);
    watchdog.join().unwrap();
    drop(child);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Bounded {
        code,
        stderr: std::fs::read_to_string(&stderr).unwrap_or_default(),
        stdout_bytes: std::fs::metadata(&stdout).map_or(0, |m| m.len()),
        stdout,
        peak_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        took,
        _out: out,
    }
}
