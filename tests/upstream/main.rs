//! The differential suite against OpenSandbox's real server
//! (`tests/upstream/differential.py`; contract: coexist.recognised,
//! coexist.kept, coexist.policy): the pinned opensandbox-server builds its
//! pods with its own code, and this binary must admit them as built and
//! build the same pods from the same intent. `server-venv.sh` installs the
//! server on first use (cached in `~/.cache/sandbox-webhook`, like the
//! Go-built binaries), so this fails loudly where it cannot be installed.
//! `SANDBOX_WEBHOOK_UNDER_TEST` runs it against another build.

use std::process::Command;
use std::time::Instant;

use common::processes::{repo, under_test};

#[test]
fn opensandbox_servers_pods_pass_as_built_and_the_same_intent_builds_them() {
    let venv = Command::new(repo().join("tests/upstream/server-venv.sh"))
        .output()
        .expect("tests/upstream/server-venv.sh runs");
    assert!(
        venv.status.success(),
        "cannot install opensandbox-server: {}",
        String::from_utf8_lossy(&venv.stderr)
    );
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
    assert!(
        out.status.success(),
        "the differential suite failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
