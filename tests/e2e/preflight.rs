//! The workload pre-flight against the real apiserver: a
//! `ValidatingWebhookConfiguration` with the chart's rules and matchCondition
//! calls `/validate`. Workloads whose template the pod webhook would deny
//! are refused at create and update with the pod webhook's message; valid
//! ones are stored unchanged; with the pre-flight down, everything is
//! admitted (`failurePolicy: Ignore`). The agent-sandbox Sandbox is applied
//! at `v1beta1` to a CRD that serves only that version, as agent-sandbox 1.0
//! does, so only a rule naming `v1beta1` sends it.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::Result;
use crate::env::{Env, SCOPE_LABEL, Scope, check};
use crate::processes::Webhook;
use common::cluster::wait_noting;
use common::pods::SandboxPod;
use common::processes::repo;
use common::workloads::{resource, template_path, workload, workload_at};
use common::{P, crds};

/// The kinds the scenarios apply (`apiVersion`, `kind`): a built-in of each
/// group the pod webhook's users meet first, and the two custom resources.
const APPLIED: [(&str, &str); 4] = [
    ("apps/v1", "Deployment"),
    ("batch/v1", "Job"),
    ("sandbox.opensandbox.io/v1alpha1", "BatchSandbox"),
    ("agents.x-k8s.io/v1beta1", "Sandbox"),
];

const REQUESTS: &str = "sandbox_webhook_admission_requests_total";

/// Each scenario's own webhook process (so that stopping it affects no
/// other scenario), with `expiry.maxTimeoutSeconds: 3600`, the CRDs, and
/// the scope's namespace.
async fn start<'e>(env: &'e Env, id: &str) -> Result<(Webhook, Scope<'e>)> {
    let webhook = env.own_webhook(id, Some("expiry: {maxTimeoutSeconds: 3600}\n"))?;
    crds::ensure(&env.client, &crds::batch_sandbox()).await?;
    crds::ensure(&env.client, &crds::sandbox_v1beta1()).await?;
    let scope = Scope::new(env, id);
    scope.namespace("", &[]).await?;
    Ok((webhook, scope))
}

/// contract: workload.judge, workload.denial, workload.webhook-configuration, workload.kinds
pub async fn workloads_with_denied_templates_are_refused(env: &Env, id: &str) -> Result<()> {
    let (webhook, scope) = start(env, id).await?;
    scope.register(&[env.entry(&webhook)]).await?;
    scope.wait_active(&scope.ns, true).await?;
    register_preflight(env, &scope, &webhook.url("/validate")).await?;
    wait_refusing(env, &scope).await?;

    // The pod webhook's own words for a pod of that template.
    let too_long = SandboxPod::new("too-long").annotation("timeout", "2h");
    let pod_message = match scope
        .pods()
        .create(&PostParams::default(), &too_long.pod())
        .await
    {
        Err(kube::Error::Api(e)) => denied_text(&e.message)?,
        other => return Err(format!("the pod webhook admitted the pod: {other:?}").into()),
    };
    check(
        pod_message == "Sandbox timeout 7200s exceeds configured maximum of 3600s.",
        format!("the pod webhook's message (got: {pod_message})"),
    )?;
    for (api_version, kind, _, created) in create_each(env, &scope.ns, "denied", &too_long).await {
        let path = template_path(kind);
        match created {
            Err(kube::Error::Api(e)) => {
                let text = denied_text(&e.message)?;
                check(
                    text == format!("{path}: {pod_message}") && e.code == 400,
                    format!(
                        "{kind} {api_version} refused with the pod webhook's message after {path} (got {}: {})",
                        e.code, e.message
                    ),
                )?;
            }
            other => {
                return Err(
                    format!("{kind} with a denied template was admitted: {other:?}").into(),
                );
            }
        }
    }

    // Valid templates are stored as sent; this leaves `valid-deployment`
    // for the update below.
    valid_templates_are_stored_as_sent(env, &scope).await?;

    // An UPDATE that makes the template one the pod webhook would deny.
    let deployments = api(env, &scope.ns, "apps/v1", "Deployment")?;
    let mut current = deployments.get("valid-deployment").await?;
    let template = current.data["spec"]["template"]["metadata"]["annotations"]
        .as_object_mut()
        .ok_or("the stored template has annotations")?;
    template.insert(format!("{P}/timeout"), json!("2h"));
    match deployments
        .replace("valid-deployment", &PostParams::default(), &current)
        .await
    {
        Err(kube::Error::Api(e)) => check(
            denied_text(&e.message)? == format!("spec.template: {pod_message}"),
            format!(
                "the update is refused with the same message (got: {})",
                e.message
            ),
        )?,
        other => {
            return Err(format!("an update to a denied template was admitted: {other:?}").into());
        }
    }

    // Without the sandbox label the template is nobody's business: the
    // chart's matchCondition keeps the apiserver from even calling.
    let judged = || -> Result<u64> {
        let labels = [("operation", "validate/CREATE")];
        Ok(webhook.metrics()?.sum(REQUESTS, &labels))
    };
    let before = judged()?;
    let plain = SandboxPod::new("plain")
        .not_a_sandbox()
        .annotation("timeout", "2h");
    create(
        env,
        &scope.ns,
        &workload("Deployment", "not-a-sandbox", &plain),
    )
    .await?;
    check(
        before > 0 && judged()? == before,
        format!("an unlabelled template is not sent to /validate ({before} before)"),
    )?;
    Ok(())
}

