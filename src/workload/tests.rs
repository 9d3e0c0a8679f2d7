use chrono::{TimeZone, Utc};
use serde_json::{Value, json};

use super::*;
use crate::config::Config;
use crate::mutate::{self, Context, Decision, Denial, FixedToken, SkipReason};

const ID: &str = "opensandbox.io/id";

fn with_ctx<T>(config: &Config, f: impl FnOnce(&Context<'_>) -> T) -> T {
    let tokens = FixedToken("t".into());
    let ctx = Context {
        config,
        now: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
        own_namespace: Some("sandbox-webhook"),
        tokens: &tokens,
    };
    f(&ctx)
}

fn template(annotations: &Value) -> Value {
    json!({
        "metadata": {"labels": {ID: "s1"}, "annotations": annotations},
        "spec": {"containers": [{"name": "sandbox", "image": "busybox", "command": ["sleep", "1d"]}]}
    })
}

/// An object of `kind` with `template` at that kind's path.
fn workload(kind: &WorkloadKind, template: Value) -> Value {
    let mut object = template;
    for field in kind.fields.iter().rev() {
        object = json!({ *field: object });
    }
    object["apiVersion"] = format!("{}/{}", kind.group, kind.version).into();
    object["kind"] = kind.kind.into();
    object["metadata"] = json!({"name": "w", "namespace": "team"});
    object
}

fn kind(name: &str) -> &'static WorkloadKind {
    KINDS.iter().find(|k| k.kind == name).unwrap()
}

fn max_3600() -> Config {
    let mut config = Config::default();
    config.expiry.max_timeout_seconds = Some(3600);
    config
}

/// contract: workload.kinds
#[test]
fn every_kind_finds_its_template_at_its_path() {
    // kind, apiVersion, path of the template: the contract's table
    // (workload.kinds).
    let expected = "\
        Deployment apps/v1 spec.template
        StatefulSet apps/v1 spec.template
        DaemonSet apps/v1 spec.template
        ReplicaSet apps/v1 spec.template
        Job batch/v1 spec.template
        CronJob batch/v1 spec.jobTemplate.spec.template
        BatchSandbox sandbox.opensandbox.io/v1alpha1 spec.template
        Sandbox agents.x-k8s.io/v1alpha1 spec.podTemplate
        Sandbox agents.x-k8s.io/v1beta1 spec.podTemplate";
    let expected: Vec<Vec<&str>> = expected
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(KINDS.len(), expected.len());
    for (k, row) in KINDS.iter().zip(&expected) {
        let [name, api_version, path] = row[..] else {
            panic!("bad row {row:?}")
        };
        assert_eq!((k.kind, k.path), (name, path));
        assert_eq!(k.fields.join("."), k.path, "{name}");
        assert_eq!(format!("{}/{}", k.group, k.version), api_version);
        assert_eq!(WorkloadKind::of(api_version, name), Some(k));
        let t = template(&json!({}));
        let mut object = workload(k, t.clone());
        let found = find_template(&object).unwrap().unwrap();
        assert_eq!(found.value, &t, "{name}");
        assert_eq!(found.path(), path);
        let pointer = format!("/{}", k.fields.join("/"));
        assert_eq!(object.pointer(&pointer), Some(&t), "{name}");
        k.template_mut(&mut object).unwrap()["x"] = true.into();
        assert_eq!(object.pointer(&format!("{pointer}/x")), Some(&json!(true)));
    }
}

