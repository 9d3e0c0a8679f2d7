//! What every scenario of the whole-cluster suite gets: a client, the
//! processes `cluster.sh up` started (read from its `cluster.env`), and
//! helpers to wait on what the cluster's own controllers do.

use std::collections::HashMap;
use std::ops::Deref;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::Api;
use serde_json::{Value, json};

pub use common::P;
pub use common::cluster::wait_for;
use common::cluster::{ScenarioNamespaces, run};
use common::cluster_env::ClusterEnv;
use common::metrics::Metrics;
pub use common::pods::{
    annotation, check_not_injected, has_env, init_names, mounts_at, token_volumes, volumes_named,
};
use common::pods::{check_no_token, injected_main};
pub use common::processes::{Cluster, Result, bin_path, check, check_at, repo};
use common::wire;

/// The cluster of `cluster.sh up` (its `cluster.env`), scenario
/// namespaces `e2e-cl-<id>`.
pub struct Env(ClusterEnv);

impl Deref for Env {
    type Target = ClusterEnv;

    fn deref(&self) -> &ClusterEnv {
        &self.0
    }
}

pub async fn setup(work: &Path, cluster: &Cluster) -> Result<Env> {
    Ok(Env(ClusterEnv::new(work, cluster, NAMESPACES).await?))
}

impl Env {
    pub fn webhook_metrics(&self) -> Result<Metrics> {
        metrics(self.var("WEBHOOK_ADMIN")?)
    }

    pub fn controller_metrics(&self) -> Result<Metrics> {
        metrics(self.var("CONTROLLER_ADMIN")?)
    }

    /// Runs the cluster's kubectl with `args`, `stdin` piped in; its stdout.
    pub fn kubectl(&self, args: &[&str], stdin: &str) -> Result<String> {
        run(
            Command::new(self.var("KUBECTL")?)
                .arg(format!("--kubeconfig={}", self.var("KUBECONFIG")?))
                .args(args),
            stdin,
        )
    }

    /// `helm template` of the repository's chart with `args`; the YAML.
    pub fn helm_template(&self, release: &str, args: &[&str]) -> Result<String> {
        let chart = repo().join("charts/sandbox-webhook");
        run(
            Command::new(self.var("HELM")?)
                .args(["template", release])
                .arg(chart)
                .args(args),
            "",
        )
    }

    /// `sandbox-webhook diagnose` on `pod` (as stored), with the
    /// controller's configuration file, at `now`.
    pub fn diagnose(&self, pod: &Pod, now: DateTime<Utc>) -> Result<Value> {
        let file = self.work.join(format!(
            "diagnose-{}.json",
            pod.metadata.name.as_deref().unwrap_or("pod")
        ));
        std::fs::write(&file, serde_json::to_vec(pod)?)?;
        let out = run(
            Command::new(bin_path())
                .args(["diagnose", "-f"])
                .arg(&file)
                .args(["--now", &rfc3339(now)])
                .args(["--namespace", self.var("RELEASE_NAMESPACE")?])
                .args(["--config", self.var("CONTROLLER_CONFIG")?]),
            "",
        )?;
        Ok(serde_json::from_str(&out)?)
    }

    /// Events in `ns` about object `name` with `reason`.
    pub async fn events(&self, ns: &str, name: &str, reason: &str) -> Result<Vec<Event>> {
        common::cluster::events_about(&self.client, ns, name, reason).await
    }

    /// The one Event about `name` with `reason`, waiting up to 10 s for it.
    pub async fn event(&self, ns: &str, name: &str, reason: &str) -> Result<Event> {
        common::cluster::the_event(&self.client, ns, name, reason, Duration::from_secs(10)).await
    }
}

/// Deleting one waits for the namespace controller removes what is in one, kwok the pods.
const NAMESPACES: ScenarioNamespaces = ScenarioNamespaces {
    prefix: "e2e-cl",
    cleanup: Duration::from_secs(90),
};

fn metrics(admin: &str) -> Result<Metrics> {
    let (code, body) = wire::get(admin, "/metrics")?;
    check(code == 200, format!("{admin}/metrics answered {code}"))?;
    Ok(Metrics::parse(&body))
}

/// RFC 3339, whole seconds, UTC: what the webhook writes.
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A whole second at least `secs` seconds from now.
pub fn in_seconds(secs: i64) -> DateTime<Utc> {
    let t = Utc::now() + chrono::TimeDelta::seconds(secs + 1);
    DateTime::from_timestamp(t.timestamp(), 0).unwrap_or(t)
}

/// The pod template (or pod) metadata and spec of a sandbox named `id`:
/// label `<P>/id`, `annotations` as given, main container `sandbox` running
/// `sleep 3600`, and `spec` merged in.
pub fn sandbox_template(id: &str, annotations: &Value, spec: &Value) -> Value {
    let mut template = json!({
        "metadata": {"labels": {format!("{P}/id"): id, "app": id}, "annotations": annotations},
        "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.36", "command": ["sleep", "3600"]}]},
    });
    for (k, v) in spec.as_object().into_iter().flatten() {
        template["spec"][k] = v.clone();
    }
    template
}

