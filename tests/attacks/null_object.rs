//! contract: select.null-object
//!
//! A Pod CREATE whose object is null or missing carries no
//! pod to admit. It was allowed unmutated; it is denied with code 400 and a
//! sentence, by the real server on loopback and by `review`.

use common::cli::run;
use common::https::post_review;
use serde_json::{Value, json};

/// A Pod `operation` whose `object` field is `object` (left out when `None`).
fn review(operation: &str, object: Option<Value>) -> Value {
    let mut request = json!({
        "uid": "u-null",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team-a",
        "operation": operation,
    });
    if let Some(object) = object {
        request["object"] = object;
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

const SAYS: &str = "the pod could not be read: request.object: a Pod CREATE carries the pod, but it is null or missing.";

#[track_caller]
fn assert_denied(answer: &Value, input: &Value) {
    let response = &answer["response"];
    assert_eq!(response["uid"], "u-null", "{answer}");
    assert_eq!(response["allowed"], false, "{input} -> {answer}");
    assert_eq!(response["status"]["code"], 400, "{answer}");
    assert_eq!(response["status"]["message"], SAYS, "{answer}");
    assert!(response.get("patch").is_none(), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_denies_a_create_without_its_pod() {
    let (_alone, _pki, server, c) = common::attack::attacked(None).await;
    let url = server.url("/mutate");
    for input in [review("CREATE", Some(Value::Null)), review("CREATE", None)] {
        let r = post_review(&c, &url, serde_json::to_vec(&input).unwrap()).await;
        assert_eq!(r.status(), 200);
        assert_denied(&r.json().await.expect("JSON"), &input);
    }
    // Only a CREATE must carry its pod: a DELETE has none, and is let be.
    let input = review("DELETE", Some(Value::Null));
    let r = post_review(&c, &url, serde_json::to_vec(&input).unwrap()).await;
    let answer: Value = r.json().await.expect("JSON");
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let denied = server
        .metric(
            "sandbox_webhook_admission_requests_total",
            &[("operation", "CREATE"), ("outcome", "denied")],
        )
        .await;
    assert_eq!(denied, 2);
    server.shutdown().await;
}

#[test]
fn review_denies_a_create_without_its_pod() {
    let _alone = common::attack::alone_blocking();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("review.json");
    for input in [review("CREATE", Some(Value::Null)), review("CREATE", None)] {
        std::fs::write(&file, input.to_string()).unwrap();
        let out = run(&["review", "-f", file.to_str().unwrap()], dir.path());
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_denied(&serde_json::from_str(&out.stdout).expect("JSON"), &input);
    }
}
