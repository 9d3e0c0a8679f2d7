//! agent-sandbox's objects as the scenarios read and write them (its real
//! CRDs and controller, which `cluster.sh start --node` installs): Sandbox
//! (`agents.x-k8s.io/v1beta1`) and the extensions `SandboxTemplate`,
//! `SandboxWarmPool` and `SandboxClaim` (`extensions.agents.x-k8s.io/v1beta1`);
//! pod templates that run on the real node; the conditions agent-sandbox
//! writes; the pod of a Sandbox (it has the Sandbox's name); and the
//! webhook's and the controller's metrics, read from their pods.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::harness::{Env, P, Result, check, is_ready};
use crate::node::{http_get, pod_ip};
use common::cluster::wait_noting;
use common::metrics::Metrics;
pub use common::pods::{check_no_token, controller_owner};
use common::pods::{env_value, injected_main};

/// What a sandbox's main command reports once, then it sleeps.
pub const REPORT: &str = "echo sandbox: started; env | sort | sed 's/^/sandbox: env /'; \
    echo sandbox: reported; exec sleep 3600";

pub const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"example.com"}]}"#;

/// An agent-sandbox kind in `ns`.
pub fn api(env: &Env, ns: &str, kind: &str) -> Api<DynamicObject> {
    let (group, plural) = match kind {
        "Sandbox" => ("agents.x-k8s.io", "sandboxes"),
        "SandboxTemplate" => ("extensions.agents.x-k8s.io", "sandboxtemplates"),
        "SandboxWarmPool" => ("extensions.agents.x-k8s.io", "sandboxwarmpools"),
        _ => ("extensions.agents.x-k8s.io", "sandboxclaims"),
    };
    let gvk = GroupVersionKind::gvk(group, "v1beta1", kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, plural);
    Api::namespaced_with(env.client.clone(), ns, &resource)
}

/// Creates `object` (apiVersion and kind from `kind`) in `ns`.
pub async fn create(env: &Env, ns: &str, kind: &str, object: Value) -> Result<DynamicObject> {
    let group = if kind == "Sandbox" {
        "agents.x-k8s.io"
    } else {
        "extensions.agents.x-k8s.io"
    };
    let mut object = object;
    object["apiVersion"] = json!(format!("{group}/v1beta1"));
    object["kind"] = json!(kind);
    let object: DynamicObject = serde_json::from_value(object)?;
    Ok(api(env, ns, kind)
        .create(&PostParams::default(), &object)
        .await?)
}

/// A pod template (metadata and spec) that runs on the real node: `labels`
/// and `annotations` as given, main container `sandbox` running `script`
/// with the node's busybox image.
pub fn pod_template(env: &Env, labels: &Value, annotations: &Value, script: &str) -> Result<Value> {
    let mut spec = on_node_spec(env)?;
    spec["containers"] = json!([{"name": "sandbox", "image": env.var("BUSYBOX_IMAGE")?,
                                 "command": ["sh", "-c", script]}]);
    Ok(json!({
        "metadata": {"labels": labels, "annotations": annotations},
        "spec": spec,
    }))
}

/// A pod spec (without containers) whose pod runs on the real node and
/// stops quickly.
pub fn on_node_spec(env: &Env) -> Result<Value> {
    let on_node = env.on_node_values()?;
    Ok(json!({
        "nodeSelector": on_node["nodeSelector"],
        "tolerations": on_node["tolerations"],
        "terminationGracePeriodSeconds": 5,
        "enableServiceLinks": false,
    }))
}

/// The `status` and `reason` of condition `type_` of an agent-sandbox object.
pub fn condition(object: &DynamicObject, type_: &str) -> Option<(String, String)> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (text("status"), text("reason"))
        })
}

/// The conditions of `object`, for messages.
pub fn conditions(object: &DynamicObject) -> String {
    object.data["status"]["conditions"].to_string()
}

/// Object `name` of `api` once condition `type_` is `status` with `reason`.
pub async fn wait_condition(
    api: &Api<DynamicObject>,
    name: &str,
    (type_, status, reason): (&str, &str, &str),
    timeout: Duration,
) -> Result<DynamicObject> {
    wait_noting(
        &format!("{name}: condition {type_}={status}, reason {reason}"),
        timeout,
        "its conditions",
        async |last: &mut String| {
            let o = api.get(name).await?;
            *last = conditions(&o);
            let hit = condition(&o, type_).is_some_and(|(s, r)| s == status && r == reason);
            Ok(hit.then_some(o))
        },
    )
    .await
}

/// The pod of Sandbox `name` (it has the Sandbox's name) once Ready.
pub async fn ready_pod(env: &Env, ns: &str, name: &str, timeout: Duration) -> Result<Pod> {
    let pods = env.pods(ns);
    let sandboxes = api(env, ns, "Sandbox");
    wait_noting(
        &format!("the pod of Sandbox {ns}/{name} Ready"),
        timeout,
        "the Sandbox's conditions",
        async |last: &mut String| {
            if let Some(s) = sandboxes.get_opt(name).await? {
                *last = conditions(&s);
            }
            Ok(pods.get_opt(name).await?.filter(is_ready))
        },
    )
    .await
}

/// What the webhook injected, checked on a stored pod: the installer
/// first (and the egress sidecar second, `with_policy`), the main command
/// under bootstrap.sh, `OPENSANDBOX_ID` = `id`, no API token.
pub fn check_injected(p: &Pod, id: &str, with_policy: bool) -> Result<()> {
    let name = p.metadata.name.as_deref().unwrap_or("?");
    let main = injected_main(p, with_policy)?;
    let command = main.command.clone().unwrap_or_default();
    check(
        command.first().map(String::as_str) == Some("/opt/opensandbox/bootstrap.sh"),
        format!("{name}: command {command:?} is not under bootstrap.sh"),
    )?;
    let env_id = env_value(main, "OPENSANDBOX_ID");
    check(
        env_id == Some(id),
        format!("{name}: OPENSANDBOX_ID is {env_id:?}, not {id}"),
    )?;
    check_no_token(p)
}

/// The annotation `P/<key>` of `p`.
pub fn annotation<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    common::pods::annotation(p, &format!("{P}/{key}"))
}

/// The sum over the release's `component` pods (`webhook`, `controller`)
/// of metric `name` with `labels`, read on their admin port.
pub async fn release_metric(
    env: &Env,
    component: &str,
    name: &str,
    labels: &[(&str, &str)],
) -> Result<u64> {
    let mut sum = 0;
    for p in env.release_pods(component).await? {
        let ip = pod_ip(&p)?;
        let (code, body) = http_get(&ip, 8080, "/metrics", &[])?;
        check(code == 200, format!("{ip}:8080/metrics answered {code}"))?;
        sum += Metrics::parse(&body).value_or_zero(name, labels);
    }
    Ok(sum)
}
