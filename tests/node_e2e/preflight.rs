//! contract: workload.denial, workload.no-patch, workload.kinds
//!
//! Scenario f: the workload pre-flight (the chart's
//! `ValidatingWebhookConfiguration`) with agent-sandbox's real CRD installed:
//! its structural schema (pruning, defaults) and its CEL rules run at the
//! apiserver around the pre-flight. A Sandbox whose pod template the pod
//! webhook would deny is refused when it is applied, with the webhook's
//! sentence after `spec.podTemplate`; nothing is stored and agent-sandbox
//! never sees it. One that would be admitted is stored as it was written
//! (the pre-flight never patches), with the CRD's defaults.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use serde_json::{Value, json};

use crate::agent::{REPORT, api, create, pod_template, ready_pod};
use crate::harness::{Env, P, Result, check};

/// A Sandbox `name` whose pod template (returned first) runs on the node,
/// annotated `<P>/timeout: <timeout>`.
fn sandbox_with_timeout(env: &Env, name: &str, timeout: &str) -> Result<(Value, Value)> {
    let labels = json!({format!("{P}/id"): name});
    let annotations = json!({format!("{P}/timeout"): timeout});
    let template = pod_template(env, &labels, &annotations, REPORT)?;
    let sandbox = json!({"metadata": {"name": name}, "spec": {"podTemplate": template}});
    Ok((template, sandbox))
}

pub(crate) async fn stack_preflight_refuses_a_denied_sandbox(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[]).await?;
    // The CRD is agent-sandbox's own: v1beta1 only, with its CEL rule.
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let crd = crds.get("sandboxes.agents.x-k8s.io").await?;
    let versions: Vec<&str> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
    let rules = serde_json::to_string(&crd.spec.versions[0].schema)?;
    check(
        versions == ["v1beta1"] && rules.contains("volumeClaimTemplates is immutable"),
        format!("the Sandbox CRD is not agent-sandbox 1.0's: versions {versions:?}"),
    )?;

    let (_, sandbox) = sandbox_with_timeout(env, "refused", "30s")?;
    let refused = create(env, &ns, "Sandbox", sandbox).await;
    let message = match refused {
        Err(e) => e.to_string(),
        Ok(_) => return Err("a Sandbox whose template the webhook denies was stored".into()),
    };
    let sentence = format!(
        "spec.podTemplate: annotation {P}/timeout is 30s, below the minimum sandbox timeout of 60s; set it to 60 or more."
    );
    check(
        message.contains(&sentence),
        format!("the refusal says {message:?}, not {sentence:?}"),
    )?;
    let sandboxes = api(env, &ns, "Sandbox");
    check(
        sandboxes.get_opt("refused").await?.is_none(),
        "the refused Sandbox exists",
    )?;
    check(
        env.pods(&ns).get_opt("refused").await?.is_none(),
        "a pod of the refused Sandbox exists",
    )?;

    let (template, sandbox) = sandbox_with_timeout(env, "admitted", "1h")?;
    let stored = create(env, &ns, "Sandbox", sandbox).await?;
    check(
        stored.data["spec"]["podTemplate"] == template,
        format!(
            "the stored template differs from the one applied: {}",
            stored.data["spec"]["podTemplate"]
        ),
    )?;
    check(
        stored.data["spec"]["shutdownPolicy"] == "Retain"
            && stored.data["spec"]["operatingMode"] == "Running",
        format!("the CRD's defaults are not there: {}", stored.data["spec"]),
    )?;
    // And it runs, its pod injected by the pod webhook.
    let p = ready_pod(env, &ns, "admitted", Duration::from_secs(90)).await?;
    crate::agent::check_injected(&p, "admitted", false)?;
    println!(
        "    refused at apply time: {sentence:?}; a valid Sandbox stored as written (CRD defaults added), its pod injected and Running"
    );
    Ok(())
}
