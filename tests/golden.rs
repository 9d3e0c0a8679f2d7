//! Golden fixtures: `tests/fixtures/NAME.pod.yaml` (a Pod) or
//! `NAME.review.json` (an `AdmissionReview`), optional `NAME.config.yaml`, and
//! the expected result in `NAME.expected.yaml`. Every patch is applied to the
//! raw input with `json_patch::patch`, and every mutated pod is admitted a
//! second time to prove the second pass is empty.
//!
//! `REFRESH_GOLDEN=1 cargo test --test golden` rewrites the expected files;
//! review the diff before committing it.

mod common;

use std::path::{Path, PathBuf};

use base64::Engine;
use common::cli::{bin, stdout_of};
use common::clock::NOW;
use common::context::{TOKEN, TestContext};
use sandbox_webhook::config::Config;
use sandbox_webhook::mutate::{self, Decision};
use sandbox_webhook::review;
use serde_json::{Value, json};

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

fn cases(suffix: &str) -> Vec<(String, PathBuf)> {
    let mut out: Vec<_> = std::fs::read_dir(fixtures())
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.to_owned();
            let stem = name.strip_suffix(suffix)?.to_owned();
            Some((stem, path))
        })
        .collect();
    out.sort();
    out
}

/// Runs one pod through the core and applies the patch to the raw input.
fn admit_pod(pod: &Value, ctx: &TestContext) -> (Decision, Option<Value>) {
    let decision = mutate::decide(&pod.to_string(), None, &ctx.get());
    let patched = match &decision {
        Decision::Admit(a) => {
            let mut out = pod.clone();
            let ops = a.patch.operations().expect("the patch is a JSON patch");
            json_patch::patch(&mut out, &ops).expect("patch applies to the raw input");
            Some(out)
        }
        Decision::Skip(_) => Some(pod.clone()),
        Decision::Deny(_) => None,
    };
    (decision, patched)
}

fn describe(decision: &Decision, patched: Option<Value>) -> Value {
    let mut out = serde_json::Map::new();
    match decision {
        Decision::Skip(reason) => {
            out.insert("outcome".into(), json!("skipped"));
            out.insert("reason".into(), json!(reason.as_str()));
        }
        Decision::Admit(a) => {
            let outcome = if a.patch.is_empty() {
                "unchanged"
            } else {
                "mutated"
            };
            out.insert("outcome".into(), json!(outcome));
            if !a.warnings.is_empty() {
                out.insert("warnings".into(), json!(a.warnings));
            }
        }
        Decision::Deny(d) => {
            out.insert("outcome".into(), json!("denied"));
            out.insert("code".into(), json!(d.code()));
            out.insert("message".into(), json!(d.to_string()));
        }
    }
    if let Some(p) = patched {
        out.insert("pod".into(), p);
    }
    Value::Object(out)
}

/// Compares with (or, with `REFRESH_GOLDEN` set, rewrites) the expected file.
fn check_golden(stem: &str, actual: &Value, failures: &mut Vec<String>) {
    let path = fixtures().join(format!("{stem}.expected.yaml"));
    if std::env::var_os("REFRESH_GOLDEN").is_some() {
        let text = serde_yaml_ng::to_string(actual).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let Ok(text) = std::fs::read_to_string(&path) else {
        failures.push(format!("{stem}: missing {}", path.display()));
        return;
    };
    let expected: Value = serde_yaml_ng::from_str(&text).unwrap();
    if &expected != actual {
        failures.push(format!(
            "{stem}: result differs from {}\n--- expected\n{}\n--- actual\n{}",
            path.display(),
            text,
            serde_yaml_ng::to_string(actual).unwrap()
        ));
    }
}

fn check_warnings(stem: &str, decision: &Decision, failures: &mut Vec<String>) {
    if let Decision::Admit(a) = decision {
        for w in &a.warnings {
            if w.chars().count() > 120 {
                failures.push(format!("{stem}: warning over 120 characters: {w}"));
            }
        }
    }
}

/// The webhook's own output, admitted again, must need nothing more.
fn check_idempotent(stem: &str, patched: &Value, ctx: &TestContext, failures: &mut Vec<String>) {
    let (again, _) = admit_pod(patched, ctx);
    match again {
        Decision::Admit(a) if a.patch.is_empty() => {}
        Decision::Skip(_) => {}
        other => failures.push(format!("{stem}: second pass is not empty: {other:?}")),
    }
}

#[test]
fn pod_fixtures() {
    let cases = cases(".pod.yaml");
    assert!(cases.len() >= 30, "expected at least 30 pod fixtures");
    let mut failures = Vec::new();
    for (stem, path) in &cases {
        let ctx = context_for(stem);
        let text = std::fs::read_to_string(path).unwrap();
        let pod: Value = serde_yaml_ng::from_str(&text).unwrap();
        let (decision, patched) = admit_pod(&pod, &ctx);
        check_warnings(stem, &decision, &mut failures);
        if let Some(p) = &patched {
            check_idempotent(stem, p, &ctx, &mut failures);
        }
        check_golden(stem, &describe(&decision, patched), &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn review_fixtures() {
    let cases = cases(".review.json");
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for (stem, path) in &cases {
        let ctx = context_for(stem);
        let body = std::fs::read(path).unwrap();
        let request: Value = serde_json::from_slice(&body).unwrap();
        let reviewed = review::review(&body, &ctx.get()).expect("review answers");
        let mut response: Value = serde_json::from_slice(&reviewed.body).unwrap();

        // Every response echoes the request's uid, apiVersion and kind.
        assert_eq!(response["apiVersion"], request["apiVersion"], "{stem}");
        assert_eq!(response["kind"], request["kind"], "{stem}");
        assert_eq!(
            response["response"]["uid"], request["request"]["uid"],
            "{stem}"
        );

        // Go's []byte is base64 text on the wire.
        if let Some(p) = response["response"].get("patch") {
            assert!(p.is_string(), "{stem}: patch is not base64 text");
            assert_eq!(response["response"]["patchType"], "JSONPatch", "{stem}");
        }
        let mut object = request["request"]["object"].clone();
        if let Some(bytes) = patch_bytes(&response["response"]["patch"]) {
            let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
            json_patch::patch(&mut object, &patch).expect("patch applies to the raw object");
            check_idempotent(stem, &object, &ctx, &mut failures);
            // Readable in the golden file; the bytes are checked by applying.
            response["response"]["patch"] = serde_json::to_value(&patch).unwrap();
        }
        let actual = json!({
            "outcome": reviewed.outcome.as_str(),
            "response": response["response"],
            "object": object,
        });
        check_golden(stem, &actual, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
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
#[test]
fn kube_parses_every_response() {
    use kube::core::DynamicObject;
    use kube::core::admission::AdmissionReview;

    let mut bodies: Vec<(String, TestContext, Vec<u8>)> = cases(".review.json")
        .into_iter()
        .map(|(stem, path)| {
            (
                stem.clone(),
                context_for(&stem),
                std::fs::read(path).unwrap(),
            )
        })
        .collect();
    for (stem, path) in cases(".pod.yaml") {
        let pod: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": format!("uid-{stem}"),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": pod["metadata"]["namespace"].as_str().unwrap_or("default"),
                "operation": "CREATE",
                "object": pod,
            }
        });
        bodies.push((
            stem.clone(),
            context_for(&stem),
            review.to_string().into_bytes(),
        ));
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