#[test]
fn other_objects_have_no_template() {
    let t = template(&json!({}));
    for (api_version, kind) in [
        ("v1", "Pod"),
        ("v1", "Service"),
        ("apps/v1beta2", "Deployment"),
        ("sandbox.opensandbox.io/v1", "BatchSandbox"),
        ("apps/v1", "deployment"),
    ] {
        let object = json!({"apiVersion": api_version, "kind": kind, "spec": {"template": t}});
        assert!(
            find_template(&object).unwrap().is_none(),
            "{api_version} {kind}"
        );
        let verdict = with_ctx(&Config::default(), |ctx| {
            judge_change(&object, None, None, ctx)
        });
        assert!(
            matches!(verdict, Verdict::NotJudged(SkipReason::NotAWorkload)),
            "{api_version} {kind}: {verdict:?}"
        );
    }
    // A Sandbox at a version the table does not know, its template where
    // the known ones keep it: not judged (its template may be elsewhere).
    let future = json!({"apiVersion": "agents.x-k8s.io/v1", "kind": "Sandbox",
        "spec": {"podTemplate": t}});
    assert!(find_template(&future).unwrap().is_none());
    assert!(find_template(&json!("not an object")).unwrap().is_none());
    let without = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}});
    assert!(find_template(&without).unwrap().is_none());
    let broken = json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "spec": {"jobTemplate": {"spec": {"template": []}}}});
    let err = find_template(&broken).unwrap_err();
    assert_eq!(
        err.to_string(),
        "CronJob spec.jobTemplate.spec.template is not an object"
    );
}

/// contract: workload.skips
#[test]
fn a_template_without_the_label_is_not_judged() {
    // Malformed for the pod webhook (no containers, bad timeout), but
    // unlabelled: the pod webhook would never read its pods either.
    let unlabelled = json!({
        "metadata": {"annotations": {"opensandbox.io/timeout": "soon"}},
        "spec": {"containers": "none"}
    });
    let labelled_elsewhere = json!({
        "metadata": {"labels": {"opensandbox.io/other": "x"}},
        "spec": {}
    });
    for t in [unlabelled, labelled_elsewhere, json!({})] {
        let object = workload(kind("Deployment"), t);
        let verdict = with_ctx(&max_3600(), |ctx| judge_change(&object, None, None, ctx));
        assert!(
            matches!(verdict, Verdict::NotJudged(SkipReason::NotASandbox)),
            "{verdict:?}"
        );
    }
}

/// contract: workload.judge, workload.denial
#[test]
fn a_denied_template_gets_the_pod_message_after_its_path() {
    let config = max_3600();
    let t = template(&json!({"opensandbox.io/timeout": "2h"}));
    for k in &KINDS {
        let object = workload(k, t.clone());
        let before = object.clone();
        let verdict = with_ctx(&config, |ctx| judge_change(&object, None, None, ctx));
        let Verdict::Denied(denial) = verdict else {
            panic!("{}: {verdict:?}", k.kind);
        };
        assert_eq!(
            denial.to_string(),
            format!(
                "{}: Sandbox timeout 7200s exceeds configured maximum of 3600s.",
                k.path
            )
        );
        assert_eq!(denial.code(), 400);
        assert_eq!(denial.reason(), "BadRequest");
        assert_eq!(object, before, "nothing is mutated");
    }
    // Without the maximum, the same template is admitted.
    let object = workload(kind("Job"), t);
    let verdict = with_ctx(&Config::default(), |ctx| {
        judge_change(&object, None, None, ctx)
    });
    assert!(
        matches!(&verdict, Verdict::Allowed { warnings } if warnings.is_empty()),
        "{verdict:?}"
    );
}

/// The message and code are the pod webhook's own, whatever the denial.
#[test]
fn every_denial_is_the_pod_webhooks() {
    let policy = r#"{"defaultAction":"deny"}"#;
    let cases = [
        template(&json!({"opensandbox.io/network-policy": "{"})),
        template(&json!({"opensandbox.io/platform": "plan9/amd64"})),
        json!({"metadata": {"labels": {ID: "s"}}, "spec": {"containers": []}}),
        json!({"metadata": {"labels": {ID: "s"}, "annotations": {"opensandbox.io/network-policy": policy}},
            "spec": {"hostNetwork": true, "containers": [{"name": "a", "command": ["x"]}]}}),
        json!({"metadata": {"labels": {ID: "s"}}, "spec": {"containers": [{"name": "a", "env": 3}]}}),
    ];
    let config = Config::default();
    for t in cases {
        let object = workload(kind("BatchSandbox"), t.clone());
        let (verdict, pod) = with_ctx(&config, |ctx| {
            let pod = mutate::decide(&template_pod(&t).to_string(), Some("team"), ctx);
            (judge_change(&object, None, None, ctx), pod)
        });
        let (Verdict::Denied(got), Decision::Deny(want)) = (verdict, pod) else {
            panic!("{t}: both must deny");
        };
        assert_eq!(got.to_string(), format!("spec.template: {want}"));
        assert_eq!(got.code(), want.code(), "{want}");
        assert!(matches!(got, Denial::InTemplate { .. }));
    }
}

