//! Golden fixtures: `tests/fixtures/NAME.pod.yaml` (a Pod) or
//! `NAME.review.json` (an `AdmissionReview`), and in `tests/fixtures/manifests/`
//! what `inject` takes (workloads, streams), optional `NAME.config.yaml`, and
//! the expected result in `NAME.expected.yaml`, run by the library's fixture
//! runner, the same code as `sandbox-webhook test tests/fixtures`. The runner
//! applies every patch to the raw input with `json_patch::patch`, admits every
//! result a second time to prove the second pass is empty, keeps warnings
//! within 120 characters, and checks that a review response echoes uid,
//! apiVersion and kind and carries its patch as base64 `JSONPatch` text.
//!
//! `REFRESH_GOLDEN=1 cargo test --test quick -- golden` rewrites the expected files;
//! review the diff before committing it.

use std::path::{Path, PathBuf};

use base64::Engine;
use common::cli::{bin, stdout_of};
use common::clock::NOW;
use common::context::{TOKEN, TestContext};
use common::reviews;
use sandbox_webhook::case_runner::{self, Case, Kind, Options, Verdict};
use sandbox_webhook::config::Config;
use sandbox_webhook::review;
use serde_json::Value;

const OWN_NAMESPACE: &str = "sandbox-webhook";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The fixed clock and token, the webhook's own namespace, and the case's
/// configuration.
fn context_for(stem: &str) -> TestContext {
    let path = fixtures().join(format!("{stem}.config.yaml"));
    let config = if path.exists() {
        Config::load(&path).unwrap_or_else(|e| panic!("{stem}: {e}"))
    } else {
        Config::default()
    };
    TestContext::new()
        .config(config)
        .own_namespace(OWN_NAMESPACE)
}

fn cases(kind: Kind) -> Vec<Case> {
    case_runner::discover(&fixtures())
        .expect("tests/fixtures holds cases")
        .into_iter()
        .filter(|c| c.kind == kind)
        .collect()
}