/// A bare sandbox pod named `name` (see [`sandbox_template`]).
pub fn sandbox_pod(name: &str, annotations: &Value, spec: &Value) -> Result<Pod> {
    let mut pod = sandbox_template(name, annotations, spec);
    pod["apiVersion"] = json!("v1");
    pod["kind"] = json!("Pod");
    pod["metadata"]["name"] = json!(name);
    Ok(serde_json::from_value(pod)?)
}

/// Creates `pod` with `pods` and reads it back as the apiserver stored it.
pub async fn admit(pods: &Api<Pod>, pod: &Pod) -> Result<Pod> {
    let name = pod.metadata.name.as_deref().ok_or("an unnamed pod")?;
    pods.create(&kube::api::PostParams::default(), pod).await?;
    Ok(pods.get(name).await?)
}

/// contract: execd.installer, egress.native, execd.command-wrap, execd.volume, egress.token,
/// select.idempotent, execd.service-account-token
///
/// What the webhook injects, exactly once: the installer first, the
/// native egress sidecar second (with a policy), the wrapped command, one
/// `opensandbox-bin` volume, the pod's own egress token; and no API token
/// (contract: execd.service-account-token): `automountServiceAccountToken: false`, no token volume, no
/// container that mounts one, although the `ServiceAccount` admission plugin
/// added them before the webhook ran.
pub fn check_injected(p: &Pod, with_policy: bool) -> Result<()> {
    check_no_token(p)?;
    check_layout(p, with_policy)
}

/// A sandbox that keeps its API token on purpose: injected as usual, the
/// token volume there, and mounted into the injected containers too by the
/// `ServiceAccount` plugin's second run (which the webhook's second pass
/// forgives, `mutate::inject::same`; contract: execd.service-account-token).
pub fn check_token_kept(p: &Pod) -> Result<()> {
    let name = p.metadata.name.as_deref().unwrap_or("?");
    let spec = p.spec.as_ref().ok_or("a pod without a spec")?;
    check(
        spec.automount_service_account_token == Some(true),
        format!("{name}: automountServiceAccountToken is not the pod's true"),
    )?;
    check(
        !token_volumes(spec).is_empty(),
        format!("{name}: no token volume"),
    )?;
    for c in spec.init_containers.iter().flatten() {
        check(
            mounts_at(c, "/var/run/secrets/kubernetes.io/serviceaccount"),
            format!("{name}: init container {} has no token mount", c.name),
        )?;
    }
    check_layout(p, true)
}

/// The injected containers, volume and command, exactly once.
fn check_layout(p: &Pod, with_policy: bool) -> Result<()> {
    let name = p.metadata.name.as_deref().unwrap_or("?");
    let spec = p.spec.as_ref().ok_or("a pod without a spec")?;
    let main = injected_main(p, with_policy)?;
    let command = main.command.clone().unwrap_or_default();
    check(
        command == ["/opt/opensandbox/bootstrap.sh", "sleep", "3600"],
        format!("{name}: command {command:?}"),
    )?;
    let volumes = volumes_named(spec, "opensandbox-bin");
    check(
        volumes == 1,
        format!("{name}: {volumes} opensandbox-bin volumes"),
    )?;
    if with_policy {
        let egress = &spec.init_containers.as_ref().ok_or("no init containers")?[1];
        check(
            egress.restart_policy.as_deref() == Some("Always"),
            format!("{name}: egress is not a native sidecar"),
        )?;
        check(
            has_env(egress, "OPENSANDBOX_EGRESS_RULES"),
            format!("{name}: egress has no OPENSANDBOX_EGRESS_RULES"),
        )?;
        check(
            token(p).is_some(),
            format!("{name}: no {P}/egress-auth-token annotation"),
        )?;
    }
    Ok(())
}

pub fn token(p: &Pod) -> Option<&str> {
    annotation(p, &format!("{P}/egress-auth-token"))
}

/// The node a pod is bound to, once it runs there (kwok's pod-ready stage).
pub fn running_on(p: &Pod) -> Option<&str> {
    let phase = p.status.as_ref()?.phase.as_deref();
    (phase == Some("Running"))
        .then(|| p.spec.as_ref()?.node_name.as_deref())
        .flatten()
}

/// The sum of `sandbox_webhook_admission_requests_total{operation, outcome}`
/// over every outcome, by outcome.
pub fn admissions(m: &Metrics, operation: &str) -> HashMap<&'static str, u64> {
    [
        "mutated",
        "unchanged",
        "allowed",
        "skipped",
        "denied",
        "error",
    ]
    .into_iter()
    .map(|outcome| {
        let labels = [("operation", operation), ("outcome", outcome)];
        (
            outcome,
            m.value_or_zero("sandbox_webhook_admission_requests_total", &labels),
        )
    })
    .collect()
}