pub async fn workloads_are_admitted_while_the_preflight_is_down(env: &Env, id: &str) -> Result<()> {
    let (mut webhook, scope) = start(env, id).await?;
    register_preflight(env, &scope, &webhook.url("/validate")).await?;
    wait_refusing(env, &scope).await?;

    // Its port is closed now: the apiserver cannot reach the pre-flight.
    webhook.stop();
    let too_long = SandboxPod::new("too-long").annotation("timeout", "2h");
    for (api_version, kind, name, created) in
        create_each(env, &scope.ns, "while-down", &too_long).await
    {
        created.map_err(|e| {
            format!("{kind} was refused while the pre-flight was down (Ignore): {e}")
        })?;
        api(env, &scope.ns, api_version, kind)?.get(&name).await?;
    }
    Ok(())
}

/// Creates a workload `<prefix>-<kind>` of each applied kind with pod
/// template `template`: each one's API version, kind and name, and what
/// the apiserver answered.
async fn create_each(
    env: &Env,
    ns: &str,
    prefix: &str,
    template: &SandboxPod,
) -> Vec<(
    &'static str,
    &'static str,
    String,
    kube::Result<DynamicObject>,
)> {
    let mut answers = Vec::new();
    for (api_version, kind) in APPLIED {
        let name = format!("{prefix}-{}", kind.to_lowercase());
        let answer = create(env, ns, &workload_at(api_version, kind, &name, template)).await;
        answers.push((api_version, kind, name, answer));
    }
    answers
}

/// Creates a `valid-<kind>` of each applied kind with a template the pod
/// webhook allows; each is stored as sent: nothing is mutated.
async fn valid_templates_are_stored_as_sent(env: &Env, scope: &Scope<'_>) -> Result<()> {
    let valid = SandboxPod::new("fine").annotation("timeout", "30m");
    for (api_version, kind) in APPLIED {
        let name = format!("valid-{}", kind.to_lowercase());
        let sent = workload_at(api_version, kind, &name, &valid);
        create(env, &scope.ns, &sent).await?;
        let stored = api(env, &scope.ns, api_version, kind)?.get(&name).await?;
        let stored = serde_json::to_value(stored)?;
        let field = template_path(kind).trim_start_matches("spec.");
        let (sent_t, stored_t) = (&sent["spec"][field], &stored["spec"][field]);
        check(
            kept_labels(sent_t, stored_t)
                && stored_t["metadata"]["annotations"] == sent_t["metadata"]["annotations"]
                && stored_t["spec"]["containers"][0]["command"]
                    == sent_t["spec"]["containers"][0]["command"]
                && stored_t["spec"].get("initContainers").is_none(),
            format!("{kind}'s template is stored unchanged: {stored_t}"),
        )?;
        if kind.ends_with("Sandbox") {
            // No schema defaults on these CRDs: the whole spec is as sent.
            check(
                stored["spec"] == sent["spec"],
                format!("{kind} spec stored byte for byte"),
            )?;
        }
    }
    Ok(())
}

