//! contract: config.validate-command, config.errors, cli.input-errors
//!
//! `config validate` names every mistake of a file at once, so a platform team fixes them in one round, and says "tab" for a tab.

use common::args::{ABSENT_TLS, LOOPBACK_PORTS};
use common::cli::{Run, assert_exit, bin, run, temp_file};

/// Writes `yaml` to the file `name` in a fresh directory and runs
/// `config validate` on it there.
fn validate(name: &str, yaml: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(name), yaml).unwrap();
    run(&["config", "validate", name], dir.path())
}

/// Eight mistakes across five sections: `config validate` names them all.
const EIGHT_MISTAKES: &str = "prefix: Not_A_Domain\nexecd:\n  image: 123\n  resources: {limits: {cpu: lots, memory: 1Gi}, requests: {memory: 2Gi}}\negress: {mode: nft, colour: red}\nexpiry: {defaultTimeoutSeconds: 7200, maxTimeoutSeconds: 3600}\ncontroller: {expiry: {deleteOwnerKinds: [job]}}\n";

#[test]
fn config_validate_reports_every_error() {
    let r = validate("bad.yaml", EIGHT_MISTAKES);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let fields = [
        "  prefix: ",
        "  execd.image: must be an image reference",
        "  execd.resources.limits.cpu: 'lots' is not a Kubernetes quantity",
        "  execd.resources.requests.memory: must not be above limits.memory",
        // Unknown keys of a section first, then its values.
        "  egress.colour: unknown field",
        "  egress.mode: must be dns or dns+nft; got 'nft'",
        "  expiry.defaultTimeoutSeconds: 7200 is above expiry.maxTimeoutSeconds (3600)",
        "  controller.expiry.deleteOwnerKinds[0]: 'job' is not Kind.group",
    ];
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines[0], "config file bad.yaml: 8 mistakes:",
        "{}",
        r.stderr
    );
    for (line, field) in lines[1..].iter().zip(fields) {
        assert!(
            line.starts_with(field),
            "{line:?} is not {field:?}:\n{}",
            r.stderr
        );
    }
    assert_eq!(lines.len(), 1 + fields.len(), "{}", r.stderr);

    // One mistake reads as before.
    let one = validate("one.yaml", "egress: {mode: nft}\n");
    assert_eq!(
        one.stderr,
        "config file one.yaml: egress.mode: must be dns or dns+nft; got 'nft'\n"
    );

    let tab = validate("tab.yaml", "execd:\n\timage: x\n");
    assert_exit(&tab, 1, "line 2 is indented with a tab");
}

/// The deprecated `controller.expiry.deleteOwnerKinds` still loads, and
/// `config validate` says so on stderr with what to write instead.
/// contract: config.controller
#[test]
fn config_validate_warns_about_delete_owner_kinds() {
    let r = validate(
        "old.yaml",
        "controller: {expiry: {deleteOwnerKinds: [Job.batch]}}\n",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("old.yaml: OK"), "{}", r.stdout);
    assert!(
        r.stderr
            .starts_with("old.yaml: warning: controller.expiry.deleteOwnerKinds is deprecated")
            && r.stderr
                .contains("write controller.expiry.ownerActions instead"),
        "{}",
        r.stderr
    );
    let r = validate(
        "new.yaml",
        "controller: {expiry: {ownerActions: {Job.batch: delete}}}\n",
    );
    assert_eq!((r.code, r.stderr.as_str()), (0, ""));
}

/// An invalid file at start-up stops `serve` and `controller` with the
/// file's error and exit code 2, before anything else is read (the serving
/// files here do not exist, and there is no cluster to reach).
/// contract: config.startup
#[test]
fn an_invalid_file_stops_serve_and_the_controller() {
    let (dir, _) = temp_file("bad.yaml", "egress: {mode: nft}\n");
    let d = dir.path();
    let said = "config file bad.yaml: egress.mode: must be dns or dns+nft; got 'nft'";
    let serve = [
        &["serve", "--config", "bad.yaml"],
        ABSENT_TLS,
        LOOPBACK_PORTS,
    ]
    .concat();
    let controller = [
        "controller",
        "--config",
        "bad.yaml",
        "--admin-addr",
        "127.0.0.1:0",
        "--identity",
        "test",
    ];
    for args in [&serve[..], &controller[..]] {
        let out = bin()
            .args(args)
            .current_dir(d)
            .env("KUBECONFIG", d.join("absent-kubeconfig"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", args[0]);
        assert!(stderr.contains(said), "{}: {stderr}", args[0]);
    }
}