/// contract: workload.warnings
#[test]
fn an_admitted_template_keeps_its_warnings_under_its_path() {
    let t = template(&json!({"opensandbox.io/platform": "windows/amd64"}));
    let object = workload(kind("CronJob"), t);
    let verdict = with_ctx(&Config::default(), |ctx| {
        judge_change(&object, None, None, ctx)
    });
    let Verdict::Allowed { warnings } = verdict else {
        panic!("{verdict:?}");
    };
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].starts_with("spec.jobTemplate.spec.template: platform is windows"),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].chars().count() <= 120);
}

#[test]
fn namespace_and_opt_out_are_read_as_for_pods() {
    let config = Config::default();
    let t = template(&json!({"opensandbox.io/timeout": "10s"}));
    let object = workload(kind("Deployment"), t);
    with_ctx(&config, |ctx| {
        // The request's namespace wins; else the object's own.
        for ns in [Some("kube-system"), Some("sandbox-webhook")] {
            let v = judge_change(&object, None, ns, ctx);
            assert!(matches!(
                v,
                Verdict::NotJudged(SkipReason::ExcludedNamespace)
            ));
        }
        assert!(matches!(
            judge_change(&object, None, Some(""), ctx),
            Verdict::Denied(_)
        ));
        let mut system = object.clone();
        system["metadata"]["namespace"] = "kube-public".into();
        assert!(matches!(
            judge_change(&system, None, None, ctx),
            Verdict::NotJudged(SkipReason::ExcludedNamespace)
        ));
        let mut opted_out = object.clone();
        opted_out["spec"]["template"]["metadata"]["annotations"]["opensandbox.io/inject"] =
            "false".into();
        assert!(matches!(
            judge_change(&opted_out, None, None, ctx),
            Verdict::NotJudged(SkipReason::OptOut)
        ));
    });
}

#[test]
fn an_update_judges_only_a_changed_template() {
    let config = max_3600();
    let bad = workload(
        kind("Deployment"),
        template(&json!({"opensandbox.io/timeout": "2h"})),
    );
    let mut relabelled = bad.clone();
    relabelled["metadata"]["labels"] = json!({"team": "a"});
    let mut changed = bad.clone();
    changed["spec"]["template"]["metadata"]["annotations"]["opensandbox.io/timeout"] = "3h".into();
    let good = workload(kind("Deployment"), template(&json!({})));
    with_ctx(&config, |ctx| {
        assert!(matches!(
            judge_change(&relabelled, Some(&bad), None, ctx),
            Verdict::NotJudged(SkipReason::TemplateUnchanged)
        ));
        for old in [&good, &changed, &json!({})] {
            let v = judge_change(&bad, Some(old), None, ctx);
            assert!(matches!(v, Verdict::Denied(_)), "{v:?}");
        }
        // Another kind with the same template is no previous version.
        let mut job = bad.clone();
        job["apiVersion"] = "batch/v1".into();
        job["kind"] = "Job".into();
        assert!(matches!(
            judge_change(&bad, Some(&job), None, ctx),
            Verdict::Denied(_)
        ));
    });
}

#[test]
fn the_template_pod_is_metadata_and_spec() {
    let t = json!({"metadata": {"labels": {ID: "x"}}, "spec": {"containers": []}, "extra": 1});
    assert_eq!(
        template_pod(&t),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"labels": {ID: "x"}}, "spec": {"containers": []}})
    );
    assert_eq!(
        template_pod(&json!({})),
        json!({"apiVersion": "v1", "kind": "Pod"})
    );
}