/// Every label of the sent template is on the stored one (the apiserver adds
/// its own to a Job's: `batch.kubernetes.io/job-name`, ...).
fn kept_labels(sent: &Value, stored: &Value) -> bool {
    let labels = |t: &Value| {
        t["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default()
    };
    let stored = labels(stored);
    labels(sent).iter().all(|(k, v)| stored.get(k) == Some(v))
}

/// The text after `denied the request: ` in an apiserver error message.
fn denied_text(message: &str) -> Result<String> {
    message
        .split_once("denied the request: ")
        .map(|(_, text)| text.to_owned())
        .ok_or_else(|| format!("not a webhook denial: {message}").into())
}

fn api(env: &Env, ns: &str, api_version: &str, kind: &str) -> Result<Api<DynamicObject>> {
    let plural =
        resource(api_version, kind).ok_or(format!("{kind} {api_version} is no workload kind"))?;
    let (group, version) = api_version.split_once('/').unwrap_or_default();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Ok(Api::namespaced_with(
        env.client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    ))
}

async fn create(env: &Env, ns: &str, object: &Value) -> kube::Result<DynamicObject> {
    create_with(env, ns, object, false).await
}

async fn create_with(
    env: &Env,
    ns: &str,
    object: &Value,
    dry_run: bool,
) -> kube::Result<DynamicObject> {
    let text = |field: &str| object[field].as_str().unwrap_or_default().to_owned();
    let api = api(env, ns, &text("apiVersion"), &text("kind"))
        .map_err(|e| kube::Error::Service(e.to_string().into()))?;
    let object: DynamicObject =
        serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
    let pp = PostParams {
        dry_run,
        ..PostParams::default()
    };
    api.create(&pp, &object).await
}

/// The text of the chart's validating webhook template from just after
/// `start` to just before the first `end` after it.
fn validating_between(start: &str, end: &str) -> Result<String> {
    let path = repo().join("charts/sandbox-webhook/templates/_validating.tpl");
    let text = std::fs::read_to_string(&path)?;
    let (_, rest) = text
        .split_once(start)
        .ok_or_else(|| format!("no {start:?} in {}", path.display()))?;
    let (between, _) = rest
        .split_once(end)
        .ok_or_else(|| format!("no {end:?} after {start:?} in {}", path.display()))?;
    Ok(between.to_owned())
}

/// The chart's matchCondition, read from the template, with the default
/// prefix: the expression the apiserver compiles is the one the chart ships
/// (up to the template's next action, the revision condition's).
fn chart_condition() -> Result<String> {
    let folded = validating_between("expression: >-", "{{-")?;
    let expression = folded.split_whitespace().collect::<Vec<_>>().join(" ");
    Ok(expression.replace("{{ $id | quote }}", &format!("\"{P}/id\"")))
}

/// The chart's rules, read from the template (plain YAML there): the kinds
/// and versions the apiserver sends are the ones the chart ships.
fn chart_rules() -> Result<Value> {
    let block = validating_between("\n    rules:\n", "\n    namespaceSelector:")?;
    let rules: Value = serde_yaml_ng::from_str(&block)?;
    let sandboxes = rules
        .as_array()
        .into_iter()
        .flatten()
        .any(|r| r["resources"] == json!(["sandboxes"]));
    check(
        sandboxes,
        format!("the chart's rules name sandboxes: {rules}"),
    )?;
    Ok(rules)
}

/// The scope's `ValidatingWebhookConfiguration`: the chart's rules and
/// matchCondition, `failurePolicy: Ignore`, this scope's namespaces only.
async fn register_preflight(env: &Env, scope: &Scope<'_>, url: &str) -> Result<()> {
    use base64::Engine;
    let rules = chart_rules()?;
    let name = format!("{}-validate", scope.configuration);
    let configuration: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {SCOPE_LABEL: scope.id}},
        "webhooks": [{
            "name": "workloads.sandbox-webhook.opensandbox.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "matchPolicy": "Equivalent",
            "timeoutSeconds": 5,
            "clientConfig": {
                "url": url,
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&env.ca),
            },
            "rules": rules,
            "namespaceSelector": {"matchLabels": {SCOPE_LABEL: scope.id}},
            "matchConditions": [{"name": "sandbox-template", "expression": chart_condition()?}],
        }],
    }))?;
    let api: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    let _ = api.delete(&name, &DeleteParams::default()).await;
    api.create(&PostParams::default(), &configuration).await?;
    Ok(())
}

/// The apiserver picks up webhook configurations asynchronously: wait until
/// a dry-run create of a Deployment with a denied template is refused.
async fn wait_refusing(env: &Env, scope: &Scope<'_>) -> Result<()> {
    let probe = workload(
        "Deployment",
        "probe",
        &SandboxPod::new("probe").annotation("timeout", "2h"),
    );
    wait_noting(
        "the pre-flight to refuse",
        Duration::from_secs(30),
        "the last answer",
        async |last: &mut String| {
            *last = match create_with(env, &scope.ns, &probe, true).await {
                Err(kube::Error::Api(e)) if e.message.contains("denied the request") => {
                    return Ok(Some(()));
                }
                Ok(_) => "the probe was admitted".to_owned(),
                Err(e) => e.to_string(),
            };
            Ok(None)
        },
    )
    .await
}
