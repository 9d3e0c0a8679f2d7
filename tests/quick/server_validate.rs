//! `POST /validate`, in-process (`common::inprocess`): the same router,
//! errors and metrics as `/mutate`, allowed or denied, never a patch. (The
//! sockets, TLS and limits in front of the router are `/mutate`'s tests'.)

use common::clock::now;
use common::inprocess::InProcess;
use common::pods::SandboxPod;
use common::workloads::{workload, workload_review};
use sandbox_webhook::config::Config;
use sandbox_webhook::mutate::{Context, FixedToken};
use serde_json::{Value, json};

const REQUESTS: &str = "sandbox_webhook_admission_requests_total";

async fn review(app: &InProcess, path: &str, body: &[u8]) -> (Vec<u8>, Value) {
    let response = app.post_review(path, body.to_vec()).await;
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    assert_eq!(response.header("content-type"), Some("application/json"));
    let answer = serde_json::from_slice(&response.body).expect("JSON");
    (response.body, answer)
}

/// The answer of `/validate` to a review of `object` (`old` for an UPDATE).
async fn validate(
    app: &InProcess,
    uid: &str,
    operation: &str,
    object: &Value,
    old: Option<&Value>,
) -> Value {
    let body = workload_review(uid, operation, object, old);
    review(app, "/validate", &body).await.1
}

/// The status message of a review's answer ("" when there is none).
fn message(answer: &Value) -> &str {
    answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default()
}

/// Sandbox pods that ask for more or less than the configured maximum
/// timeout (one hour).
fn too_long() -> SandboxPod {
    SandboxPod::new("s1").annotation("timeout", "2h")
}

fn within_limit() -> SandboxPod {
    SandboxPod::new("s2").annotation("timeout", "30m")
}

/// A workload whose template the pod webhook would deny is denied with the
/// pod's sentence at the template's path, HTTP 200 and no patch; a valid one
/// is allowed; the errors and the metrics are `/mutate`'s.
/// contract: http.endpoints, workload.judge, workload.denial, workload.no-patch,
/// metrics.admissions
#[tokio::test]
async fn validate_denies_a_template_the_pod_webhook_would_deny() {
    let yaml = "expiry: {maxTimeoutSeconds: 3600}\n";
    let (app, config_path) = InProcess::with_config(yaml).await;

    let deployment = workload("Deployment", "web", &too_long());
    let body = workload_review("uid-deny", "CREATE", &deployment, None);
    let (served, answer) = review(&app, "/validate", &body).await;
    let response = &answer["response"];
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(response["uid"], "uid-deny");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 400);
    assert_eq!(
        response["status"]["message"],
        "spec.template: Sandbox timeout 7200s exceeds configured maximum of 3600s."
    );
    assert!(response.get("patch").is_none() && response.get("patchType").is_none());

    // Byte for byte what the pure function answers.
    let config = Config::load(&config_path).unwrap();
    let tokens = FixedToken("unused".into());
    let ctx = Context {
        config: &config,
        now: now(),
        own_namespace: None,
        tokens: &tokens,
    };
    let direct = sandbox_webhook::review::validate(&body, &ctx).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&served),
        String::from_utf8_lossy(&direct.body)
    );

    // A valid Job is allowed, with no patch; a CronJob's path is its own.
    let job = workload("Job", "batch", &within_limit());
    let answer = validate(&app, "uid-ok", "CREATE", &job, None).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    assert!(answer["response"].get("patch").is_none(), "{answer}");
    let cron = workload("CronJob", "nightly", &too_long());
    let answer = validate(&app, "uid-cron", "UPDATE", &cron, Some(&job)).await;
    let denied = "spec.jobTemplate.spec.template: Sandbox timeout";
    assert!(message(&answer).starts_with(denied), "{answer}");

    // /mutate leaves workloads alone: the two paths are two webhooks.
    let (_, answer) = review(&app, "/mutate", &body).await;
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    assert!(answer["response"].get("patch").is_none(), "{answer}");

    // The same HTTP errors as /mutate.
    let wrong_type = app.post("/validate", "text/plain", body.clone()).await;
    assert_eq!(wrong_type.status, 415);
    let get = app.request("GET", "/validate", &[], Vec::new()).await;
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST"));

    // One set of metrics; the operation label tells the paths apart.
    let metrics = app.metrics();
    for (operation, outcome, n) in [
        ("validate/CREATE", "denied", 1),
        ("validate/CREATE", "allowed", 1),
        ("validate/UPDATE", "denied", 1),
        ("validate/unknown", "error", 1),
        ("CREATE", "skipped", 1),
    ] {
        let labels = [("operation", operation), ("outcome", outcome)];
        assert_eq!(
            metrics.value_or_zero(REQUESTS, &labels),
            n,
            "{operation} {outcome}"
        );
    }
    assert_eq!(metrics.sum(REQUESTS, &[("outcome", "mutated")]), 0);
}

/// contract: workload.skips
#[tokio::test]
async fn validate_skips_what_it_does_not_judge() {
    let app = InProcess::start(|_| {}).await;
    let pod = SandboxPod::new("p").json();
    let service =
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}});
    let unlabelled = workload("BatchSandbox", "b", &SandboxPod::new("x").not_a_sandbox());
    let plan9 = SandboxPod::new("y").annotation("platform", "plan9/amd64");
    let labelled = workload("Sandbox", "a", &plan9);
    // uid, operation, object, old object, and the reason it is skipped.
    let cases = [
        ("u1", "CREATE", &pod, None, "not-a-workload"),
        ("u2", "CREATE", &service, None, "not-a-workload"),
        ("u3", "DELETE", &labelled, None, "not-a-workload"),
        ("u4", "CREATE", &unlabelled, None, "not-a-sandbox"),
        (
            "u5",
            "UPDATE",
            &labelled,
            Some(&labelled),
            "template-unchanged",
        ),
    ];
    for (uid, operation, object, old, _) in cases {
        let body = workload_review(uid, operation, object, old);
        let (_, answer) = review(&app, "/validate", &body).await;
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
    let metrics = app.metrics();
    for reason in ["not-a-workload", "not-a-sandbox", "template-unchanged"] {
        let n = cases.iter().filter(|case| case.4 == reason).count() as u64;
        let got = metrics.value(
            "sandbox_webhook_admission_skips_total",
            &[("reason", reason)],
        );
        assert_eq!(got, n, "{reason}");
    }
    // And the labelled Sandbox, created, is judged.
    let answer = validate(&app, "u6", "CREATE", &labelled, None).await;
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let denied = "spec.podTemplate: Unsupported platform.os 'plan9'";
    assert!(message(&answer).starts_with(denied), "{answer}");
}
