//! The error answers: each status code with its JSON body and a body
//! declared too large, in-process (`common::inprocess`); a body too large
//! as it arrives, a slow request and a panicking handler on the real server,
//! over TLS on 127.0.0.1 port 0.

use std::sync::Arc;
use std::time::Duration;

use common::https::{client, post_review};
use common::inprocess::{InProcess, assert_error};
use common::server::{
    Pki, Response, Running, assert_header, egress_review, read_response, start_tuned, tls_connect,
};
use sandbox_webhook::mutate::{TokenError, TokenSource};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::server_support::{assert_none_in_flight, start_fresh};

/// Admission requests that never got as far as an operation.
const UNKNOWN_ERRORS: [(&str, &str); 2] = [("operation", "unknown"), ("outcome", "error")];
const REQUESTS: &str = "sandbox_webhook_admission_requests_total";

async fn admission_errors(server: &Running) -> u64 {
    server.metric(REQUESTS, &UNKNOWN_ERRORS).await
}

/// contract: http.errors
#[tokio::test]
async fn http_errors_have_json_bodies() {
    let app = InProcess::start(|_| {}).await;
    let mutate = "/mutate";

    let r = app.post_review(mutate, Vec::new()).await;
    let body = assert_error(&r, 400);
    assert_eq!(body["error"], "request body is empty");
    let r = app.post_review(mutate, b"{not json".to_vec()).await;
    let body = assert_error(&r, 400);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("not an AdmissionReview")
    );
    let r = app
        .post_review(mutate, br#"{"kind":"AdmissionReview"}"#.to_vec())
        .await;
    assert_error(&r, 400);

    // Content-Type: wrong, missing; parameters are fine.
    let r = app
        .post(mutate, "text/plain", egress_review("u", true))
        .await;
    assert_error(&r, 415);
    let body = egress_review("u", true);
    let length = body.len().to_string();
    let r = app
        .request("POST", mutate, &[("content-length", &length)], body)
        .await;
    assert_error(&r, 415);
    let with_charset = "application/json; charset=utf-8";
    let r = app
        .post(mutate, with_charset, egress_review("u", true))
        .await;
    assert_eq!(r.status, 200);

    // (Over the limit: see `oversize_bodies_are_413`.) Exactly the limit is read (and then is not an AdmissionReview).
    let r = app.post_review(mutate, vec![b' '; 7 * 1024 * 1024]).await;
    assert_error(&r, 400);

    let r = app.request("POST", "/nope", &[], Vec::new()).await;
    assert_error(&r, 404);
    let r = app.request("GET", "/", &[], Vec::new()).await;
    assert_error(&r, 404);
    let r = app.request("GET", mutate, &[], Vec::new()).await;
    assert_eq!(r.header("allow"), Some("POST"));
    assert_error(&r, 405);

    // 400, 400, 400, 415, 415, 400 on /mutate are admission errors.
    assert_eq!(app.metric(REQUESTS, &UNKNOWN_ERRORS), 6);
}

/// Declared too large: refused from the headers alone, the body never read.
/// contract: limits.body-size
#[tokio::test]
async fn oversize_bodies_are_413() {
    let app = InProcess::start(|_| {}).await;
    let declared = (7 * 1024 * 1024 + 1).to_string();
    let headers = [
        ("content-type", "application/json"),
        ("content-length", declared.as_str()),
    ];
    let response = app.request("POST", "/mutate", &headers, Vec::new()).await;
    assert_eq!(response.status, 413);
    assert_header(&response, "content-type", "application/json");
    let body: Value = serde_json::from_slice(&response.body).unwrap();
    assert_eq!(body["status"], 413);
    assert!(
        body["error"].as_str().unwrap().contains("7340032"),
        "{body}"
    );
    assert_eq!(app.metric(REQUESTS, &UNKNOWN_ERRORS), 1);
}

/// No Content-Length: the limit is enforced while the body arrives, on a raw
/// connection, since an HTTP client that is still writing a body the server
/// has already refused sees a broken pipe instead of the 413.
/// contract: limits.body-size
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_chunked_bodies_are_413_while_read() {
    let (pki, server) = start_fresh().await;

    // The writer runs on its own, since the server answers before the
    // client is done.
    let stream = tls_connect(server.addr, pki.client_config()).await.unwrap();
    let (mut read, mut write) = tokio::io::split(stream);
    let writer = tokio::spawn(async move {
        let head = "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        write.write_all(head.as_bytes()).await?;
        let chunk = vec![b' '; 1024 * 1024];
        for _ in 0..8 {
            write
                .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
                .await?;
            write.write_all(&chunk).await?;
            write.write_all(b"\r\n").await?;
        }
        write.write_all(b"0\r\n\r\n").await?;
        std::io::Result::Ok(())
    });
    assert_json_status(&read_response(&mut read).await.expect("a response"), 413);
    writer.abort();
    assert_eq!(admission_errors(&server).await, 1);
    server.shutdown().await;
}

/// Fails the test unless `response` has `status` and a JSON body that says
/// it.
#[track_caller]
fn assert_json_status(response: &Response, status: u16) {
    assert_eq!(response.status, status);
    let body: Value = serde_json::from_slice(&response.body).unwrap();
    assert_eq!(body["status"], status);
}

/// contract: limits.request-timeout
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_hits_the_deadline() {
    let (pki, server) = start_tuned(|t| t.request_timeout = Duration::from_millis(300)).await;
    let mut stream = tls_connect(server.addr, pki.client_config()).await.unwrap();
    let head = "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
                content-length: 100\r\n\r\n{";
    stream.write_all(head.as_bytes()).await.unwrap();
    assert_json_status(&read_response(&mut stream).await.expect("a response"), 503);
    server.shutdown().await;
}

/// Panics whenever the webhook needs a fresh egress token.
struct PanickingTokens;

impl TokenSource for PanickingTokens {
    fn token(&self) -> Result<String, TokenError> {
        panic!("token source exploded")
    }
}

/// contract: limits.panic
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_answers_500_and_is_counted() {
    let pki = Pki::new();
    let mut s = pki.settings();
    s.tokens = Arc::new(PanickingTokens);
    let server = Running::start(s).await;
    let c = client(&pki);
    let url = server.url("/mutate");

    // No token annotation: the handler asks the token source and panics.
    let r = post_review(&c, &url, egress_review("uid-panic", false)).await;
    let body = common::https::assert_error(r, 500).await;
    assert_eq!(body["error"], "internal error");
    assert_eq!(server.metric("sandbox_webhook_panics_total", &[]).await, 1);
    assert_none_in_flight(&server).await;

    // The server (and the same keep-alive client) carry on.
    let r = post_review(&c, &url, egress_review("uid-ok", true)).await;
    assert_eq!(r.status(), 200);
    server.shutdown().await;
}
