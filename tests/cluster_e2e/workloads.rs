//! Scenario 1: pods that the controller-manager writes are injected.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::harness::{
    Env, P, Result, admissions, check, check_injected, check_not_injected, check_token_kept,
    running_on, sandbox_template, token_volumes,
};
use common::cluster::wait_for_pods;
use common::pods::controller_owner;

/// The egress policy every sandbox template here asks for.
const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;

async fn create<K>(env: &Env, ns: &str, object: Value) -> Result<()>
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    K: Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(env.client.clone(), ns);
    api.create(&PostParams::default(), &serde_json::from_value(object)?)
        .await?;
    Ok(())
}

/// What owns a pod, as `Kind/name`.
fn owner(p: &Pod) -> String {
    controller_owner(p).map_or_else(|| "none".into(), |(kind, name)| format!("{kind}/{name}"))
}

pub(crate) async fn workloads_pods_are_injected_once(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id, &[]).await?;
    let before = admissions(&env.webhook_metrics()?, "CREATE");
    create_workloads(env, ns).await?;
    let want: HashMap<&str, usize> = HashMap::from([
        ("web", 2),
        ("batch", 1),
        ("stateful", 2),
        ("cron", 1),
        ("plain", 2),
    ]);
    let pods = env.pods(ns);
    let all = wait_for_pods(
        &pods,
        "every workload's pods Running on kwok nodes",
        Duration::from_secs(100),
        |list| {
            let mut running: HashMap<String, usize> = HashMap::new();
            for p in list {
                if running_on(p).is_some() {
                    let app = p.metadata.labels.as_ref().and_then(|l| l.get("app"));
                    *running.entry(app.cloned().unwrap_or_default()).or_default() += 1;
                }
            }
            want.iter().all(|(app, n)| running.get(*app) == Some(n))
                && list.len() == want.values().sum::<usize>()
        },
    )
    .await?;

    check_pods(&all)?;
    check_admissions(&before, &admissions(&env.webhook_metrics()?, "CREATE"))
}

/// Reinvocation is on. After the webhook's patch the apiserver runs its own
/// mutating plugins once more; the `ServiceAccount` plugin adds nothing to a
/// pod with `automountServiceAccountToken: false` (the webhook's default),
/// so those pods are admitted once. The batch pod keeps its token: the
/// plugin mounts it into the injected containers, the apiserver calls the
/// webhook again, and that second pass, on the pod as decoded, defaulted
/// and mounted, must answer with no patch.
fn check_admissions(before: &HashMap<&str, u64>, after: &HashMap<&str, u64>) -> Result<()> {
    let delta = |outcome: &str| after[outcome] - before[outcome];
    check(
        delta("mutated") == 6 && delta("unchanged") == 1,
        format!(
            "{} pod creates mutated and {} answered with no patch, expected 6 and 1 (one admission per sandbox pod, a second for the one that keeps its token)",
            delta("mutated"),
            delta("unchanged")
        ),
    )?;
    let others: u64 = ["allowed", "skipped", "denied", "error"]
        .iter()
        .map(|o| delta(o))
        .sum();
    check(
        others == 0,
        format!(
            "{others} other pod reviews (plain pods reaching the webhook?): {after:?} vs {before:?}"
        ),
    )?;
    println!(
        "    webhook: 6 pod creates mutated, the one that keeps its token reinvoked with no patch, nothing else"
    );
    Ok(())
}

/// A `CronJob`, a Deployment, a Job and a `StatefulSet` with sandbox templates,
/// and a Deployment of plain pods.
async fn create_workloads(env: &Env, ns: &str) -> Result<()> {
    let policy = json!({format!("{P}/network-policy"): POLICY});
    let labels = |app: &str| json!({"app": app});
    let template = |app: &str, spec: Value| sandbox_template(app, &policy, &spec);
    // The CronJob first. `@every` (Kubernetes' cron parser takes it beside
    // the five fields) starts its run 5 s after its creation rather than at
    // the next whole minute; Forbid keeps it to one while its pod runs.
    create::<CronJob>(env, ns, json!({
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cron"},
        "spec": {"schedule": "@every 5s", "concurrencyPolicy": "Forbid",
                 "jobTemplate": {"spec": {"template": template("cron", json!({"restartPolicy": "Never"}))}}},
    }))
    .await?;
    create::<Deployment>(env, ns, json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels("web")}, "template": template("web", json!({}))},
    }))
    .await?;
    create::<Job>(
        env,
        ns,
        json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch"},
            // This one keeps its API token on purpose (contract:
            // execd.service-account-token: kept, with a
            // warning), so the ServiceAccount plugin mounts it into the
            // injected containers after the webhook, and the apiserver calls
            // the webhook again: its second pass must find them exactly its
            // own and answer with no patch.
            "spec": {"template": template("batch", json!({"restartPolicy": "Never", "automountServiceAccountToken": true}))},
        }),
    )
    .await?;
    create::<StatefulSet>(env, ns, json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "stateful"},
        "spec": {"replicas": 2, "serviceName": "stateful", "selector": {"matchLabels": labels("stateful")},
                 "template": template("stateful", json!({}))},
    }))
    .await?;
    // Not a sandbox: the objectSelector keeps its pods from the webhook.
    create::<Deployment>(env, ns, json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "plain"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels("plain")},
                 "template": {"metadata": {"labels": labels("plain")},
                              "spec": {"containers": [{"name": "app", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}},
    }))
    .await?;

    Ok(())
}

/// Each sandbox injected once, with a token of its own, under the owner the
/// controller-manager gave it; the plain pods untouched.
fn check_pods(all: &[Pod]) -> Result<()> {
    let mut tokens = HashSet::new();
    let mut sandboxes = 0;
    for p in all {
        let app = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .map_or("", String::as_str);
        let name = p.metadata.name.as_deref().unwrap_or("?");
        let owner = owner(p);
        let expected_owner = match app {
            "web" | "plain" => "ReplicaSet/",
            "batch" => "Job/batch",
            "stateful" => "StatefulSet/stateful",
            "cron" => "Job/cron-",
            other => return Err(format!("unexpected pod {name} of {other}").into()),
        };
        check(
            owner.starts_with(expected_owner),
            format!("{name} is owned by {owner}, expected {expected_owner}…"),
        )?;
        if app == "plain" {
            check_not_injected(p, &format!("{name} (not a sandbox) was injected"))?;
            // The control: the ServiceAccount admission plugin is on, and
            // mounts the token into a pod the webhook leaves alone.
            let spec = p.spec.as_ref().ok_or("a pod without a spec")?;
            check(
                !token_volumes(spec).is_empty(),
                format!("{name} (not a sandbox) has no service-account token volume"),
            )?;
            continue;
        }
        if app == "batch" {
            check_token_kept(p)?;
        } else {
            check_injected(p, true)?;
        }
        sandboxes += 1;
        check(
            tokens.insert(crate::harness::token(p).unwrap_or_default().to_owned()),
            format!("{name} shares its egress token with another replica"),
        )?;
    }
    println!("    {sandboxes} sandbox pods from 4 workloads injected, 2 plain pods untouched");
    Ok(())
}
