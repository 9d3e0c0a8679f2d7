//! What the webhook decided, in the apiserver's own records: the audit
//! annotations of every answer in the audit log (contract:
//! audit.annotations, audit.log), and the chart's matchConditions, which
//! keep the apiserver from calling the webhook at all for the pods they
//! skip (contract: select.match-conditions).

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use serde_json::Value;

use crate::Result;
use crate::env::{Env, Scope, check, check_not_injected, init_names};
use common::P;
use common::audit;
use common::pods::{SandboxPod, container, env_value};
use common::processes::repo;

/// The chart's webhook name, under which the apiserver keys the
/// webhook's audit annotations.
const WEBHOOK: &str = "sandbox-webhook.opensandbox.io";
const ANSWERS: &str = "sandbox_webhook_admission_requests_total";
const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;

/// The scope's configuration, its webhook named as the chart names it,
/// with `conditions` as its matchConditions.
async fn registered<'e>(env: &'e Env, id: &str, conditions: Option<Value>) -> Result<Scope<'e>> {
    let scope = Scope::new(env, id);
    scope.namespace("", &[]).await?;
    let mut entry = env.main_entry();
    entry.name = WEBHOOK;
    let mut cfg = scope.configuration_named(&scope.configuration, &[entry]);
    if let Some(conditions) = conditions {
        for w in cfg.webhooks.iter_mut().flatten() {
            w.match_conditions = Some(serde_json::from_value(conditions.clone())?);
        }
    }
    scope.create_configuration(&cfg).await?;
    scope.wait_active(&scope.ns, true).await?;
    Ok(scope)
}

/// The webhook's audit annotations on the create of pod `name`.
async fn annotations(env: &Env, scope: &Scope<'_>, name: &str) -> Result<Vec<(String, String)>> {
    let event = audit::pod_create(&env.audit_log, &scope.ns, name).await?;
    Ok(event
        .under(WEBHOOK)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = list
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    out.sort();
    out
}

/// Admits sandbox `name` annotated `<P>/inject: <inject>`: whether its
/// audit event says the webhook skipped it as an opt-out.
async fn skipped_as_opt_out(
    env: &Env,
    scope: &Scope<'_>,
    name: &str,
    inject: &str,
) -> Result<bool> {
    scope
        .admit(&SandboxPod::new(name).annotation("inject", inject))
        .await?;
    Ok(annotations(env, scope, name).await?
        == pairs(&[
            ("decision", "skipped"),
            ("skip-reason", "opt-out"),
            ("sandbox-id", name),
        ]))
}

/// contract: audit.log, audit.annotations
///
/// A sandbox injected, one opted out and one denied: each create's audit
/// event carries the webhook's decision under its name; the injected one's
/// images and policy hash are those of its stored record.
pub async fn decisions_are_in_the_audit_log(env: &Env, id: &str) -> Result<()> {
    let scope = registered(env, id, None).await?;
    let injected = scope
        .admit(&SandboxPod::new("audited").annotation("network-policy", POLICY))
        .await?;
    let record: Value = serde_json::from_str(
        crate::env::annotation(&injected, &format!("{P}/injected")).ok_or("no record")?,
    )?;
    let rules = sidecar_rules(&injected).ok_or("no sidecar rules")?;
    check(
        record["policy"] == sandbox_webhook::config::short_sha256(rules.as_bytes()),
        format!("the record's policy is the sidecar's rules' hash: {record}"),
    )?;
    check(
        annotations(env, &scope, "audited").await?
            == pairs(&[
                ("decision", "mutated"),
                ("sandbox-id", "audited"),
                ("policy", record["policy"].as_str().unwrap_or_default()),
                ("images", &record["images"].to_string()),
            ]),
        "the injected sandbox's audit annotations",
    )?;

    check(
        skipped_as_opt_out(env, &scope, "opted", "false").await?,
        "the opted-out sandbox's audit annotations",
    )?;

    let denied = scope
        .pods()
        .create(
            &PostParams::default(),
            &SandboxPod::new("refused")
                .annotation("timeout", "soon")
                .pod(),
        )
        .await;
    check(denied.is_err(), "a malformed timeout is denied")?;
    let event = audit::pod_create(&env.audit_log, &scope.ns, "refused").await?;
    check(
        event.code == 400
            && event.under(WEBHOOK).get("decision") == Some(&"denied")
            && event.under(WEBHOOK).get("sandbox-id") == Some(&"refused"),
        format!("the denied sandbox's audit event: {event:?}"),
    )?;
    println!("    audit log: mutated (record's images and policy), skipped opt-out, denied 400");
    Ok(())
}

/// The sidecar's `OPENSANDBOX_EGRESS_RULES` in the stored pod.
fn sidecar_rules(pod: &Pod) -> Option<String> {
    env_value(container(pod, "egress")?, "OPENSANDBOX_EGRESS_RULES").map(str::to_owned)
}

/// The chart's matchConditions of the pod webhook, read from its template
/// with the default prefix: the CEL the apiserver compiles is the chart's.
fn chart_conditions() -> Result<Value> {
    let path = repo().join("charts/sandbox-webhook/templates/_mutating.tpl");
    let text = std::fs::read_to_string(&path)?;
    let (_, rest) = text
        .split_once("- name: not-opted-out\n        expression: >-")
        .ok_or("no not-opted-out condition in _mutating.tpl")?;
    let (folded, _) = rest.split_once("{{- end }}").ok_or("no end")?;
    let expression = folded
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(
            r#"{{ printf "%s/inject" $v.config.prefix | quote }}"#,
            &format!("\"{P}/inject\""),
        );
    check(
        !expression.contains("{{"),
        format!("the condition is plain CEL: {expression}"),
    )?;
    Ok(serde_json::json!([{"name": "not-opted-out", "expression": expression}]))
}

/// contract: select.match-conditions
///
/// With the chart's matchConditions, the apiserver does not call the
/// webhook for a pod that opts out (it counts no request, and the pod's
/// audit event has none of its annotations); a spelling the condition
/// leaves to the webhook, and any other sandbox, still reach it.
pub async fn opted_out_pods_are_not_sent(env: &Env, id: &str) -> Result<()> {
    let scope = registered(env, id, Some(chart_conditions()?)).await?;
    let answered = || -> Result<u64> { Ok(env.webhook.metrics()?.sum(ANSWERS, &[])) };
    let before = answered()?;
    for (name, value) in [("lower", "false"), ("title", "False"), ("upper", "FALSE")] {
        let stored = scope
            .admit(&SandboxPod::new(name).annotation("inject", value))
            .await?;
        check_not_injected(&stored, &format!("{name} is stored as written"))?;
        check(
            annotations(env, &scope, name).await?.is_empty(),
            format!("{name}: the webhook was not called"),
        )?;
    }
    check(
        answered()? == before,
        format!(
            "the webhook answered {} requests for pods the conditions skip",
            answered()? - before
        ),
    )?;
    // Blanks around it: the webhook reads it as an opt-out, the condition
    // leaves it to the webhook.
    check(
        skipped_as_opt_out(env, &scope, "blank", " false ").await?,
        "a spelling the conditions leave to the webhook reaches it",
    )?;
    let stored = scope.admit(&SandboxPod::new("sent")).await?;
    check(
        init_names(&stored).contains(&"execd-installer"),
        "a sandbox that does not opt out is injected",
    )?;
    check(
        answered()? == before + 2,
        "the webhook answered exactly the two pods sent",
    )?;
    println!("    opted-out pods (false, False, FALSE) not sent; ' false ' and a sandbox sent");
    Ok(())
}
