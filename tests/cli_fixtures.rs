//! `sandbox-webhook test DIR`, run as a platform team would run it on their
//! own fixtures.

mod common;

use std::fmt::Write as _;

use common::cli::run;

const SANDBOX_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: demo\n  namespace: default\n  labels: {opensandbox.io/id: demo}\nspec:\n  containers:\n  - {name: sandbox, image: busybox, command: [sleep, '3600']}\n";

/// A platform team's fixture directory, written by hand, with one wrong
/// expectation (the configuration caps the timeout, so the pod is a 400,
/// not the 403 its author expected).
fn user_fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cases")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    let long = SANDBOX_POD.replace(
        "  labels:",
        "  annotations: {opensandbox.io/timeout: 2h}\n  labels:",
    );
    write("cases/long.pod.yaml", &long);
    write(
        "cases/long.expected.yaml",
        "outcome: denied\ncode: 403\nmessage: Sandbox timeout 7200s exceeds configured maximum of 3600s.\n",
    );
    let plain = SANDBOX_POD.replace("  labels: {opensandbox.io/id: demo}\n", "");
    write("cases/plain.pod.yaml", &plain);
    write(
        "cases/plain.expected.yaml",
        &format!(
            "outcome: skipped\nreason: not-a-sandbox\npod:\n{}",
            indent(&plain)
        ),
    );
    write("platform.yaml", "expiry: {maxTimeoutSeconds: 3600}\n");
    dir
}

fn indent(yaml: &str) -> String {
    yaml.lines().fold(String::new(), |mut out, l| {
        writeln!(out, "  {l}").expect("writing to a String");
        out
    })
}

#[test]
fn test_reports_a_wrong_expectation_and_update_fixes_it() {
    let dir = user_fixtures();
    let d = dir.path();
    let test = |extra: &[&str]| {
        run(
            &[&["test", "cases", "--config", "platform.yaml"], extra].concat(),
            d,
        )
    };

    let failed = test(&[]);
    assert_eq!(failed.code, 1, "{}{}", failed.stdout, failed.stderr);
    let out = &failed.stdout;
    for line in [
        "FAILED   long",
        "    -code: 403",
        "    +code: 400",
        "ok       plain",
        "2 cases: 1 passed, 1 failed",
    ] {
        assert!(out.lines().any(|l| l == line), "no line {line:?} in\n{out}");
    }
    // Only what differs, with a little context, not both documents whole.
    assert!(!out.contains("outcome: skipped"), "{out}");

    let tap = test(&["--output", "tap"]);
    assert_eq!(tap.code, 1);
    assert!(
        tap.stdout
            .starts_with("TAP version 13\n1..2\nnot ok 1 - long\n"),
        "{}",
        tap.stdout
    );
    assert!(tap.stdout.contains("\nok 2 - plain\n"), "{}", tap.stdout);

    let junit = test(&["--output", "junit"]);
    assert_eq!(junit.code, 1);
    assert_eq!(junit_counts(&junit.stdout), (2, 1), "{}", junit.stdout);

    // Without the team's configuration the pod is admitted: the file matters.
    let defaults = run(&["test", "cases"], d);
    assert_eq!(defaults.code, 1);
    assert!(
        defaults.stdout.contains("+outcome: mutated"),
        "{}",
        defaults.stdout
    );

    let updated = test(&["--update"]);
    assert_eq!(updated.code, 0, "{}{}", updated.stdout, updated.stderr);
    assert!(
        updated.stdout.contains("updated  long"),
        "{}",
        updated.stdout
    );
    let passed = test(&[]);
    assert_eq!(passed.code, 0, "{}", passed.stdout);
    assert!(
        passed.stdout.ends_with("2 cases: 2 passed, 0 failed\n"),
        "{}",
        passed.stdout
    );
    assert_eq!(junit_counts(&test(&["-o", "junit"]).stdout), (2, 0));
}

#[test]
fn test_exit_codes_for_unusable_input() {
    let dir = user_fixtures();
    for (args, says) in [
        (&["test", "missing"][..], "cannot read"),
        (&["test", "."], "holds no fixtures"),
        (&["test", "cases", "--config", "nope.yaml"], "nope.yaml"),
        (&["test", "cases", "--output", "html"], "html"),
    ] {
        let r = run(args, dir.path());
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
}

/// Reads JUnit XML as XML: (test cases, failures), and the document must be
/// well formed to the end.
fn junit_counts(xml: &str) -> (usize, usize) {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut cases, mut failures, mut depth) = (0, 0, 0i32);
    loop {
        let event = reader
            .read_event()
            .unwrap_or_else(|e| panic!("not XML: {e}\n{xml}"));
        let name = match &event {
            Event::Start(e) | Event::Empty(e) => e.name().as_ref().to_vec(),
            Event::End(_) => {
                depth -= 1;
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        if matches!(event, Event::Start(_)) {
            depth += 1;
        }
        cases += usize::from(name == b"testcase");
        failures += usize::from(name == b"failure");
    }
    assert_eq!(depth, 0, "unclosed elements in\n{xml}");
    (cases, failures)
}
