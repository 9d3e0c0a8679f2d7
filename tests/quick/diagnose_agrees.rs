//! `diagnose` says what the controller does: on generated groups of pods
//! of one controller owner (different expiry times, some being deleted,
//! some never expiring, owners of kinds the configuration deletes, shuts
//! down, suspends or leaves), each pod's `expiry.action` and `expiry.at`
//! are what the controller's own `lifecycle::decide`, run through time as
//! its loop runs it, carries out and when.

use std::path::Path;

use chrono::{DateTime, TimeDelta, Utc};
use common::cli::{run_with_input, temp_file};
use sandbox_webhook::config::Config;
use sandbox_webhook::lifecycle::{Action, ExpiresAt, History, PodFacts, SandboxPod, Write, decide};
use serde_json::{Value, json};

const NOW: &str = "2026-01-02T03:04:05Z";
const CASES: usize = 40;

/// splitmix64: the cases are the same at every run, and many.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n as u64).unwrap()
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What the controller's configuration does with each owner kind.
const CONFIGS: [&str; 3] = [
    "{}",
    "controller: {expiry: {ownerActions: {Job.batch: delete, Sandbox.agents.x-k8s.io: suspend}}}",
    "controller: {expiry: {ownerActions: {ReplicaSet.apps: delete, Sandbox.agents.x-k8s.io: shutdown}}}",
];

/// Owner kinds: (apiVersion, kind); `None` for pods without an owner.
const OWNERS: [Option<(&str, &str)>; 5] = [
    None,
    Some(("batch/v1", "Job")),
    Some(("agents.x-k8s.io/v1beta1", "Sandbox")),
    Some(("apps/v1", "ReplicaSet")),
    Some(("example.com/v1", "Pool")),
];

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(NOW).unwrap().to_utc()
}

/// One generated group: the configuration and its pods.
fn case(rng: &mut Rng, n: usize) -> (&'static str, Vec<Value>) {
    let config = *rng.pick(&CONFIGS);
    let owner = *rng.pick(&OWNERS);
    let pods = (0..=rng.below(4))
        .map(|i| {
            let expires_at = match rng.below(10) {
                0 => None,
                1 => Some("tomorrow".to_owned()),
                _ => {
                    let offset = *rng.pick(&[-600_i64, -60, -1, 0, 1, 30, 45, 600, 3600]);
                    Some((now() + TimeDelta::seconds(offset)).to_rfc3339())
                }
            };
            let mut labels = json!({"opensandbox.io/id": format!("c{n}-{i}")});
            if rng.below(8) == 0 {
                labels["opensandbox.io/manual-cleanup"] = json!("true");
            }
            let mut metadata = json!({"name": format!("c{n}-{i}"), "namespace": "team",
                "uid": format!("u{n}-{i}"), "labels": labels,
                "annotations": expires_at.map(|at| json!({"opensandbox.io/expires-at": at}))});
            if let Some((api_version, kind)) = owner {
                metadata["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind,
                    "name": format!("o{n}"), "uid": format!("o{n}"), "controller": true}]);
            }
            if rng.below(4) == 0 {
                metadata["deletionTimestamp"] = json!("2026-01-02T03:00:00Z");
            }
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                "spec": {"containers": [{"name": "sandbox", "image": "busybox"}]},
                "status": {"phase": "Running"}})
        })
        .collect();
    (config, pods)
}

/// What the controller does with the pod: `decide` at `now`, then at each
/// time it asks to be woken, each write it starts counted done, until it
/// starts the expiry's write (its action and the time) or has nothing left
/// to do (`Err`: whether it recorded the `InvalidExpiry` warning).
fn controller(
    pod: &PodFacts,
    siblings: &[&PodFacts],
    config: &Config,
) -> Result<(&'static str, DateTime<Utc>), bool> {
    let (mut history, mut t, mut invalid) = (History::default(), now(), false);
    for _ in 0..16 {
        let decision = decide(pod, config, None, &history, siblings.iter().copied(), t);
        match decision.action {
            Action::Start(Write::Expire { removal, .. }) => {
                return Ok((removal.action().as_str(), t));
            }
            Action::Start(write) => {
                invalid |= matches!(write, Write::InvalidExpiry { .. });
                history.record(write.mark());
            }
            Action::WakeAt(at) => {
                assert!(at > t, "a wake-up in the past: {at} at {t}");
                t = at;
            }
            Action::Idle => return Err(invalid),
        }
    }
    panic!("the controller never settles on the pod")
}

/// `diagnose` and the controller agree on every pod of 40 generated
/// owner groups: `expiry.action` is the removal the controller starts,
/// `expiry.at` when it starts it (at once when `at` is past), and a pod
/// the controller never removes has `at` null.
/// contract: diagnose.siblings, diagnose.expiry, controller.expiry-delete-owner
#[test]
fn diagnose_and_the_controller_agree_on_generated_owner_groups() {
    let mut rng = Rng(42);
    let (mut held, mut deleting) = (0, 0);
    for n in 0..CASES {
        let (config_text, pods) = case(&mut rng, n);
        let (_dir, config_path) = temp_file("config.yaml", config_text);
        let input = json!({"apiVersion": "v1", "kind": "List", "items": pods}).to_string();
        let out = run_with_input(
            &[
                "diagnose",
                "-f",
                "-",
                "--now",
                NOW,
                "--config",
                config_path.to_str().unwrap(),
            ],
            Path::new("."),
            input.as_bytes(),
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        let answers: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
        let config = Config::from_yaml(config_text).unwrap();
        let facts: Vec<PodFacts> = pods
            .iter()
            .map(|p| {
                PodFacts::of(
                    &serde_json::from_value::<SandboxPod>(p.clone()).unwrap(),
                    &config,
                )
            })
            .collect();
        for (i, answer) in answers.iter().enumerate() {
            // The group has one owner (or none): each other pod is a sibling.
            let siblings: Vec<&PodFacts> = facts
                .iter()
                .enumerate()
                .filter(|&(j, f)| j != i && f.owner.is_some())
                .map(|(_, f)| f)
                .collect();
            let expiry = &answer["expiry"];
            let said = (expiry["action"].as_str().unwrap(), expiry["at"].as_str());
            let context = format!(
                "case {n}, pod {i}, config {config_text}\npods: {}\ndiagnose: {answer:#}",
                serde_json::to_string_pretty(&pods).unwrap()
            );
            deleting += usize::from(facts[i].deleting);
            match controller(&facts[i], &siblings, &config) {
                Ok((action, at)) => {
                    let said_at = said.1.map(|t| {
                        DateTime::parse_from_rfc3339(t)
                            .unwrap_or_else(|e| panic!("at {t}: {e}\n{context}"))
                            .to_utc()
                    });
                    assert_eq!(said.0, action, "the action\n{context}");
                    assert_eq!(
                        said_at.map(|t| t.max(now())),
                        Some(at),
                        "when the controller acts\n{context}"
                    );
                    let own = facts[i].expires_at.as_ref().and_then(ExpiresAt::time);
                    held += usize::from(own.is_some_and(|own| own.max(now()) < at));
                }
                Err(invalid) => {
                    let action = if invalid { "invalid" } else { "none" };
                    assert_eq!(said, (action, None), "nothing is ever done\n{context}");
                }
            }
        }
    }
    // The generator reaches the cases that matter.
    assert!(held >= 3, "only {held} pods held back by a sibling");
    assert!(deleting >= 5, "only {deleting} pods being deleted");
}
