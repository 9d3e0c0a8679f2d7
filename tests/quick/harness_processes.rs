//! The test harness's own promise (`common::children`): a test binary that
//! is killed leaves no process behind. This test runs itself a second time
//! as the victim, which starts a long-lived child and arms a janitor, then
//! is killed with SIGKILL (no destructor runs): the child must die with it
//! and the janitor must run its stop command.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::children::{self, Janitor};

/// Set in the victim's environment: where it writes what it started.
const VICTIM_DIR: &str = "SANDBOX_WEBHOOK_TEST_VICTIM_DIR";
/// The test's full name in the quick suite, for `--exact`.
const NAME: &str = "harness_processes::a_killed_test_binary_leaves_no_process_behind";

/// The victim's part: a child and a janitor, their traces in `dir`, then
/// wait to be killed.
fn victim(dir: &Path) -> ! {
    let mut sleeper = Command::new("sleep");
    sleeper.arg("600");
    let child = children::spawn(sleeper).expect("sleep starts");
    let stopped = dir.join("stopped");
    let janitor = Janitor::arm(&["touch".as_ref(), stopped.as_os_str()]).expect("janitor");
    std::fs::write(dir.join("child.pid"), child.id().to_string()).unwrap();
    std::fs::write(dir.join("ready"), b"").unwrap();
    std::mem::forget((child, janitor));
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

/// Whether `pid` is alive (a zombie waiting for init counts as dead).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(") ").map(|(_, rest)| rest.chars().next());
        !matches!(state, Some(Some('Z' | 'X')) | None)
    })
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_test_binary_leaves_no_process_behind() {
    if let Some(dir) = std::env::var_os(VICTIM_DIR) {
        victim(&PathBuf::from(dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut victim = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", NAME, "--nocapture", "--test-threads", "1"])
        .env(VICTIM_DIR, dir.path())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the victim started its child and its janitor", || {
        dir.path().join("ready").exists()
    });
    let child: u32 = std::fs::read_to_string(dir.path().join("child.pid"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(alive(child));
    assert!(!dir.path().join("stopped").exists(), "not before the kill");
    victim.kill().unwrap();
    victim.wait().unwrap();
    wait_until("the child died with the test binary", || !alive(child));
    wait_until("the janitor ran its stop command", || {
        dir.path().join("stopped").exists()
    });
}
