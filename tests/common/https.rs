//! reqwest (rustls, trusting the test CA, HTTP/1.1 like the apiserver) for
//! ordinary requests to a test server, and readers for what it answers.

use std::time::Duration;

use serde_json::{Value, json};

use crate::server::Pki;

/// A client builder that trusts `pki`'s CA and keeps the peer certificate of
/// every response ([`peer_cert`]).
pub fn client_builder(pki: &Pki) -> reqwest::ClientBuilder {
    let ca = reqwest::Certificate::from_pem(pki.ca.cert_pem().as_bytes()).expect("CA");
    reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(ca)
        .http1_only()
        .tls_info(true)
        .timeout(Duration::from_secs(20))
}

/// [`client_builder`] as it is: one pool of keep-alive connections.
pub fn client(pki: &Pki) -> reqwest::Client {
    client_builder(pki).build().expect("client")
}

/// A client that opens a new connection (and handshake) for every request.
pub fn fresh_client(pki: &Pki) -> reqwest::Client {
    client_builder(pki)
        .pool_max_idle_per_host(0)
        .build()
        .expect("client")
}

/// POSTs `body` as `content_type`; the error when the request fails.
pub async fn try_post(
    client: &reqwest::Client,
    url: &str,
    content_type: &str,
    body: Vec<u8>,
) -> reqwest::Result<reqwest::Response> {
    client
        .post(url)
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
}

/// POSTs a review body as JSON; fails the test when there is no answer.
pub async fn post_review(client: &reqwest::Client, url: &str, body: Vec<u8>) -> reqwest::Response {
    try_post(client, url, "application/json", body)
        .await
        .expect("request")
}

/// The DER certificate the server presented for `response`.
pub fn peer_cert(response: &reqwest::Response) -> Vec<u8> {
    response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .expect("TLS info with the peer certificate")
        .to_vec()
}

/// The DER of the first certificate in `pem`.
pub fn der(pem: &str) -> Vec<u8> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .expect("one certificate")
        .expect("PEM")
        .to_vec()
}

/// The decoded JSON patch of an `AdmissionReview` response.
pub fn patch_of(body: &[u8]) -> Value {
    let review = sandbox_webhook::review::parse_response(body).expect("AdmissionReview");
    let patch = review.response.expect("response").patch.expect("a patch");
    serde_json::from_slice(&patch).expect("JSON patch")
}

/// Asserts an HTTP error answer: `status`, a JSON body that repeats it and a
/// non-empty `error`. Returns the body.
pub async fn assert_error(response: reqwest::Response, status: u16) -> Value {
    let got = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.bytes().await.expect("the body");
    assert_error_parts(got, &content_type, &body, status)
}

/// [`assert_error`] on an answer's parts: its status, `Content-Type` and body.
#[track_caller]
pub fn assert_error_parts(got: u16, content_type: &str, body: &[u8], status: u16) -> Value {
    assert_eq!(got, status);
    assert_eq!(content_type, "application/json");
    let body: Value = serde_json::from_slice(body).expect("JSON error body");
    assert_eq!(body["status"], json!(status), "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );
    body
}
