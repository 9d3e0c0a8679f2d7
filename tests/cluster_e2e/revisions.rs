//! contract: revision.selectors, revision.label, revision.controller,
//! select.match-conditions, audit.log
//!
//! Two releases at once, as a platform team canaries an upgrade: the
//! release `cluster.sh up` installed (the default) and a `canary` release
//! (its own webhook and controller processes, another execd image, the
//! chart's configurations rendered with `revision=canary`). Through a
//! namespace moved to the canary and back (one label each way) and pods
//! labelled for it, every sandbox is injected by the right release, by
//! exactly one (the apiserver's audit log names the configurations that
//! mutated each create), and none is missed; an opted-out pod reaches
//! neither, nor does one labelled with a revision no release serves, which
//! the default release's controller reports. Each release's controller
//! looks after its own sandboxes only.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::harness::{Env, P, Result, admit, check, init_names, sandbox_pod};
use crate::releases::{Release, record, wait_injected_by};
use common::audit;

const CANARY_IMAGE: &str = "opensandbox/execd:canary";
const WEBHOOK: &str = "sandbox-webhook.opensandbox.io";

pub(crate) async fn two_releases_side_by_side(env: &Env, id: &str) -> Result<()> {
    let canary = tokio::task::block_in_place(|| {
        Release::install(
            env,
            "canary",
            &format!("{{revision: canary, execd: {{image: '{CANARY_IMAGE}'}}}}"),
            true,
            &["revision=canary"],
        )
    })?;
    let second = format!("{id}_b");
    let result = side_by_side(env, id, &second, &canary).await;
    let removed = canary.remove(env);
    let cleaned = env.clean_up(&second).await;
    result.and(removed).and(cleaned)
}

/// Who must have injected a pod.
#[derive(Clone, Copy, PartialEq, Debug)]
enum By {
    Default,
    Canary,
    Nobody,
}

#[expect(
    clippy::too_many_lines,
    reason = "one scenario, read top to bottom: each step's check follows its action"
)]
async fn side_by_side(env: &Env, id: &str, second: &str, canary: &Release) -> Result<()> {
    let moved = env.namespace(id, &[]).await?;
    let other = env.namespace(second, &[]).await?;
    let rev = format!("{P}/rev");
    wait_injected_by(env, &other, &[(&rev, "canary")], Some("canary")).await?;
    let mut created = Created {
        env,
        expected: Vec::new(),
    };

    let plain = json!({});
    // Before the move: the default release.
    created
        .sandbox(&moved, "before", None, &plain, By::Default)
        .await?;
    // One label moves the namespace to the canary.
    env.kubectl(
        &["label", "namespace", &moved, &format!("{rev}=canary")],
        "",
    )?;
    wait_injected_by(env, &moved, &[], Some("canary")).await?;
    let opt_out = json!({format!("{P}/inject"): "false"});
    for (ns, name, pod_rev, annotations, by) in [
        (&moved, "moved", None, &plain, By::Canary),
        // The namespace wins over a pod's own label.
        (&moved, "relabelled", Some("stable"), &plain, By::Canary),
        // Elsewhere, a pod labelled for the canary goes to it; others do not.
        (&other, "opted-in", Some("canary"), &plain, By::Canary),
        (&other, "plain", None, &plain, By::Default),
        // Opted out: neither is called (the chart's matchConditions).
        (&other, "opted-out", None, &opt_out, By::Nobody),
        // A revision no release serves: no injection at all.
        (&other, "unserved", Some("nobody"), &plain, By::Nobody),
    ] {
        created.sandbox(ns, name, pod_rev, annotations, by).await?;
    }
    // Rollback: one label again.
    env.kubectl(&["label", "namespace", &moved, &format!("{rev}-")], "")?;
    wait_injected_by(env, &moved, &[], None).await?;
    created
        .sandbox(&moved, "rolled-back", None, &plain, By::Default)
        .await?;

    let release_ns = env.var("RELEASE_NAMESPACE")?;
    let default_config = format!("sandbox-webhook-{release_ns}");
    let expected = created.expected;
    let canary_configs = [
        format!("canary-sandbox-webhook-{release_ns}"),
        format!("canary-sandbox-webhook-{release_ns}-pods"),
    ];
    for (ns, name, by) in &expected {
        let event =
            audit::pod_create(std::path::Path::new(env.var("AUDIT_LOG")?), ns, name).await?;
        let mutated = mutating_configurations(&event.annotations);
        let decisions = event.under(WEBHOOK).get("decision").copied();
        let right = match by {
            By::Default => mutated == [default_config.clone()] && decisions == Some("mutated"),
            By::Canary => {
                mutated.len() == 1
                    && canary_configs.contains(&mutated[0])
                    && decisions == Some("mutated")
            }
            By::Nobody => {
                event
                    .annotations
                    .keys()
                    .all(|k| !k.contains("webhook.admission.k8s.io"))
                    && decisions.is_none()
            }
        };
        check(
            right,
            format!("{ns}/{name}, expected {by:?}: mutated by {mutated:?}, decision {decisions:?}"),
        )?;
    }
    println!(
        "    {} creates through a move to the canary and a rollback: each mutated by one configuration, the right one; the opted-out and the unserved pod sent to none",
        expected.len()
    );

    // Each release's controller has its own: the canary's caches exactly
    // the three pods it injected, all current.
    let canary_pods = expected
        .iter()
        .filter(|(_, _, by)| *by == By::Canary)
        .count() as u64;
    crate::harness::wait_for(
        "the canary's controller to count its sandboxes",
        std::time::Duration::from_secs(20),
        async || {
            let m = canary.controller_metrics()?;
            let cached = m.sum("sandbox_webhook_controller_cached_pods", &[]);
            let current = m.sum("sandbox_webhook_drift_pods", &[("state", "current")]);
            Ok((cached == canary_pods && current == canary_pods).then_some(()))
        },
    )
    .await?;
    // That escape is reported once, by the default release's controller.
    env.event(&other, "unserved", "SandboxNotInjected").await?;
    check(
        env.events(&other, "opted-out", "SandboxNotInjected")
            .await?
            .is_empty(),
        "no Event for the opted-out pod",
    )?;
    let stored = env.pods(&other).get("opted-in").await?;
    let diagnosis = env.diagnose(&stored, chrono::Utc::now())?;
    check(
        diagnosis["injection"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("another release's")),
        format!("the default controller leaves the canary's pod alone: {diagnosis}"),
    )?;
    println!(
        "    the canary's controller caches its {canary_pods} sandboxes, all current; the default's leaves them alone"
    );
    Ok(())
}

