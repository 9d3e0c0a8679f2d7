//! The differential suite against OpenSandbox's real server
//! (`tests/upstream/differential.py`; contract: coexist.recognised,
//! coexist.kept, coexist.policy): the pinned opensandbox-server builds its
//! pods with its own code, and this binary must admit them as built and
//! build the same pods from the same intent. `server-venv.sh` installs the
//! server on first use (cached in `~/.cache/sandbox-webhook`, like the
//! Go-built binaries), so this fails loudly where it cannot be installed.
//! `SANDBOX_WEBHOOK_UNDER_TEST` runs it against another build.

use std::process::{Command, Output};
use std::time::Instant;

use common::processes::{repo, under_test};

#[test]
fn opensandbox_servers_pods_pass_as_built_and_the_same_intent_builds_them() {
    let venv = Command::new(repo().join("tests/upstream/server-venv.sh"))
        .output()
        .expect("tests/upstream/server-venv.sh runs");
    assert_succeeded(&venv, "cannot install opensandbox-server: ");
    let python = String::from_utf8(venv.stdout).expect("a path");
    let started = Instant::now();
    let out = Command::new(python.trim())
        .arg(repo().join("tests/upstream/differential.py"))
        .arg("--webhook")
        .arg(under_test())
        .current_dir(repo().join("tests/upstream"))
        .output()
        .expect("the suite runs");
    let report = String::from_utf8_lossy(&out.stdout);
    println!("{report}");
    println!(
        "differential suite: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_succeeded(&out, &format!("the differential suite failed:\n{report}\n"));
}

/// Fails the test with `failed` and the command's stderr unless it exited 0.
#[track_caller]
fn assert_succeeded(out: &Output, failed: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{failed}{stderr}");
}