/// Runs the cases of one kind through the runner; with `REFRESH_GOLDEN` set
/// the expected files are rewritten instead.
fn run_golden(cases: Vec<Case>) {
    let options = Options {
        update: std::env::var_os("REFRESH_GOLDEN").is_some(),
        ..Options::default()
    };
    let failures: Vec<String> = cases
        .into_iter()
        .map(|case| case_runner::run_case(case, &options))
        .filter_map(|r| match r.verdict {
            // The project's own cases are never passed over.
            Verdict::Failed(why) | Verdict::Skipped(why) => Some(format!("{}: {why}", r.case.name)),
            Verdict::Passed | Verdict::Updated => None,
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The runner's clock, token and own namespace are the ones the expected
/// files were written with.
/// contract: cli.test-fixed
#[test]
fn runner_uses_the_tests_clock_and_token() {
    assert_eq!(case_runner::NOW, NOW);
    assert_eq!(case_runner::TOKEN, TOKEN);
    assert_eq!(case_runner::OWN_NAMESPACE, OWN_NAMESPACE);
    assert_eq!(Options::default().own_namespace, OWN_NAMESPACE);
}

/// contract: cli.test-invariants, answer.deterministic
#[test]
fn pod_fixtures() {
    let cases = cases(Kind::Pod);
    assert!(cases.len() >= 30, "expected at least 30 pod fixtures");
    run_golden(cases);
}

/// Manifests as `inject` takes them (`tests/fixtures/manifests/`: a
/// workload, a stream, a denied template), judged as `inject` judges them.
#[test]
fn manifest_fixtures() {
    let cases = case_runner::discover(&fixtures().join("manifests")).expect("manifest cases");
    assert!(cases.iter().all(|c| c.kind == Kind::Pod), "{cases:?}");
    assert!(cases.len() >= 3);
    run_golden(cases);
}

/// A skipped review carries no warnings (`review-skip-no-warnings`: a pod
/// that opts out with a misspelt and a Windows annotation, each of which
/// warns when admitted).
/// contract: select.pod-create, select.dry-run, select.unreadable-pod, select.null-object,
/// platform.node-selector-strings, answer.patch, answer.denial, select.order
#[test]
fn review_fixtures() {
    let cases = cases(Kind::Review);
    assert!(!cases.is_empty());
    run_golden(cases);
}

/// `patch` is `[]byte` in Go: base64 text, or (as kube-rs writes it) an
/// array of byte values, which the apiserver's decoder also accepts.
fn patch_bytes(value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::String(s) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(s)
                .expect("patch is base64"),
        ),
        Value::Array(items) => Some(
            items
                .iter()
                .map(|b| u8::try_from(b.as_u64().expect("byte")).expect("byte"))
                .collect(),
        ),
        _ => None,
    }
}

/// The server and the CLI answer from the same function; the CLI must print
/// exactly what `review` returns.
#[test]
fn review_cli_matches_library() {
    let path = fixtures().join("review-sandbox-create.review.json");
    let out = stdout_of(bin().args(["review", "-f"]).arg(&path).args([
        "--now",
        NOW,
        "--egress-token",
        TOKEN,
    ]));
    let ctx = TestContext::new();
    let expected = review::review(&std::fs::read(&path).unwrap(), &ctx.get()).unwrap();
    assert_eq!(out.strip_suffix(b"\n").unwrap(), expected.body.as_slice());
}

/// Contract: kube-rs clients read every response this webhook writes with
/// kube's own typed `AdmissionReview` (`kube::core::admission`), for every
/// review fixture and every pod fixture sent as a Pod CREATE. A response
/// without a patch is parsed from its bytes as they are; one with a patch
/// only after its base64 text becomes the byte array kube-core expects
/// (`review::parse_response`, the one documented difference).
/// contract: answer.echo, answer.patch, answer.no-patch
#[test]
fn kube_parses_every_response() {
    use kube::core::DynamicObject;
    use kube::core::admission::AdmissionReview;

    let mut bodies: Vec<(String, TestContext, Vec<u8>)> = cases(Kind::Review)
        .into_iter()
        .map(|case| {
            (
                case.name.clone(),
                context_for(&case.name),
                std::fs::read(case.input()).unwrap(),
            )
        })
        .collect();
    for case in cases(Kind::Pod) {
        let text = std::fs::read_to_string(case.input()).unwrap();
        let stem = case.name;
        let pod: Value = serde_yaml_ng::from_str(&text).unwrap();
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or("default");
        let review = reviews::review(&format!("uid-{stem}"), namespace, "CREATE", &pod, None);
        bodies.push((stem.clone(), context_for(&stem), review));
    }
    assert!(bodies.len() > 70, "{}", bodies.len());
    let (mut with_patch, mut denied) = (0, 0);
    for (stem, ctx, body) in &bodies {
        let out = review::review(body, &ctx.get())
            .expect("review answers")
            .body;
        let raw: Value = serde_json::from_slice(&out).unwrap();
        let typed: AdmissionReview<DynamicObject> = match raw["response"].get("patch") {
            None => serde_json::from_slice(&out)
                .unwrap_or_else(|e| panic!("{stem}: kube cannot parse the response: {e}")),
            Some(_) => review::parse_response(&out)
                .unwrap_or_else(|e| panic!("{stem}: kube cannot parse the response: {e}")),
        };
        assert_eq!(typed.types.api_version, raw["apiVersion"], "{stem}");
        assert_eq!(typed.types.kind, raw["kind"], "{stem}");
        let response = typed.response.expect("a response");
        assert_eq!(response.uid, raw["response"]["uid"], "{stem}");
        assert_eq!(response.allowed, raw["response"]["allowed"], "{stem}");
        if !response.allowed {
            denied += 1;
            assert_eq!(
                response.result.code, raw["response"]["status"]["code"],
                "{stem}"
            );
            assert_eq!(
                response.result.message, raw["response"]["status"]["message"],
                "{stem}"
            );
        }
        assert_eq!(
            response.patch,
            patch_bytes(&raw["response"]["patch"]),
            "{stem}"
        );
        with_patch += usize::from(response.patch.is_some());
        let warnings = raw["response"]
            .get("warnings")
            .map(|w| serde_json::from_value::<Vec<String>>(w.clone()).unwrap());
        assert_eq!(response.warnings, warnings, "{stem}");
    }
    // The fixtures cover all three shapes of response.
    assert!(with_patch > 10 && denied > 10, "{with_patch} {denied}");
}
