//! contract: answer.json-paths, cli.input-errors
//!
//! A hostile or broken client's malformed reviews are
//! answered in JSON's words (the path of what broke and what was expected
//! there), never with the name of a Rust type, by the real server on
//! loopback (`/mutate` and `/validate`) and by the CLI (`review`, `inject`,
//! `diagnose`).

use std::path::Path;

use common::cli::run;
use common::https::post_review;
use common::workloads::KINDS;
use regex::Regex;
use serde_json::Value;

/// A Pod CREATE's request fields before the object.
const HEAD: &str = r#""uid":"u-1","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"namespace":"team-a","operation":"CREATE""#;

/// A review around request fields `request` (without braces).
fn review(request: &str) -> String {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{{request}}}}}"#
    )
}

/// A Pod CREATE of `object` (JSON text).
fn create(object: &str) -> String {
    review(&format!(r#"{HEAD},"object":{object}"#))
}

/// A sandbox pod whose spec is `spec` (JSON text).
fn pod(spec: &str) -> String {
    format!(r#"{{"metadata":{{"name":"p","labels":{{"opensandbox.io/id":"p"}}}},"spec":{spec}}}"#)
}

/// A container named `main` with `fields` (JSON text, after a comma).
fn container(fields: &str) -> String {
    pod(&format!(
        r#"{{"containers":[{{"name":"main","image":"busybox"{fields}}}]}}"#
    ))
}

/// Bodies the server refuses with HTTP 400, and what the error must say.
fn envelopes() -> Vec<(String, &'static str)> {
    // Whole bodies.
    let bodies = [
        ("5", "expected an object, got the number 5"),
        // An array is no object: serde's derived readers would read its
        // items into the fields in order.
        ("[]", "expected an object, got an array"),
        (
            r#"{"apiVersion":5}"#,
            "apiVersion: expected a string, got the number 5",
        ),
        (
            r#"{"request":[]}"#,
            "request: expected an object, got an array",
        ),
        (
            r#"{"request":"x"}"#,
            r#"request: expected an object, got the string "x""#,
        ),
        (
            r#"{"request":null}"#,
            "request: is required but missing or null",
        ),
    ];
    // The fields of a review's request (without braces).
    let requests = [
        ("", "request.uid: is required but missing"),
        (
            r#""uid":5"#,
            "request.uid: expected a string, got the number 5",
        ),
        (
            r#""uid":"u","kind":5"#,
            "request.kind: expected an object, got the number 5",
        ),
        (
            r#""uid":"u","kind":{"group":1}"#,
            "request.kind.group: expected a string, got the number 1",
        ),
        (
            r#""uid":"u","kind":{"kind":"Pod"}"#,
            "request.operation: is required but missing",
        ),
        (
            r#""uid":"u","kind":{"kind":"Pod"},"operation":"CREATE","resource":"pods""#,
            r#"request.resource: expected an object, got the string "pods""#,
        ),
    ];
    // Fields after a Pod CREATE's head.
    let after_head = [
        (
            r#""dryRun":"no""#,
            r#"request.dryRun: expected a boolean, got the string "no""#,
        ),
        (
            r#""name":[]"#,
            "request.name: expected a string, got an array",
        ),
        (
            r#""subResource":{}"#,
            "request.subResource: expected a string, got an object",
        ),
        (r#""uid":"again""#, "request.uid: is given more than once"),
    ];
    let mut cases = Vec::from(bodies.map(|(body, want)| (body.to_owned(), want)));
    cases.extend(requests.map(|(fields, want)| (review(fields), want)));
    cases.extend(after_head.map(|(extra, want)| (review(&format!("{HEAD},{extra}")), want)));
    cases.push((format!("{} x", create("{}")), "trailing characters"));
    cases.push((
        create("{").trim_end_matches('}').to_owned(),
        "EOF while parsing",
    ));
    cases
}

/// Pod CREATEs whose object is not a readable pod: denied (HTTP 200, code
/// 400 in the answer), and what the denial must say.
fn objects() -> Vec<(String, &'static str)> {
    // The object itself.
    let objects = [
        ("5", "request.object: expected an object, got the number 5"),
        (
            r#""pod""#,
            r#"request.object: expected an object, got the string "pod""#,
        ),
        (
            r#"{"metadata":5}"#,
            "request.object.metadata: expected an object, got the number 5",
        ),
        (
            r#"{"metadata":{"labels":[]}}"#,
            "request.object.metadata.labels: expected an object, got an array",
        ),
        (
            r#"{"metadata":{"annotations":true}}"#,
            "request.object.metadata.annotations: expected an object, got true",
        ),
        (
            r#"{"metadata":{"name":1}}"#,
            "request.object.metadata.name: expected a string, got the number 1",
        ),
        (
            r#"{"metadata":{"name":"a","name":"b"}}"#,
            "request.object.metadata.name: is given more than once",
        ),
    ];
    // A sandbox pod's spec.
    let specs = [
        (
            "5",
            "request.object.spec: expected an object, got the number 5",
        ),
        (
            r#"{"containers":{}}"#,
            "request.object.spec.containers: expected an array, got an object",
        ),
        (
            r#"{"containers":[5]}"#,
            "request.object.spec.containers[0]: expected an object, got the number 5",
        ),
        (
            r#"{"initContainers":"x"}"#,
            r#"request.object.spec.initContainers: expected an array, got the string "x""#,
        ),
        (
            r#"{"volumes":[{"name":1}]}"#,
            "request.object.spec.volumes[0].name: expected a string, got the number 1",
        ),
        (
            r#"{"hostNetwork":"yes"}"#,
            r#"request.object.spec.hostNetwork: expected a boolean, got the string "yes""#,
        ),
        (
            r#"{"nodeSelector":{"kubernetes.io/os":1}}"#,
            r#"request.object.spec.nodeSelector["kubernetes.io/os"]: expected a string (quote the value), got the number 1"#,
        ),
        (
            r#"{"containers":[{"name":"a"}],"securityContext":[true, 0]}"#,
            "request.object.spec.securityContext: expected an object, got an array",
        ),
    ];
    // The fields of its container `main` (after a comma).
    let containers = [
        (
            r#","command":"sleep""#,
            r#"request.object.spec.containers[0].command: expected an array, got the string "sleep""#,
        ),
        (
            r#","env":[{"name":[]}]"#,
            "request.object.spec.containers[0].env[0].name: expected a string, got an array",
        ),
        (
            r#","volumeMounts":[{"mountPath":5}]"#,
            "request.object.spec.containers[0].volumeMounts[0].mountPath: expected a string, got the number 5",
        ),
        (
            r#","securityContext":{"privileged":"yes"}"#,
            r#"request.object.spec.containers[0].securityContext.privileged: expected a boolean, got the string "yes""#,
        ),
        (
            r#","securityContext":{"capabilities":{"add":[1]}}"#,
            "request.object.spec.containers[0].securityContext.capabilities.add[0]: expected a string, got the number 1",
        ),
        (
            r#","securityContext":[true]"#,
            "request.object.spec.containers[0].securityContext: expected an object, got an array",
        ),
        (
            r#","env":[["EXECD","/bin/sh"]]"#,
            "request.object.spec.containers[0].env[0]: expected an object, got an array",
        ),
    ];
    let mut cases = Vec::from(objects.map(|(object, want)| (create(object), want)));
    cases.extend(specs.map(|(spec, want)| (create(&pod(spec)), want)));
    cases.extend(containers.map(|(fields, want)| (create(&container(fields)), want)));
    cases
}

/// Workload reviews for `/validate` with a template that is no pod.
fn workloads() -> Vec<(String, &'static str)> {
    let deployment = |spec: &str| {
        let request = format!(
            r#""uid":"w-1","kind":{{"group":"apps","version":"v1","kind":"Deployment"}},"operation":"CREATE","object":{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"d"}},"spec":{{"template":{{"metadata":{{"labels":{{"opensandbox.io/id":"d"}}}},"spec":{spec}}}}}}}"#
        );
        review(&request)
    };
    vec![
        (
            deployment(r#"{"containers":{}}"#),
            "spec.template: the pod could not be read: spec.containers: expected an array, got an object",
        ),
        (
            deployment(r#"{"nodeSelector":{"disk":[]}}"#),
            "spec.nodeSelector.disk: expected a string (quote the value), got an array",
        ),
    ]
}

/// The names of the types, traits and aliases this crate defines.
fn type_names_in_src() -> Vec<String> {
    let declared =
        Regex::new(r"\b(?:struct|enum|trait|type|union)\s+([A-Z][A-Za-z0-9_]*)").unwrap();
    let mut names = Vec::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                names.extend(declared.captures_iter(&text).map(|c| c[1].to_owned()));
            }
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Fails when `answer` names a Rust type: serde's `struct X`/`enum X`, a
/// type of this crate or another, or any CamelCase word that is not a
/// Kubernetes kind.
struct TypeNames {
    /// This crate's one-word type names (`Config`): found only as serde
    /// quotes them, since the words themselves are plain English.
    single: Vec<String>,
    /// This crate's multi-word type names in one pattern, compiled once (a
    /// pattern per name per answer took minutes in a debug build).
    multi: Regex,
    camel: Regex,
    allowed: Vec<&'static str>,
}

impl TypeNames {
    fn new() -> Self {
        let ours = type_names_in_src();
        for name in ["PodView", "MetaView", "RequestIn", "ReviewIn", "SandboxPod"] {
            assert!(ours.iter().any(|n| n == name), "{name} not found in src");
        }
        let mut allowed = vec!["AdmissionReview", "OpenSandbox", "NetworkPolicy"];
        allowed.extend(KINDS.iter().map(|(kind, _, _)| *kind));
        let camel = Regex::new(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b").unwrap();
        let (multi, single): (Vec<String>, Vec<String>) = ours
            .into_iter()
            .filter(|name| !allowed.contains(&name.as_str()))
            .partition(|name| camel.is_match(name));
        let multi = Regex::new(&format!(r"\b(?:{})\b", multi.join("|"))).unwrap();
        TypeNames {
            single,
            multi,
            camel,
            allowed,
        }
    }

    /// Fails unless one of `texts` (the answer to `input`) says `want`, or
    /// if any of them names a type.
    #[track_caller]
    fn assert_says(&self, texts: &[String], want: &str, input: &str) {
        assert!(
            texts.iter().any(|t| t.contains(want)),
            "{want:?} not in {texts:?} for {input}"
        );
        for text in texts {
            self.assert_none(text, input);
        }
    }

    #[track_caller]
    fn assert_none(&self, answer: &str, input: &str) {
        let why = |what: &str| format!("{what} in the answer {answer:?} to {input}");
        for marker in ["struct ", "enum ", "View", "In`", "variant", "newtype"] {
            assert!(!answer.contains(marker), "{}", why(marker));
        }
        if let Some(name) = self.multi.find(answer) {
            panic!("{}", why(name.as_str()));
        }
        for name in &self.single {
            let quoted = [format!("`{name}`"), format!("expected {name}")];
            let found = quoted.iter().any(|q| answer.contains(q.as_str()));
            assert!(!found, "{}", why(name));
        }
        for word in self.camel.find_iter(answer) {
            assert!(
                self.allowed.contains(&word.as_str()),
                "{}",
                why(word.as_str())
            );
        }
    }
}

/// What people read in an answer body: an HTTP error, or the message and
/// warnings of an `AdmissionReview` response.
fn texts(body: &Value) -> Vec<String> {
    let mut out: Vec<String> = [&body["error"], &body["response"]["status"]["message"]]
        .into_iter()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    if let Some(warnings) = body["response"]["warnings"].as_array() {
        out.extend(
            warnings
                .iter()
                .filter_map(|w| w.as_str().map(str::to_owned)),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_in_json_words() {
    let (_alone, _pki, server, c) = common::attack::attacked(None).await;
    let names = TypeNames::new();
    let cases = [
        ("/mutate", envelopes(), 400),
        ("/mutate", objects(), 200),
        ("/validate", envelopes(), 400),
        ("/validate", workloads(), 200),
    ];
    for (path, corpus, status) in cases {
        for (body, want) in corpus {
            let r = post_review(&c, &server.url(path), body.clone().into_bytes()).await;
            assert_eq!(r.status().as_u16(), status, "{path} {body}");
            let answer: Value = r.json().await.expect("a JSON answer");
            if status == 200 {
                assert_eq!(answer["response"]["allowed"], false, "{answer}");
                assert_eq!(answer["response"]["status"]["code"], 400, "{answer}");
            }
            names.assert_says(&texts(&answer), want, &body);
        }
    }
    server.shutdown().await;
}

#[test]
fn the_cli_answers_in_json_words() {
    let _alone = common::attack::alone_blocking();
    let names = TypeNames::new();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("input");
    let write = |text: &str| std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();
    // `command` on the file fails, saying `want` and naming no type.
    let refused = |command: &str, want: &str, input: &str| {
        let out = run(&[command, "-f", path], dir.path());
        assert_ne!(out.code, 0, "{input}");
        names.assert_says(std::slice::from_ref(&out.stderr), want, input);
    };

    for (body, want) in envelopes() {
        write(&body);
        refused("review", want, &body);
    }
    for (body, want) in objects() {
        write(&body);
        let out = run(&["review", "-f", path], dir.path());
        assert_eq!(out.code, 0, "{}", out.stderr);
        let answer: Value = serde_json::from_str(&out.stdout).expect("an AdmissionReview");
        names.assert_says(&texts(&answer), want, &body);
        names.assert_none(&out.stderr, &body);
        // `inject` reads the object itself, so its paths start there.
        let object = body
            .split_once(r#""object":"#)
            .and_then(|(_, rest)| rest.strip_suffix("}}"))
            .expect("an object");
        let Some(want) = want.strip_prefix("request.object.") else {
            continue;
        };
        write(&format!(
            r#"{{"apiVersion":"v1","kind":"Pod",{}"#,
            &object[1..]
        ));
        refused("inject", want, object);
    }
    for (pod, want) in [
        (
            "metadata: 5",
            "metadata: expected an object, got the number 5",
        ),
        (
            "metadata: {labels: {a: 1}}",
            "metadata.labels.a: expected a string, got the number 1",
        ),
        (
            "metadata: {ownerReferences: [5]}",
            "metadata.ownerReferences[0]: expected an object, got the number 5",
        ),
        ("spec: 5", "spec: expected an object, got the number 5"),
        (
            "spec: [{kubernetes.io/os: linux}]",
            "spec: expected an object, got an array",
        ),
        ("status: 5", "status: expected an object, got the number 5"),
    ] {
        write(&format!("apiVersion: v1\nkind: Pod\n{pod}\n"));
        refused("diagnose", want, pod);
    }
}

/// The checker itself catches what it is for: a type of this crate named
/// in a sentence, with or without serde's `struct`.
#[test]
fn the_checker_sees_a_type_name() {
    let _alone = common::attack::alone_blocking();
    let names = TypeNames::new();
    for answer in [
        "request.object: invalid type: map, expected SandboxPod",
        "ReviewIn: missing field",
    ] {
        let caught = std::panic::catch_unwind(|| names.assert_none(answer, "a self-test"));
        assert!(caught.is_err(), "{answer} passed the checker");
    }
    names.assert_none("request.object.metadata: expected an object", "a self-test");
}
