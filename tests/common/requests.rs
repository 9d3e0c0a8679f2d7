//! Whole HTTP requests that carry one admission review, for the tests that
//! write to the socket themselves.

use serde_json::Value;

/// A JSON `POST` to `path` of the review of `object`'s CREATE in `team-a`.
pub fn create_request(path: &str, uid: &str, object: &Value) -> Vec<u8> {
    let review = crate::reviews::review(uid, "team-a", "CREATE", object, None);
    crate::wire::post(path, "application/json", &review)
}
