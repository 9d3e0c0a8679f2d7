//! What the loopback server tests share: a server on fresh test settings,
//! waiting for a series to read a value, and the checks and requests
//! several of them make the same way.

use std::time::Duration;

use common::https::post_review;
use common::reviews;
use common::server::{Pki, Running, egress_review, eventually, post, start_tuned, tls_connect};
use common::wire::Tls;
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// TLS handshakes that failed, by reason.
pub const HANDSHAKE_FAILURES: &str = "sandbox_webhook_tls_handshake_failures_total";

/// A server on fresh test settings, untuned, and the PKI that serves and
/// trusts it.
pub async fn start_fresh() -> (Pki, Running) {
    start_tuned(|_| {}).await
}

/// Waits until the series `name` with exactly `labels` reads `want`,
/// failing the test with `what` after `patience`; how long it took.
pub async fn metric_reaches(
    server: &Running,
    what: &str,
    patience: Duration,
    name: &str,
    labels: &[(&str, &str)],
    want: u64,
) -> Duration {
    eventually(what, patience, || async {
        server.metric(name, labels).await == want
    })
    .await
}

/// Fails the test unless no request is left in a handler.
pub async fn assert_none_in_flight(server: &Running) {
    let name = "sandbox_webhook_requests_in_flight";
    assert_eq!(server.metric(name, &[]).await, 0, "{name}");
}

/// A review of `uid` on a fresh TLS connection with its head and only the
/// first half of its body sent, so that its handler waits for the rest;
/// the connection and the rest of the body.
pub async fn half_sent_review(server: &Running, pki: &Pki, uid: &str) -> (Tls, Vec<u8>) {
    let body = egress_review(uid, true);
    let (first, rest) = body.split_at(body.len() / 2);
    let mut stream = tls_connect(server.addr, pki.client_config()).await.unwrap();
    let head = format!(
        "POST /mutate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(first).await.unwrap();
    stream.flush().await.unwrap();
    (stream, rest.to_vec())
}

/// The HTTP/1.1 request of an egress review of `uid` (the pod brings its
/// token), as written on a raw connection.
pub fn egress_review_request(uid: &str) -> Vec<u8> {
    post("/mutate", "application/json", &egress_review(uid, true))
}

/// Posts the review of `pod`'s CREATE in the namespace `team`, as `uid`.
pub async fn post_create(
    client: &reqwest::Client,
    url: &str,
    uid: &str,
    pod: &Value,
) -> reqwest::Response {
    post_review(
        client,
        url,
        reviews::review(uid, "team", "CREATE", pod, None),
    )
    .await
}
