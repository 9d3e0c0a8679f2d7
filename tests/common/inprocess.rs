//! The admission router in-process, with no socket and no TLS
//! (`tower::ServiceExt::oneshot`), for tests of what one request is answered:
//! status, headers, JSON body, metrics. What needs a connection (TLS,
//! timeouts, keep-alive, draining, limits on the bytes as they arrive) is
//! tested on a real server ([`crate::server::Running`]).

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{Request, header};
use http_body_util::BodyExt;
use sandbox_webhook::server::{Admission, ServerSettings};
use serde_json::Value;
use tower::ServiceExt;

use crate::https::assert_error_parts;
use crate::metrics::Metrics;
use crate::server::{Pki, Response};

/// The admission router of a server built from test settings, and the PKI
/// (and directory) those settings name.
pub struct InProcess {
    admission: Admission,
    pub pki: Pki,
}

impl InProcess {
    /// On fresh test settings ([`Pki::settings`]) with `adjust` applied.
    pub async fn start(adjust: impl FnOnce(&mut ServerSettings)) -> InProcess {
        let pki = Pki::new();
        let mut settings = pki.settings();
        adjust(&mut settings);
        let admission = Admission::load(&settings).await.expect("settings load");
        InProcess { admission, pki }
    }

    /// Reading the configuration file `config.yaml`, written with `yaml`;
    /// and that file's path.
    pub async fn with_config(yaml: &str) -> (InProcess, PathBuf) {
        let pki = Pki::new();
        let (settings, path) = pki.settings_with_config(yaml);
        let admission = Admission::load(&settings).await.expect("settings load");
        (InProcess { admission, pki }, path)
    }

    /// The answer to `method path` with `headers` and `body` (a body's
    /// `Content-Length` is the caller's to set, as a client's is).
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Response {
        let mut request = Request::builder().method(method).uri(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Body::from(body)).expect("a request");
        let response = self
            .admission
            .router()
            .oneshot(request)
            .await
            .expect("infallible");
        let (parts, body) = response.into_parts();
        let body = body.collect().await.expect("the body").to_bytes().to_vec();
        let headers = parts
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        Response {
            status: parts.status.as_u16(),
            headers,
            body,
        }
    }

    /// A POST of `body` as `content_type`, with its `Content-Length`.
    pub async fn post(&self, path: &str, content_type: &str, body: Vec<u8>) -> Response {
        let length = body.len().to_string();
        let headers = [
            (header::CONTENT_TYPE.as_str(), content_type),
            (header::CONTENT_LENGTH.as_str(), length.as_str()),
        ];
        self.request("POST", path, &headers, body).await
    }

    /// A POST of a review body as JSON.
    pub async fn post_review(&self, path: &str, body: Vec<u8>) -> Response {
        self.post(path, "application/json", body).await
    }

    /// What the admin port's `/metrics` would show, parsed.
    pub fn metrics(&self) -> Metrics {
        Metrics::parse(&self.admission.metrics().expect("metrics"))
    }

    /// The value of the one series `name` with exactly `labels`.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.metrics().value(name, labels)
    }
}

/// Asserts an HTTP error answer: `status`, a JSON body that repeats it and a
/// non-empty `error`. Returns the body.
#[track_caller]
pub fn assert_error(response: &Response, status: u16) -> Value {
    let content_type = response.header("content-type").unwrap_or_default();
    assert_error_parts(response.status, content_type, &response.body, status)
}
