//! The injection record (contract: record.value): the `<prefix>/injected`
//! annotation on every pod the webhook completes, saying which release
//! completed it, with which configuration (a hash of it), which images and
//! which policy (a hash of the sidecar's rules), as Istio's
//! `sidecar.istio.io/status` and Linkerd's `linkerd.io/proxy-version` do.
//!
//! The configuration's part is made once per configuration
//! ([`crate::config::RecordTemplate`]); a review appends the egress image
//! and the policy's hash when the pod has a policy, and hashes the rules
//! only then. The record is a function of the configuration and the policy
//! alone, so admitting the webhook's own output again (reinvocation)
//! computes the same text and leaves it as it is, and a changed policy or
//! configuration rewrites it with the injection (contract:
//! record.reinvocation).
//!
//! Invariant: the images recorded are the configured ones, because the
//! webhook replaces an installer or sidecar that is not exactly its own
//! (`layout`).

use std::ops::Range;

use crate::config::{Config, record::push_short_sha256};

/// A pod's record, and where in it the audit annotations find the images
/// and the policy's hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injected {
    /// The annotation's value: compact JSON.
    pub value: String,
    images: Range<usize>,
    policy: Option<Range<usize>>,
    /// `value` as a JSON string (quoted and escaped), joined from the
    /// template's escaped parts: the patch and the audit annotations copy
    /// it instead of escaping `value` again.
    json: String,
    /// The images in `json`, escaped, without quotes.
    images_json: Range<usize>,
}

impl Injected {
    /// The images, as the record's JSON object (`{"execd":"…"}`).
    #[must_use]
    pub fn images(&self) -> &str {
        &self.value[self.images.clone()]
    }

    /// The policy's hash (16 hex digits), when the pod has a policy.
    #[must_use]
    pub fn policy(&self) -> Option<&str> {
        self.policy.clone().map(|r| &self.value[r])
    }

    /// [`Injected::value`] as a JSON string: what `serde_json` writes for it.
    pub(crate) fn value_json(&self) -> &str {
        &self.json
    }

    /// [`Injected::images`] as it reads inside a JSON string, without quotes.
    pub(crate) fn images_escaped(&self) -> &str {
        &self.json[self.images_json.clone()]
    }
}

/// The record of a pod completed with `config`: `linux` pods get execd,
/// and with a policy (`rules`, the sidecar's `OPENSANDBOX_EGRESS_RULES`) the
/// egress sidecar; a Windows pod gets neither and records no image. The
/// record and its JSON string are written side by side from the template's
/// plain and escaped parts; the policy's hash needs no escaping.
#[must_use]
pub fn make(config: &Config, linux: bool, rules: Option<&str>) -> Injected {
    let template = config.record();
    let escaped = &template.escaped;
    let egress = rules
        .and(template.egress.as_deref().zip(escaped.egress.as_deref()))
        .filter(|_| linux);
    let mut value = String::with_capacity(
        template.head.len() + template.execd.len() + egress.map_or(0, |e| e.0.len()) + 34,
    );
    let mut json = String::with_capacity(
        escaped.head.len() + escaped.execd.len() + egress.map_or(0, |e| e.1.len()) + 44,
    );
    json.push('"');
    value.push_str(&template.head);
    json.push_str(&escaped.head);
    let images_start = value.len() - 1;
    let images_json_start = json.len() - 1;
    if linux {
        value.push_str(&template.execd);
        json.push_str(&escaped.execd);
        if let Some((egress, egress_json)) = egress {
            value.push(',');
            value.push_str(egress);
            json.push(',');
            json.push_str(egress_json);
        }
    }
    value.push('}');
    json.push('}');
    let images = images_start..value.len();
    let images_json = images_json_start..json.len();
    let mut policy = None;
    if let (Some(rules), Some(_)) = (rules, egress) {
        value.push_str(r#","policy":""#);
        json.push_str(r#",\"policy\":\""#);
        let start = value.len();
        let digest = ring::digest::digest(&ring::digest::SHA256, rules.as_bytes());
        push_short_sha256(&digest, &mut value);
        policy = Some(start..value.len());
        json.push_str(&value[start..]);
        value.push('"');
        json.push_str(r#"\""#);
    }
    value.push('}');
    json.push_str("}\"");
    Injected {
        value,
        images,
        policy,
        json,
        images_json,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RELEASE, short_sha256};

    /// contract: record.value
    #[test]
    fn a_record_names_release_config_images_and_policy() {
        let config = Config::from_yaml("revision: canary").unwrap();
        let rules = r#"{"defaultAction":"deny","egress":[]}"#;
        let record = make(&config, true, Some(rules));
        let json: serde_json::Value = serde_json::from_str(&record.value).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "release": RELEASE,
                "revision": "canary",
                "config": config.record().config_hash,
                "images": {"execd": config.execd.image, "egress": config.egress.image},
                "policy": short_sha256(rules.as_bytes()),
            })
        );
        assert_eq!(
            record.images(),
            serde_json::to_string(&json["images"]).unwrap()
        );
        assert_eq!(
            record.policy(),
            Some(short_sha256(rules.as_bytes()).as_str())
        );

        let plain = make(&Config::default(), true, None);
        let json: serde_json::Value = serde_json::from_str(&plain.value).unwrap();
        assert_eq!(
            json["images"],
            serde_json::json!({"execd": Config::default().execd.image})
        );
        assert!(json.get("policy").is_none() && json.get("revision").is_none());
        assert_eq!(plain.policy(), None);

        for r in [&record, &plain] {
            assert_escaped(r);
        }

        // Windows: nothing injected, so no image and no policy.
        let windows = make(&Config::default(), false, Some(rules));
        let json: serde_json::Value = serde_json::from_str(&windows.value).unwrap();
        assert_eq!(json["images"], serde_json::json!({}));
        assert_eq!(windows.images(), "{}");
        assert!(json.get("policy").is_none());
        assert_escaped(&windows);
    }

    /// The JSON string kept beside the record is what `serde_json` writes.
    fn assert_escaped(record: &Injected) {
        assert_eq!(
            record.value_json(),
            serde_json::to_string(&record.value).unwrap()
        );
        let images = serde_json::to_string(record.images()).unwrap();
        assert_eq!(record.images_escaped(), &images[1..images.len() - 1]);
    }
}
