//! The drift audit's classes, on pods as the apiserver stores them.

use serde_json::{Value, json};

use super::*;
use crate::config::RELEASE;

const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;

/// A stored sandbox with `annotations`, and the webhook's containers when
/// `injected` (the sidecar too when it has a policy).
fn pod(annotations: &Value, injected: bool) -> SandboxPod {
    let policy = annotations.get("opensandbox.io/network-policy").is_some();
    let mut init = vec![];
    if injected {
        init.push(json!({"name": "execd-installer", "image": "opensandbox/execd:v1.0.22"}));
        if policy {
            init.push(json!({"name": "egress", "image": "opensandbox/egress:v1.1.7", "restartPolicy": "Always"}));
        }
    }
    serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "team", "uid": "u",
                     "labels": {"opensandbox.io/id": "p"}, "annotations": annotations},
        "spec": {"initContainers": init, "containers": [{"name": "sandbox", "image": "python"}]},
    }))
    .unwrap()
}

/// The record `config` writes for a pod with `rules` (Linux).
fn record(config: &Config, rules: Option<&str>) -> String {
    record::make(config, true, rules).value
}

fn state(pod: &SandboxPod, config: &Config) -> (DriftState, Vec<&'static str>) {
    let drift = classify(pod, config);
    (drift.state, drift.differs.names().collect())
}

/// contract: drift.states
#[test]
fn each_sandbox_has_one_state() {
    let config = Config::default();
    let rules = policy::parse(POLICY, 4096).unwrap().json;
    let current = pod(
        &json!({"opensandbox.io/injected": record(&config, Some(&rules)),
                "opensandbox.io/network-policy": POLICY}),
        true,
    );
    assert_eq!(state(&current, &config), (DriftState::Current, vec![]));

    // The release alone is no drift.
    let older = record(&config, None).replace(RELEASE, "0.0.9");
    let rebuilt = pod(&json!({"opensandbox.io/injected": older}), true);
    assert_eq!(state(&rebuilt, &config), (DriftState::Current, vec![]));

    // Injected with another image and configuration.
    let newer = Config::from_yaml("execd: {image: 'opensandbox/execd:v9'}").unwrap();
    assert_eq!(
        state(&current, &newer),
        (DriftState::Stale, vec!["config", "images"])
    );
    // A policy changed after creation: the sidecar still has the old one.
    let changed = pod(
        &json!({"opensandbox.io/injected": record(&config, Some(&rules)),
                "opensandbox.io/network-policy": r#"{"defaultAction":"allow"}"#}),
        true,
    );
    assert_eq!(
        state(&changed, &config),
        (DriftState::Stale, vec!["policy"])
    );
    // Injected by another revision, now watched by this one.
    let canary = Config::from_yaml("revision: canary").unwrap();
    let by_canary = pod(
        &json!({"opensandbox.io/injected": record(&canary, None)}),
        true,
    );
    assert_eq!(
        state(&by_canary, &config),
        (DriftState::Stale, vec!["revision"])
    );
    let unreadable = pod(&json!({"opensandbox.io/injected": "yes"}), true);
    assert_eq!(
        state(&unreadable, &config),
        (DriftState::Stale, vec!["record"])
    );

    // A record is not trusted without the containers it names.
    let forged = pod(
        &json!({"opensandbox.io/injected": record(&config, None)}),
        false,
    );
    assert_eq!(state(&forged, &config), (DriftState::NotInjected, vec![]));
    let no_sidecar = pod(
        &json!({"opensandbox.io/injected": record(&config, Some(&rules))}),
        true,
    );
    assert_eq!(
        state(&no_sidecar, &config),
        (DriftState::NotInjected, vec![])
    );

    let opted_out = pod(&json!({"opensandbox.io/inject": " False "}), false);
    assert_eq!(state(&opted_out, &config), (DriftState::OptedOut, vec![]));
    let escaped = pod(&json!({}), false);
    assert_eq!(state(&escaped, &config), (DriftState::NotInjected, vec![]));

    // A Windows sandbox gets no container, and its record says so.
    let windows = pod(
        &json!({"opensandbox.io/platform": "windows/amd64",
                "opensandbox.io/injected": record::make(&config, false, None).value}),
        false,
    );
    assert_eq!(state(&windows, &config), (DriftState::Current, vec![]));
}

/// contract: drift.events
#[test]
fn the_not_injected_and_the_stale_are_warned_of() {
    let config = Config::default();
    for state in DriftState::ALL {
        assert_eq!(
            state.warns(),
            matches!(state, DriftState::Stale | DriftState::NotInjected),
            "{state:?}"
        );
    }
    let escaped = pod(&json!({}), false);
    let facts = crate::lifecycle::PodFacts::of(&escaped, &config);
    assert!(warns(facts.drift, false, true));
    assert!(!warns(facts.drift, false, false), "only watched pods");
    assert!(!warns(facts.drift, true, true), "not one being deleted");

    let (reason, note) = event(facts.drift, &config);
    assert_eq!(reason, "SandboxNotInjected");
    assert!(
        note.contains("failurePolicy Ignore") && note.len() < 1024,
        "{note}"
    );
    let stale = Drift {
        state: DriftState::Stale,
        differs: Differs(Differs::CONFIG | Differs::IMAGES),
    };
    let (reason, note) = event(stale, &config);
    assert_eq!(reason, "SandboxInjectionStale");
    assert!(note.contains("differs in config, images"), "{note}");
}

/// A sandbox OpenSandbox's server built (no record: the webhook kept it as
/// built) is `server-completed`, not an escape; the same pod without the
/// server's installer script is not injected.
/// contract: drift.states
#[test]
fn server_built_sandboxes_are_server_completed() {
    let built = |script: &str| -> SandboxPod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "team", "uid": "u",
                         "labels": {"opensandbox.io/id": "p"}},
            "spec": {
                "initContainers": [{"name": "execd-installer", "image": "opensandbox/execd:v1.1.0",
                    "command": ["/bin/sh", "-c"], "args": [script],
                    "volumeMounts": [{"name": "opensandbox-bin", "mountPath": "/opt/opensandbox"}]}],
                "containers": [{"name": "sandbox", "image": "python",
                    "command": ["/opt/opensandbox/bootstrap.sh", "python"]}]},
        }))
        .unwrap()
    };
    let config = Config::default();
    let server = built(crate::mutate::inject::execd::INSTALL_SCRIPT);
    assert_eq!(
        classify(&server, &config).state,
        DriftState::ServerCompleted
    );
    let other = built("cp ./execd /opt/opensandbox/execd");
    assert_eq!(classify(&other, &config).state, DriftState::NotInjected);
}
