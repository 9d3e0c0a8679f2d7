//! `serve --dev` against a directory that may already hold a running dev
//! webhook's certificates: valid ones are served again untouched, new ones
//! are written only once the ports are bound, and only loopback is served.

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::args::LOOPBACK_PORTS;
use common::children;

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-webhook");
const FILES: [&str; 3] = ["ca.crt", "tls.crt", "tls.key"];

fn snapshot(dir: &Path) -> Vec<Vec<u8>> {
    FILES
        .iter()
        .map(|f| std::fs::read(dir.join("certs/dev").join(f)).unwrap())
        .collect()
}

/// `sandbox-webhook certs` into `dir/certs/dev`, with extra arguments.
fn write_certs(dir: &Path, args: &[&str]) {
    let status = Command::new(BIN)
        .args(["certs", "--out", "certs/dev"])
        .args(args)
        .current_dir(dir)
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

fn local_names() -> (Vec<String>, Vec<IpAddr>) {
    (
        vec!["localhost".to_owned()],
        vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()],
    )
}

/// Runs a command that should exit by itself; one still running after
/// `limit` is killed (exit code `None`). Returns the code and stderr.
fn exit_within(mut cmd: Command, limit: Duration) -> (Option<i32>, String) {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = children::spawn(cmd).unwrap();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    if let Ok(out) = rx.recv_timeout(limit) {
        let out = out.unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    } else {
        // Still serving: stop it so the test fails instead of hanging.
        let _ = Command::new("kill").arg(pid.to_string()).status();
        (None, format!("still running after {limit:?}"))
    }
}

/// Runs `serve --dev` on ephemeral loopback ports until it says it serves,
/// then stops it; returns its log.
fn serve_until_ready(dir: &Path) -> String {
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--dev"])
        .args(LOOPBACK_PORTS)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env("RUST_LOG", "info");
    let mut child = children::spawn(command).unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut log = String::new();
    let ready = loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => {
                log.push_str(&line);
                log.push('\n');
                if line.contains("serving admission requests") {
                    break true;
                }
            }
            Err(_) => break false,
        }
    };
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ready, "serve --dev did not start:\n{log}");
    log
}

/// `serve --dev` with `args` in `dir`, which must exit 2 within 20 s; its
/// stderr.
fn serve_dev_refused(dir: &Path, args: &[&str]) -> String {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--dev"]).args(args).current_dir(dir);
    let (code, stderr) = exit_within(cmd, Duration::from_secs(20));
    assert_eq!(code, Some(2), "{args:?}: {stderr}");
    stderr
}

/// Fails the test unless `dir`'s files are still `before` (`certs/dev was
/// rewritten{how}`).
#[track_caller]
fn assert_certs_kept(dir: &Path, before: &[Vec<u8>], how: &str) {
    assert!(before == snapshot(dir), "certs/dev was rewritten{how}");
}

/// contract: cli.serve-dev
#[test]
fn valid_dev_certificates_are_served_again_untouched() {
    let dir = tempfile::tempdir().unwrap();
    write_certs(dir.path(), &[]);
    let before = snapshot(dir.path());
    let log = serve_until_ready(dir.path());
    assert!(log.contains("serving the certificates already in"), "{log}");
    assert_certs_kept(dir.path(), &before, &format!(":\n{log}"));
}

/// contract: cli.serve-dev
#[test]
fn unusable_dev_certificates_are_replaced_once_the_ports_are_bound() {
    let dir = tempfile::tempdir().unwrap();
    // Certificates for another name: not usable for localhost.
    write_certs(dir.path(), &["--dns", "elsewhere.example"]);
    let before = snapshot(dir.path());

    // The admission port is taken (by a running dev webhook, say): the
    // command fails and the files stay as they were.
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let stderr = serve_dev_refused(
        dir.path(),
        &["--addr", &addr, "--admin-addr", "127.0.0.1:0"],
    );
    assert!(stderr.contains("cannot listen on"), "{stderr}");
    assert_certs_kept(dir.path(), &before, " before binding");
    drop(busy);

    // With free ports they are replaced by a bundle for the local names.
    let log = serve_until_ready(dir.path());
    assert!(log.contains("writing new certificates"), "{log}");
    assert!(before != snapshot(dir.path()));
    let (dns, ips) = local_names();
    sandbox_webhook::certs::check_written(&dir.path().join("certs/dev"), &dns, &ips, 1).unwrap();
}

/// contract: cli.serve-dev
#[test]
fn dev_mode_refuses_to_listen_beyond_loopback() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        ["--addr", "0.0.0.0:0", "--admin-addr", "127.0.0.1:0"],
        ["--addr", "127.0.0.1:0", "--admin-addr", "[::]:0"],
    ] {
        let stderr = serve_dev_refused(dir.path(), &args);
        assert!(stderr.contains("loopback only"), "{args:?}: {stderr}");
    }
    assert!(!dir.path().join("certs").exists(), "nothing is written");
}
