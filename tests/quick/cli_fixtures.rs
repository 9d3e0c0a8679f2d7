//! `sandbox-webhook test DIR`, run as a platform team would run it on their
//! own fixtures.

use std::fmt::Write as _;

use common::cli::{assert_lines, run, temp_file};

use crate::cli_support::{assert_ends, assert_holds};

const SANDBOX_POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: demo\n  namespace: default\n  labels: {opensandbox.io/id: demo}\nspec:\n  containers:\n  - {name: sandbox, image: busybox, command: [sleep, '3600']}\n";

/// [`SANDBOX_POD`] with the `timeout` annotation `timeout`.
fn sandbox_pod_with_timeout(timeout: &str) -> String {
    SANDBOX_POD.replace(
        "  labels:",
        &format!("  annotations: {{opensandbox.io/timeout: {timeout}}}\n  labels:"),
    )
}

/// A platform team's fixture directory, written by hand, with one wrong
/// expectation (the configuration caps the timeout, so the pod is a 400,
/// not the 403 its author expected).
fn user_fixtures() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cases")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
    let long = sandbox_pod_with_timeout("2h");
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
    assert_holds(&defaults.stdout, &["+outcome: mutated"]);

    let updated = test(&["--update"]);
    assert_eq!(updated.code, 0, "{}{}", updated.stdout, updated.stderr);
    assert_holds(&updated.stdout, &["updated  long"]);
    let passed = test(&[]);
    assert_eq!(passed.code, 0, "{}", passed.stdout);
    assert_ends(&passed.stdout, "2 cases: 2 passed, 0 failed\n");
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

/// contract: cli.test-cases, cli.test-report
///
/// `test` judges each fixture by its kind, as `inject`
/// does (a workload's template, several documents, `*.pod.yml`); an
/// expected file without a case and a case without an expected file are
/// reported; expected files quote `expires-at`; "1 case".
#[test]
fn test_judges_fixtures_as_inject_does() {
    let timeout = sandbox_pod_with_timeout("1h");
    let (dir, _) = temp_file("one.pod.yaml", &timeout);
    let d = dir.path();
    let write = |name: &str, text: &str| std::fs::write(d.join(name), text).unwrap();
    let one = run(&["test", ".", "--update"], d);
    assert_eq!(one.code, 0, "{}", one.stdout);
    assert_lines(&one.stdout, &["1 case: 0 passed, 0 failed, 1 updated"]);
    let expected = std::fs::read_to_string(d.join("one.expected.yaml")).unwrap();
    assert!(
        expected.contains("    opensandbox.io/expires-at: \"2026-01-01T01:00:00Z\"\n"),
        "{expected}"
    );

    let job = "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    metadata:\n      labels: {opensandbox.io/id: j}\n    spec:\n      restartPolicy: Never\n      containers:\n      - {name: sandbox, image: busybox, command: [sleep, '60']}\n";
    write("job.pod.yml", job);
    write("stream.pod.yaml", &format!("{job}---\n{timeout}"));
    write("gone.expected.yaml", "outcome: unchanged\n");
    let r = run(&["test", "."], d);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_lines(
        &r.stdout,
        &[
            "FAILED   gone",
            "    ./gone.expected.yaml has no case: add gone.pod.yaml (or .pod.yml) or gone.review.json, or delete it",
            "FAILED   job",
            "    no expected file ./job.expected.yaml: run with --update to write it, then review it",
            "ok       one",
            "FAILED   stream",
            "4 cases: 1 passed, 3 failed",
        ],
    );
    std::fs::remove_file(d.join("gone.expected.yaml")).unwrap();
    assert_eq!(run(&["test", ".", "--update"], d).code, 0);
    let job: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(d.join("job.expected.yaml")).unwrap())
            .unwrap();
    assert_eq!(job["outcome"], "mutated");
    assert_eq!(job["results"][0]["at"], "document 1 (Job/j) spec.template");
    let template = &job["objects"][0]["spec"]["template"];
    assert_eq!(
        template["spec"]["initContainers"][0]["name"],
        "execd-installer"
    );
    let stream: serde_json::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(d.join("stream.expected.yaml")).unwrap())
            .unwrap();
    assert_eq!(stream["objects"].as_array().unwrap().len(), 2);
    assert_eq!(stream["results"][1]["at"], "document 2 (Pod/demo)");
    assert_eq!(
        stream["objects"][1]["metadata"]["annotations"]["opensandbox.io/expires-at"],
        "2026-01-01T01:00:00Z"
    );
    let passed = run(&["test", "."], d);
    assert_ends(&passed.stdout, "\n3 cases: 3 passed, 0 failed\n");
}
