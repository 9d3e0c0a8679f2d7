//! The `certs` subcommand writes a usable CA and serving certificate.

use std::sync::Arc;

use common::cli::{assert_exit, assert_prints, bin, run};
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{ServerName, UnixTime};

use crate::cli_support::{assert_a_line_holds, assert_diff_of};

/// contract: cli.certs
#[test]
fn certs_writes_a_ca_and_a_serving_pair() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let status = bin()
        .args([
            "certs",
            "--dns",
            "webhook.ns.svc",
            "--ip",
            "127.0.0.1",
            "--out",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());

    let read = |name: &str| std::fs::read(out.join(name)).unwrap();
    let ca: Vec<_> = rustls_pemfile::certs(&mut &read("ca.crt")[..])
        .collect::<Result<_, _>>()
        .unwrap();
    let leaf: Vec<_> = rustls_pemfile::certs(&mut &read("tls.crt")[..])
        .collect::<Result<_, _>>()
        .unwrap();
    let key = rustls_pemfile::private_key(&mut &read("tls.key")[..])
        .unwrap()
        .expect("a private key");
    assert_eq!((ca.len(), leaf.len()), (1, 1));

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out.join("tls.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The leaf is signed by the CA and valid for the names asked for.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca[0].clone()).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    for name in ["webhook.ns.svc", "127.0.0.1"] {
        verifier
            .verify_server_cert(
                &leaf[0],
                &[],
                &ServerName::try_from(name).unwrap(),
                &[],
                UnixTime::now(),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // And the key belongs to it.
    let signing = provider.key_provider.load_private_key(key).unwrap();
    rustls::sign::CertifiedKey::new(leaf, signing)
        .keys_match()
        .unwrap();
}

/// contract: cli.certs
#[test]
fn certs_defaults_to_local_names() {
    let dir = tempfile::tempdir().unwrap();
    let status = bin()
        .args(["certs", "--out"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    for name in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(
            dir.path().join(name).metadata().unwrap().len() > 0,
            "{name}"
        );
    }
}

// ---------------------------------------------------------------- exit codes
// 0 done, 1 judged and rejected (a denial, an invalid config in `config
// validate`), 2 could not do the job (usage, unreadable or unusable input).

const SANDBOX_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: demo\n  namespace: default\n  labels: {opensandbox.io/id: demo}\nspec:\n  containers:\n  - {name: sandbox, image: busybox, command: [sleep, '3600']}\n";

fn workdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    write("pod.yaml", SANDBOX_POD);
    // No command and no entrypoint annotation: a denial.
    write(
        "denied.yaml",
        &SANDBOX_POD.replace(", command: [sleep, '3600']", ""),
    );
    write(
        "plain.yaml",
        &SANDBOX_POD.replace("  labels: {opensandbox.io/id: demo}\n", ""),
    );
    write("garbage.yaml", "kind: [unclosed");
    write(
        "good.yaml",
        "execd: {image: 'registry.example.com/execd:v2'}\n",
    );
    write(
        "bad.yaml",
        "execd:\n  resources:\n    limits: {cpu: lots}\n",
    );
    write("empty.yaml", "");
    write("review.json", "{\"not\": \"a review\"}");
    dir
}

/// contract: cli.exit-codes
#[test]
fn inject_exit_codes() {
    let dir = workdir();
    let d = dir.path();
    let ok = run(
        &["inject", "-f", "pod.yaml", "--now", "2026-01-01T00:00:00Z"],
        d,
    );
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert!(ok.stdout.contains("execd-installer"), "{}", ok.stdout);

    let skipped = run(&["inject", "-f", "plain.yaml"], d);
    assert_exit(&skipped, 0, "not-a-sandbox");

    let denied = run(&["inject", "-f", "denied.yaml"], d);
    assert_eq!(denied.code, 1, "{}", denied.stderr);
    assert!(denied.stdout.is_empty());
    assert!(denied.stderr.contains("entrypoint"), "{}", denied.stderr);

    for (args, says) in [
        (&["inject", "-f", "missing.yaml"][..], "cannot read"),
        (&["inject", "-f", "garbage.yaml"], "is not valid YAML"),
        (
            &["inject", "-f", "pod.yaml", "--config", "bad.yaml"],
            "execd.resources.limits.cpu",
        ),
        (
            &["inject", "-f", "pod.yaml", "--config", "empty.yaml"],
            "empty.yaml",
        ),
        (
            &["inject", "-f", "pod.yaml", "--config", "nope.yaml"],
            "nope.yaml",
        ),
        (
            &["inject", "-f", "pod.yaml", "--now", "yesterday"],
            "RFC 3339",
        ),
        (&["inject"], "--filename"),
        (&["no-such-command"], "unrecognized subcommand"),
    ] {
        let r = run(args, d);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
    }
    let with_config = run(&["inject", "-f", "pod.yaml", "--config", "good.yaml"], d);
    assert_eq!(with_config.code, 0, "{}", with_config.stderr);
    assert!(with_config.stdout.contains("registry.example.com/execd:v2"));
}

#[test]
fn inject_refuses_an_egress_token_the_webhook_would_deny() {
    let dir = workdir();
    for token in ["", "two words", "tab\there"] {
        let r = run(
            &["inject", "-f", "pod.yaml", "--egress-token", token],
            dir.path(),
        );
        assert_eq!(r.code, 2, "{token:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("--egress-token") && r.stderr.contains("visible ASCII"),
            "{token:?}: {}",
            r.stderr
        );
        assert!(r.stdout.is_empty(), "{token:?}: {}", r.stdout);
    }
}

/// contract: cli.exit-codes
#[test]
fn review_exit_codes() {
    let dir = workdir();
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    // An answered review is a success, allowed or not: the answer is the output.
    for name in ["review-sandbox-create", "review-denied"] {
        let path = format!("{fixtures}/{name}.review.json");
        let r = run(
            &["review", "-f", &path, "--now", "2026-01-01T00:00:00Z"],
            dir.path(),
        );
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        assert!(r.stdout.contains("\"response\""), "{name}: {}", r.stdout);
    }
    let unreadable = run(&["review", "-f", "review.json"], dir.path());
    assert_eq!(unreadable.code, 2, "{}", unreadable.stderr);
    let bad_config = run(
        &["review", "-f", "review.json", "--config", "bad.yaml"],
        dir.path(),
    );
    assert_eq!(bad_config.code, 2, "{}", bad_config.stderr);
}

/// contract: config.validate-command
#[test]
fn config_validate() {
    let dir = workdir();
    let d = dir.path();
    let good = run(&["config", "validate", "good.yaml"], d);
    assert_eq!(good.code, 0, "{}", good.stderr);
    assert_eq!(good.stdout.lines().count(), 1, "{}", good.stdout);
    assert!(good.stdout.starts_with("good.yaml: OK"), "{}", good.stdout);

    let bad = run(&["config", "validate", "bad.yaml"], d);
    assert_eq!(bad.code, 1);
    assert!(bad.stdout.is_empty());
    assert_eq!(
        bad.stderr.trim_end(),
        "config file bad.yaml: execd.resources.limits.cpu: 'lots' is not a Kubernetes quantity such as 500m, 2, 1.5 or 256Mi"
    );

    let empty = run(&["config", "validate", "empty.yaml"], d);
    assert_eq!(empty.code, 1);
    assert!(
        empty.stderr.contains("empty.yaml") && empty.stderr.contains("no settings"),
        "{}",
        empty.stderr
    );

    let missing = run(&["config", "validate", "missing.yaml"], d);
    assert_eq!(missing.code, 2);
    assert!(
        missing
            .stderr
            .contains("cannot read config file missing.yaml"),
        "{}",
        missing.stderr
    );

    let usage = run(&["config", "validate"], d);
    assert_eq!(usage.code, 2, "{}", usage.stderr);
}

/// contract: config.defaults-command
#[test]
fn config_defaults_is_accepted_by_validate() {
    let dir = workdir();
    let d = dir.path();
    let defaults = run(&["config", "defaults"], d);
    assert_eq!(defaults.code, 0, "{}", defaults.stderr);
    for line in [
        "prefix: opensandbox.io",
        "  image: opensandbox/execd:v1.1.0",
        "  image: opensandbox/egress:v1.1.7",
        "  maxRules: 4096",
        "  defaultTimeoutSeconds: null",
    ] {
        assert!(
            defaults.stdout.lines().any(|l| l == line),
            "{line:?} missing from\n{}",
            defaults.stdout
        );
    }
    std::fs::write(d.join("defaults.yaml"), &defaults.stdout).unwrap();
    let checked = run(&["config", "validate", "defaults.yaml"], d);
    assert_eq!(checked.code, 0, "{}", checked.stderr);
    // And it is what runs without --config.
    let inject = |config: &[&str]| {
        let fixed = ["--now", "2026-01-01T00:00:00Z", "--egress-token", "t"];
        let args: Vec<&str> = ["inject", "-f", "pod.yaml"]
            .into_iter()
            .chain(fixed)
            .chain(config.iter().copied())
            .collect();
        run(&args, d)
    };
    let a = inject(&[]);
    let b = inject(&["--config", "defaults.yaml"]);
    assert_eq!((a.code, b.code), (0, 0));
    assert_eq!(a.stdout, b.stdout);
}

/// contract: cli.inject, warning.policy-target
///
/// A likely mistake is a warning on inject's stderr; the pod is
/// still injected.
#[test]
fn inject_warns_about_likely_mistakes() {
    let dir = workdir();
    let pod = SANDBOX_POD.replace(
        "  labels:",
        "  annotations: {opensandbox.io/Timeout: 30m}\n  labels:",
    );
    std::fs::write(dir.path().join("typo.yaml"), pod).unwrap();
    let r = run(&["inject", "-f", "typo.yaml"], dir.path());
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("execd-installer"), "{}", r.stdout);
    assert_eq!(
        r.stderr,
        "warning: annotation opensandbox.io/Timeout is ignored: did you mean opensandbox.io/timeout?\n"
    );
}

const NOW: &str = "2026-01-01T00:00:00Z";

/// contract: manifest.output
///
/// `inject -o patch` prints the JSON patch, which applied to the
/// input gives what `inject` prints; `-o diff` a unified diff of the two.
#[test]
fn inject_prints_the_patch_or_a_diff() {
    let dir = workdir();
    let d = dir.path();
    let inject =
        |file: &str, output: &str| run(&["inject", "-f", file, "-o", output, "--now", NOW], d);

    let patch = inject("pod.yaml", "patch");
    assert_eq!(patch.code, 0, "{}", patch.stderr);
    let ops: json_patch::Patch = serde_json::from_str(&patch.stdout).unwrap();
    let mut pod: serde_json::Value = serde_yaml_ng::from_str(SANDBOX_POD).unwrap();
    json_patch::patch(&mut pod, &ops).unwrap();
    let manifest = inject("pod.yaml", "manifest");
    assert_eq!(manifest.code, 0, "{}", manifest.stderr);
    let injected: serde_json::Value = serde_yaml_ng::from_str(&manifest.stdout).unwrap();
    assert_eq!(pod, injected);

    // Changes: exit 1, as `kubectl diff`.
    let diff = inject("pod.yaml", "diff");
    assert_eq!(diff.code, 1, "{}", diff.stderr);
    assert_diff_of(&diff.stdout, "pod.yaml");
    let added: Vec<_> = diff.stdout.lines().filter(|l| l.starts_with('+')).collect();
    assert_a_line_holds(&added, "name: execd-installer", &diff.stdout);
    assert!(
        diff.stdout.lines().any(|l| l.starts_with(' ')),
        "no context: {}",
        diff.stdout
    );

    // Nothing to change: an empty patch and an empty diff, still exit 0.
    assert_eq!(inject("plain.yaml", "patch").stdout, "[]\n");
    let none = inject("plain.yaml", "diff");
    assert_prints(&none, 0, "");
    // A denial is a denial whatever is printed.
    let denied = inject("denied.yaml", "patch");
    assert_eq!((denied.code, denied.stdout.as_str()), (1, ""));
}

/// contract: cli.review
///
/// `review --decode` prints the response with the patch as the
/// JSON patch its base64 text carries; everything else is the same answer.
#[test]
fn review_decode_prints_the_patch_as_json() {
    use base64::Engine;
    let dir = workdir();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/review-sandbox-create.review.json"
    );
    let review = |extra: &[&str]| {
        let r = run(
            &[
                &[
                    "review",
                    "-f",
                    path,
                    "--now",
                    NOW,
                    "--egress-token",
                    "t0k3n",
                ],
                extra,
            ]
            .concat(),
            dir.path(),
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str::<serde_json::Value>(&r.stdout).unwrap()
    };
    let mut wire = review(&[]);
    let decoded = review(&["--decode"]);
    let text = wire["response"]["patch"]
        .as_str()
        .expect("base64 on the wire")
        .to_owned();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap();
    let ops: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert!(ops.as_array().is_some_and(|a| !a.is_empty()), "{ops}");
    wire["response"]["patch"] = ops;
    assert_eq!(decoded, wire);
}
