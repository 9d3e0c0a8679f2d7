//! What the server answers to well-formed reviews: the same bytes as the
//! library and the CLI, the null handler's allow and the fixed patch,
//! in-process (`common::inprocess`); and a thousand reviews over 32
//! keep-alive connections to the real server, over TLS on 127.0.0.1 port 0.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use common::args::ABSENT_TLS;
use common::cli::{bin, stdout_of};
use common::clock::NOW;
use common::context::TestContext;
use common::https::{client_builder, patch_of, post_review};
use common::inprocess::InProcess;
use common::server::egress_review;
use sandbox_webhook::config::Config;
use sandbox_webhook::server::Handler;
use serde_json::{Value, json};

use crate::server_support::{assert_none_in_flight, start_fresh};

const MUTATED: [(&str, &str); 2] = [("operation", "CREATE"), ("outcome", "mutated")];

/// contract: cli.reproducible, answer.deterministic
#[tokio::test]
async fn answers_exactly_like_review_and_the_cli() {
    let yaml = "egress: {image: example.com/egress:v1}\nexpiry: {maxTimeoutSeconds: 86400}\n";
    let (app, config_path) = InProcess::with_config(yaml).await;

    let body = egress_review("uid-same", true);
    let response = app.post_review("/mutate", body.clone()).await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("application/json"));
    let served = response.body;

    let ctx = TestContext::new().config(Config::load(&config_path).unwrap());
    let direct = sandbox_webhook::review::review(&body, &ctx.get()).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&served),
        String::from_utf8_lossy(&direct.body)
    );

    let input = app.pki.path("review.json");
    std::fs::write(&input, &body).unwrap();
    let cli = stdout_of(
        bin()
            .args(["review", "--now", NOW, "--config"])
            .arg(&config_path)
            .arg("-f")
            .arg(&input),
    );
    assert_eq!(
        String::from_utf8_lossy(&served).trim_end(),
        String::from_utf8_lossy(&cli).trim_end()
    );

    // And it really is a mutation with the configured image.
    let patch = patch_of(&served).to_string();
    assert!(patch.contains("example.com/egress:v1"), "{patch}");
    let requests = "sandbox_webhook_admission_requests_total";
    assert_eq!(app.metric(requests, &MUTATED), 1);
}

#[tokio::test]
async fn null_handler_allows_without_looking() {
    let app = InProcess::start(|s| s.handler = Handler::Null).await;

    let body = egress_review("uid-null", true);
    let response = app.post_review("/mutate", body.clone()).await;
    assert_eq!(response.status, 200);
    let served = response.body;
    assert_eq!(served, sandbox_webhook::review::null_review(&body).unwrap());
    let review = sandbox_webhook::review::parse_response(&served).expect("AdmissionReview");
    let response = review.response.expect("response");
    assert!(response.allowed);
    assert!(response.patch.is_none());
    let unchanged = [("operation", "CREATE"), ("outcome", "unchanged")];
    assert_eq!(
        app.metric("sandbox_webhook_admission_requests_total", &unchanged),
        1
    );
}

/// The benchmarks' fixed-patch handler (bench/apiserver.sh) answers every
/// review with its patch and the request's uid, the object unread; the CLI
/// refuses a file that is not a JSON patch.
#[tokio::test]
async fn fixed_patch_handler_answers_its_patch() {
    let ops = json!([{"op": "add", "path": "/metadata/labels/bench", "value": "1"}]);
    let patch = sandbox_webhook::mutate::Patch::from_json(ops.to_string().into_bytes()).unwrap();
    assert_eq!(patch.len(), 1);
    let patch: &'static _ = Box::leak(Box::new(patch));
    let app = InProcess::start(|s| s.handler = Handler::Fixed(patch)).await;
    let response = app
        .post_review("/mutate", egress_review("uid-fixed", true))
        .await;
    assert_eq!(response.status, 200);
    let review = sandbox_webhook::review::parse_response(&response.body).expect("AdmissionReview");
    let response = review.response.expect("response");
    assert_eq!(response.uid, "uid-fixed");
    assert!(response.allowed);
    let sent: Value = serde_json::from_slice(response.patch.as_deref().expect("a patch")).unwrap();
    assert_eq!(sent, ops);

    let bad = app.pki.path("not-a-patch.json");
    std::fs::write(&bad, r#"{"op": "add"}"#).unwrap();
    // Refused before the certificates are read, so none are needed.
    let out = bin()
        .arg("serve")
        .args(ABSENT_TLS)
        .arg("--fixed-patch")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--fixed-patch"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_requests_over_32_connections() {
    const CONNECTIONS: usize = 32;
    const REQUESTS: usize = 1000;
    let (pki, server) = start_fresh().await;
    let url = Arc::new(server.url("/mutate"));
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();

    let mut tasks = Vec::new();
    for _ in 0..CONNECTIONS {
        // One client with at most one connection each, used sequentially:
        // 32 keep-alive connections in all.
        let c = client_builder(&pki)
            .pool_max_idle_per_host(1)
            .build()
            .unwrap();
        let (url, next) = (url.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut ok = 0;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= REQUESTS {
                    return ok;
                }
                let uid = format!("uid-{i}");
                let r = post_review(&c, &url, egress_review(&uid, true)).await;
                assert_eq!(r.status(), 200);
                let review: Value = r.json().await.unwrap();
                assert_eq!(review["response"]["uid"], json!(uid));
                assert_eq!(review["response"]["allowed"], true);
                assert_eq!(review["response"]["patchType"], "JSONPatch");
                ok += 1;
            }
        }));
    }
    let mut answered = 0;
    for t in tasks {
        answered += t.await.expect("client task");
    }
    assert_eq!(answered, REQUESTS);
    eprintln!(
        "{REQUESTS} requests over {CONNECTIONS} connections answered in {:?} (debug build)",
        started.elapsed()
    );
    let requests = "sandbox_webhook_admission_requests_total";
    assert_eq!(
        server.metric(requests, &MUTATED).await,
        u64::try_from(REQUESTS).unwrap()
    );
    assert_none_in_flight(&server).await;
    server.shutdown().await;
}