#[test]
fn other_versions_name_the_known_ones_of_a_known_kind() {
    let versions = |api_version, kind| -> Vec<&str> {
        WorkloadKind::other_versions(api_version, kind)
            .iter()
            .map(|k| k.version)
            .collect()
    };
    assert_eq!(
        versions("agents.x-k8s.io/v1", "Sandbox"),
        ["v1alpha1", "v1beta1"]
    );
    assert_eq!(versions("apps/v1beta2", "Deployment"), ["v1"]);
    assert_eq!(
        versions("sandbox.opensandbox.io/v1", "BatchSandbox"),
        ["v1alpha1"]
    );
    for (api_version, kind) in [
        ("agents.x-k8s.io/v1alpha1", "Sandbox"),
        ("agents.x-k8s.io/v1beta1", "Sandbox"),
        ("apps/v1", "Deployment"),
        ("agents.x-k8s.io/v1", "SandboxClaim"),
        ("extensions/v1beta1", "Deployment"),
        ("v1", "Pod"),
        ("", "Sandbox"),
        ("Sandbox", ""),
    ] {
        assert!(
            versions(api_version, kind).is_empty(),
            "{api_version} {kind}"
        );
    }
}

/// agent-sandbox 1.0 serves only v1beta1: its Sandboxes are judged as the
/// v1alpha1 ones were, on CREATE and on a changed template at UPDATE.
#[test]
fn a_v1beta1_sandbox_is_judged_at_spec_pod_template() {
    let config = max_3600();
    let beta = WorkloadKind::of("agents.x-k8s.io/v1beta1", "Sandbox").unwrap();
    let bad = workload(beta, template(&json!({"opensandbox.io/timeout": "2h"})));
    let good = workload(beta, template(&json!({"opensandbox.io/timeout": "30m"})));
    with_ctx(&config, |ctx| {
        let Verdict::Denied(denial) = judge_change(&bad, None, Some("team"), ctx) else {
            panic!("a v1beta1 Sandbox with a denied template is denied");
        };
        assert_eq!(
            denial.to_string(),
            "spec.podTemplate: Sandbox timeout 7200s exceeds configured maximum of 3600s."
        );
        assert!(matches!(
            judge_change(&good, None, Some("team"), ctx),
            Verdict::Allowed { .. }
        ));
        assert!(matches!(
            judge_change(&bad, Some(&good), Some("team"), ctx),
            Verdict::Denied(_)
        ));
        assert!(matches!(
            judge_change(&bad, Some(&bad), Some("team"), ctx),
            Verdict::NotJudged(SkipReason::TemplateUnchanged)
        ));
    });
}

/// The chart's `ValidatingWebhookConfiguration` sends every kind of the
/// table, at each version whose template path the table knows.
/// contract: workload.kinds, workload.webhook-configuration
#[test]
fn the_chart_sends_every_kind() {
    const TEMPLATE: &str = "charts/sandbox-webhook/templates/_validating.tpl";
    let chart = include_str!("../../charts/sandbox-webhook/templates/_validating.tpl");
    let rules: Vec<&str> = chart
        .split("- operations: [\"CREATE\", \"UPDATE\"]")
        .skip(1)
        .collect();
    assert_eq!(rules.len(), 4, "{TEMPLATE}: not 4 rules:\n{chart}");
    for k in &KINDS {
        let sent = rules.iter().any(|rule| {
            let rule = rule.split("\n\n").next().unwrap_or_default();
            rule.contains(&format!("apiGroups: [\"{}\"]", k.group))
                && rule
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("apiVersions: "))
                    .is_some_and(|v| v.contains(&format!("\"{}\"", k.version)))
                && rule.contains(&format!("\"{}\"", k.resource))
        });
        assert!(
            sent,
            "{TEMPLATE}: {} ({}/{} {}) is not in the rules; add it where the kinds of src/workload/kinds.rs are",
            k.kind, k.group, k.version, k.resource
        );
    }
}
