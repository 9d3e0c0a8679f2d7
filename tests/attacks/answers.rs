//! The server's answer to one review, as the attacks on a pod's egress
//! policy read it: the `response`, and the pod as the apiserver would
//! store it after the patch.

use common::https::{patch_of, post_review};
use common::pods::SandboxPod;
use common::server::{Pki, Running, review_body};
use serde_json::Value;
use tokio::sync::MutexGuard;

/// Both images, so an admitted policy gets the sidecar and the installer.
pub(crate) const CONFIG: &str =
    "egress:\n  image: example.com/egress:v1\nexecd:\n  image: example.com/execd:v1\n";
pub(crate) const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;

/// The `response` of the server's answer to the review `body`, and the
/// whole answer; fails, showing the review, unless it is a 200.
pub(crate) async fn answer_to(
    c: &reqwest::Client,
    server: &Running,
    body: Vec<u8>,
) -> (Value, Vec<u8>) {
    let sent = String::from_utf8_lossy(&body).into_owned();
    let r = post_review(c, &server.url("/mutate"), body).await;
    assert_eq!(r.status(), 200, "{sent}");
    let body = r.bytes().await.expect("an answer").to_vec();
    let answer: Value = serde_json::from_slice(&body).expect("JSON");
    (answer["response"].clone(), body)
}

/// A test alone against a server that reads [`CONFIG`], and a keep-alive
/// client that trusts it: what the attacks on a pod's policy review their
/// pods with.
pub(crate) struct PolicyServer {
    pub(crate) server: Running,
    c: reqwest::Client,
    /// Kept: the server polls its files.
    _pki: Pki,
    _alone: MutexGuard<'static, ()>,
}

impl PolicyServer {
    pub(crate) async fn start() -> PolicyServer {
        let (alone, pki, server, c) = common::attack::attacked(Some(CONFIG)).await;
        PolicyServer {
            server,
            c,
            _pki: pki,
            _alone: alone,
        }
    }

    /// [`answer_to`] the review `body`.
    pub(crate) async fn answer_to(&self, body: Vec<u8>) -> (Value, Vec<u8>) {
        answer_to(&self.c, &self.server, body).await
    }

    /// The `response` of the server's answer to a review of `pod`'s
    /// CREATE, and the whole answer.
    pub(crate) async fn answer(&self, pod: &Value) -> (Value, Vec<u8>) {
        self.answer_to(review_body("u-policy", pod)).await
    }

    /// The value of the one series `name` with exactly `labels`.
    pub(crate) async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.server.metric(name, labels).await
    }

    /// Stops the server, which must stop cleanly.
    pub(crate) async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

/// `pod` with the patch of the answer `body` applied.
pub(crate) fn applied(pod: &Value, body: &[u8]) -> Value {
    let ops: json_patch::Patch = serde_json::from_value(patch_of(body)).expect("a JSON patch");
    let mut out = pod.clone();
    json_patch::patch(&mut out, &ops).expect("the patch applies");
    out
}

/// Sandbox pod `name` in `team-a` asking for [`POLICY`].
pub(crate) fn policy_pod(name: &str) -> SandboxPod {
    SandboxPod::new(name)
        .namespace("team-a")
        .annotation("network-policy", POLICY)
}