/// The sandboxes the scenario created, each with who must have injected
/// it, for the audit check.
struct Created<'a> {
    env: &'a Env,
    expected: Vec<(String, String, By)>,
}

impl Created<'_> {
    /// Creates sandbox `name` in `ns` with `annotations` (and label
    /// `<P>/rev`: `rev`, when given), checks the stored pod was injected by
    /// `by` (its record, its revision label, its installer's image), and
    /// notes it for the audit check.
    async fn sandbox(
        &mut self,
        ns: &str,
        name: &str,
        rev: Option<&str>,
        annotations: &Value,
        by: By,
    ) -> Result<()> {
        let mut pod = sandbox_pod(name, annotations, &json!({}))?;
        if let Some(rev) = rev {
            pod.metadata
                .labels
                .get_or_insert_default()
                .insert(format!("{P}/rev"), rev.to_owned());
        }
        let pods = self.env.pods(ns);
        let stored = admit(&pods, &pod).await?;
        let revision = record(&stored).map(|r| r["revision"].clone());
        let label = stored
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(&format!("{P}/rev")))
            .cloned();
        let image = installer_image(&stored);
        let right = match by {
            By::Default => {
                revision == Some(Value::Null)
                    && image.as_deref() != Some(CANARY_IMAGE)
                    && image.is_some()
            }
            By::Canary => {
                revision == Some(json!("canary"))
                    && label.as_deref() == Some("canary")
                    && image.as_deref() == Some(CANARY_IMAGE)
            }
            By::Nobody => revision.is_none() && init_names(&stored).is_empty(),
        };
        check(
            right,
            format!(
                "{ns}/{name}, expected {by:?}: record revision {revision:?}, label {label:?}, installer {image:?}"
            ),
        )?;
        self.expected.push((ns.to_owned(), name.to_owned(), by));
        Ok(())
    }
}

fn installer_image(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .init_containers
        .iter()
        .flatten()
        .find(|c| c.name == "execd-installer")?
        .image
        .clone()
}

/// The configurations whose webhook mutated the create, each once, from
/// the apiserver's `mutation.webhook.admission.k8s.io/round_<r>_index_<i>`
/// annotations.
fn mutating_configurations(
    annotations: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let mut found: Vec<String> = annotations
        .iter()
        .filter(|(k, _)| k.starts_with("mutation.webhook.admission.k8s.io/"))
        .filter_map(|(_, v)| serde_json::from_str::<Value>(v).ok())
        .filter(|v| v["mutated"] == true)
        .filter_map(|v| v["configuration"].as_str().map(str::to_owned))
        .collect();
    found.sort();
    found.dedup();
    found
}
