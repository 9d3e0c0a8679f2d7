//! The workload pre-flight (SPEC 11) against the real apiserver: a
//! `ValidatingWebhookConfiguration` with the chart's rules and matchCondition
//! calls `/validate`. Workloads whose template the pod webhook would deny
//! are refused at create and update with the pod webhook's message; valid
//! ones are stored unchanged; with the pre-flight down, everything is
//! admitted (`failurePolicy: Ignore`).

use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::Result;
use crate::common::P;
use crate::common::pods::SandboxPod;
use crate::common::processes::repo;
use crate::common::workloads::{KINDS, workload};
use crate::env::{Env, SCOPE_LABEL, Scope, check};
use crate::processes::Webhook;

/// The kinds the scenarios apply: a built-in of each group the pod webhook's
/// users meet first, and the OpenSandbox custom resource.
const APPLIED: [&str; 3] = ["Deployment", "Job", "BatchSandbox"];

const CRD: &str = "batchsandboxes.sandbox.opensandbox.io";
const REQUESTS: &str = "sandbox_webhook_admission_requests_total";

/// Each scenario's own webhook process (so that stopping it affects no
/// other scenario), with `expiry.maxTimeoutSeconds: 3600`, the `BatchSandbox`
/// CRD, and the scope's namespace.
async fn start<'e>(env: &'e Env, id: &str) -> Result<(Webhook, Scope<'e>)> {
    let webhook = env.own_webhook(id, Some("expiry: {maxTimeoutSeconds: 3600}\n"))?;
    ensure_crd(env).await?;
    let scope = Scope::new(env, id);
    scope.namespace("", &[]).await?;
    Ok((webhook, scope))
}

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
    for kind in APPLIED {
        let name = format!("denied-{}", kind.to_lowercase());
        match create(env, &scope.ns, &workload(kind, &name, &too_long)).await {
            Err(kube::Error::Api(e)) => {
                let text = denied_text(&e.message)?;
                check(
                    text == format!("spec.template: {pod_message}") && e.code == 400,
                    format!(
                        "{kind} refused with the pod webhook's message after spec.template (got {}: {})",
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
    let deployments = api(env, &scope.ns, "Deployment");
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
    for kind in APPLIED {
        let name = format!("while-down-{}", kind.to_lowercase());
        create(env, &scope.ns, &workload(kind, &name, &too_long))
            .await
            .map_err(|e| {
                format!("{kind} was refused while the pre-flight was down (Ignore): {e}")
            })?;
        api(env, &scope.ns, kind).get(&name).await?;
    }
    Ok(())
}

/// Creates a `valid-<kind>` of each applied kind with a template the pod
/// webhook allows; each is stored as sent: nothing is mutated.
async fn valid_templates_are_stored_as_sent(env: &Env, scope: &Scope<'_>) -> Result<()> {
    let valid = SandboxPod::new("fine").annotation("timeout", "30m");
    for kind in APPLIED {
        let name = format!("valid-{}", kind.to_lowercase());
        let sent = workload(kind, &name, &valid);
        create(env, &scope.ns, &sent).await?;
        let stored = serde_json::to_value(api(env, &scope.ns, kind).get(&name).await?)?;
        let (sent_t, stored_t) = (&sent["spec"]["template"], &stored["spec"]["template"]);
        check(
            kept_labels(sent_t, stored_t)
                && stored_t["metadata"]["annotations"] == sent_t["metadata"]["annotations"]
                && stored_t["spec"]["containers"][0]["command"]
                    == sent_t["spec"]["containers"][0]["command"]
                && stored_t["spec"].get("initContainers").is_none(),
            format!("{kind}'s template is stored unchanged: {stored_t}"),
        )?;
        if kind == "BatchSandbox" {
            // No schema defaults on this CRD: the whole spec is as sent.
            check(
                stored["spec"] == sent["spec"],
                "BatchSandbox spec stored byte for byte",
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

fn api(env: &Env, ns: &str, kind: &str) -> Api<DynamicObject> {
    let (_, api_version, plural) = KINDS
        .iter()
        .find(|(k, _, _)| *k == kind)
        .copied()
        .unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or_default();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Api::namespaced_with(
        env.client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
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
    let kind = object["kind"].as_str().unwrap_or_default();
    let object: DynamicObject =
        serde_json::from_value(object.clone()).map_err(kube::Error::SerdeError)?;
    let pp = PostParams {
        dry_run,
        ..PostParams::default()
    };
    api(env, ns, kind).create(&pp, &object).await
}

/// A minimal `BatchSandbox` CRD (no schema beyond "keep everything"), shared
/// by the scenarios and left in place: a CRD is cluster-wide, and deleting
/// one under another scenario's objects would break it.
async fn ensure_crd(env: &Env) -> Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD},
        "spec": {
            "group": "sandbox.opensandbox.io",
            "scope": "Namespaced",
            "names": {"plural": "batchsandboxes", "singular": "batchsandbox", "kind": "BatchSandbox",
                      "listKind": "BatchSandboxList"},
            "versions": [{
                "name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))?;
    match crds.create(&PostParams::default(), &crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let established = crds
            .get(CRD)
            .await?
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if established {
            return Ok(());
        }
        check(
            Instant::now() < deadline,
            "the BatchSandbox CRD is established within 30s",
        )?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The chart's matchCondition, read from the template, with the default
/// prefix: the expression the apiserver compiles is the one the chart ships.
fn chart_condition() -> Result<String> {
    let path = repo().join("charts/sandbox-webhook/templates/_validating.tpl");
    let text = std::fs::read_to_string(&path)?;
    let (_, rest) = text
        .split_once("expression: >-")
        .ok_or("no expression in the chart")?;
    let (folded, _) = rest
        .split_once("{{- end }}")
        .ok_or("no end of the expression")?;
    let expression = folded.split_whitespace().collect::<Vec<_>>().join(" ");
    Ok(expression.replace("{{ $id | quote }}", &format!("\"{P}/id\"")))
}

/// The scope's `ValidatingWebhookConfiguration`: the chart's rules and
/// matchCondition, `failurePolicy: Ignore`, this scope's namespaces only.
async fn register_preflight(env: &Env, scope: &Scope<'_>, url: &str) -> Result<()> {
    use base64::Engine;
    let rules: Vec<Value> = [
        (
            "apps",
            "v1",
            vec!["deployments", "statefulsets", "daemonsets", "replicasets"],
        ),
        ("batch", "v1", vec!["jobs", "cronjobs"]),
        ("sandbox.opensandbox.io", "v1alpha1", vec!["batchsandboxes"]),
        ("agents.x-k8s.io", "v1alpha1", vec!["sandboxes"]),
    ]
    .into_iter()
    .map(|(group, version, resources)| {
        json!({"operations": ["CREATE", "UPDATE"], "apiGroups": [group], "apiVersions": [version],
               "resources": resources, "scope": "Namespaced"})
    })
    .collect();
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
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let last = match create_with(env, &scope.ns, &probe, true).await {
            Err(kube::Error::Api(e)) if e.message.contains("denied the request") => return Ok(()),
            Ok(_) => "the probe was admitted".to_owned(),
            Err(e) => e.to_string(),
        };
        check(
            Instant::now() < deadline,
            format!("the pre-flight did not refuse within 30s: {last}"),
        )?;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
