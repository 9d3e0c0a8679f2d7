//! The configuration's part of the injection record (`config/record.rs`).

use crate::config::{Config, RELEASE, short_sha256};

/// contract: record.config
#[test]
fn the_config_hash_covers_what_shapes_a_pod_and_only_that() {
    let default = Config::default();
    // The settings of a default configuration are `{}`.
    assert_eq!(default.record().config_hash, short_sha256(b"{}"));
    assert_eq!(default.record().config_hash, "44136fa355b3678a");
    // Writing a default out changes nothing.
    let explicit = Config::from_yaml("execd: {runAsInit: false}\negress: {mode: dns}").unwrap();
    assert_eq!(explicit.record(), default.record());
    // Neither do the settings that decide which pods are touched.
    let elsewhere =
        Config::from_yaml("excludedNamespaces: [a]\nrevision: canary\ncontroller: {platform: {deleteUnschedulable: true}}")
            .unwrap();
    assert_eq!(elsewhere.record().config_hash, default.record().config_hash);
    // What shapes a pod does, in any order of keys.
    let a = Config::from_yaml("egress: {mode: dns+nft, nativeSidecar: false}").unwrap();
    let b = Config::from_yaml("egress: {nativeSidecar: false, mode: dns+nft}").unwrap();
    assert_eq!(a.record().config_hash, b.record().config_hash);
    assert_eq!(
        a.record().config_hash,
        short_sha256(br#"{"egress":{"mode":"dns+nft","nativeSidecar":false}}"#)
    );
    for other in [
        "prefix: sandbox.example.com",
        "execd: {image: 'registry.example.com/execd:v2'}",
        "execd: {resources: {limits: {memory: 64Mi}}}",
        "egress: {image: null}",
        "pod: {automountServiceAccountToken: null}",
        "expiry: {defaultTimeoutSeconds: 3600}",
    ] {
        let config = Config::from_yaml(other).unwrap();
        assert_ne!(
            config.record().config_hash,
            default.record().config_hash,
            "{other}"
        );
    }
}

#[test]
fn the_head_names_the_release_and_revision() {
    let config = Config::from_yaml("revision: canary").unwrap();
    let record = config.record();
    assert_eq!(
        record.head,
        format!(
            r#"{{"release":"{RELEASE}","revision":"canary","config":"44136fa355b3678a","images":{{"#
        )
    );
    assert_eq!(record.execd, format!(r#""execd":"{}""#, config.execd.image));
    let off = Config::from_yaml("egress: {image: null}").unwrap();
    assert_eq!(off.record().egress, None);
    assert!(!off.record().head.contains("revision"));
}
