//! Scenarios a and b: OpenSandbox's own server (`opensandbox-server` 1.1.1,
//! a process on loopback with its agent-sandbox provider and the cluster's
//! kubeconfig) creates a sandbox through its REST API. The server writes a
//! `Sandbox` whose pod template it completed itself (execd installer,
//! egress sidecar, bootstrap.sh); agent-sandbox's controller creates the
//! pod; the installed webhook admits it as `server-completed`, with no
//! patch (SPEC 12), and it runs on the real node as the server built it.
//! Deleted through the server's API, it is gone, pod and Sandbox.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};
use kube::api::{DynamicObject, ListParams};
use serde_json::{Value, json};

use crate::agent::{
    REPORT, annotation, api, check_no_token, conditions, controller_owner, on_node_spec,
    release_metric,
};
use crate::harness::{Env, P, PRIVILEGED, Result, check, is_ready, logged, wait_for};
use crate::node::{egress_healthz, pod_ip};
use common::cluster::the_only;
use common::opensandbox::{OpenSandboxServer, ServerSettings};
use common::pods::{
    check_pong, container, container_status, env_value, execd_ping, first_container,
};
use common::suite::timed;

/// The policy the server is asked for, as its API spells it.
fn policy() -> Value {
    json!({"defaultAction": "deny", "egress": [{"action": "allow", "target": "example.com"}]})
}

/// The server for namespace `ns`, its files under the suite's work
/// directory; its Sandboxes' pods go to the real node (the template the
/// server merges under what it builds).
async fn server(env: &Env, id: &str, ns: &str) -> Result<OpenSandboxServer> {
    let template = json!({
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
        "spec": {"podTemplate": {"spec": on_node_spec(env)?}},
    });
    let (server, took) = timed(OpenSandboxServer::start(
        &env.work.join(format!("opensandbox-{id}")),
        &ServerSettings {
            kubeconfig: std::path::Path::new(env.var("KUBECONFIG")?),
            namespace: ns,
            execd_image: env.var("EXECD_IMAGE")?,
            egress_image: env.var("EGRESS_IMAGE")?,
            template,
        },
    ))
    .await?;
    println!(
        "    opensandbox-server 1.1.1 (agent-sandbox provider, namespace {ns}) healthy in {took:.1}s"
    );
    Ok(server)
}

/// Creates a sandbox through the server (`policy`: with a network policy);
/// its id, once the server says it runs. A refusal says what the cluster
/// shows: the Sandboxes' conditions and the server's log.
async fn create(
    env: &Env,
    server: &OpenSandboxServer,
    ns: &str,
    with_policy: bool,
) -> Result<String> {
    let mut request = json!({
        "image": {"uri": env.var("BUSYBOX_IMAGE")?},
        "entrypoint": ["sh", "-c", REPORT],
        "timeout": 3600,
        "resourceLimits": {"cpu": "500m", "memory": "256Mi"},
    });
    if with_policy {
        request["networkPolicy"] = policy();
    }
    let started = Instant::now();
    let (status, answer) = server.create(&request).await?;
    if status != 202 {
        let sandboxes = api(env, ns, "Sandbox").list(&ListParams::default()).await?;
        let seen: Vec<String> = sandboxes
            .items
            .iter()
            .map(|s| {
                format!(
                    "{}: {}",
                    s.metadata.name.as_deref().unwrap_or("?"),
                    conditions(s)
                )
            })
            .collect();
        return Err(format!(
            "the server answered {status} {answer}; the webhook must admit the server's pod (server-completed); Sandboxes: {seen:?}; the server's log ends:\n{}",
            server.log_tail(15)
        )
        .into());
    }
    let id = answer["id"]
        .as_str()
        .ok_or(format!("no id in {answer}"))?
        .to_owned();
    println!(
        "    POST /v1/sandboxes: 202 in {:.1}s, id {id}, state {}",
        started.elapsed().as_secs_f64(),
        answer["status"]["state"]
    );
    Ok(id)
}

/// A sandbox created through the server with a network policy: the
/// server's id for it, the Sandbox the server made for it (labelled
/// `P/id`), and that Sandbox's name (its pod's too).
struct ServerSandbox {
    id: String,
    sandbox: DynamicObject,
    name: String,
}

impl ServerSandbox {
    async fn create(env: &Env, server: &OpenSandboxServer, ns: &str) -> Result<ServerSandbox> {
        let id = create(env, server, ns, true).await?;
        let list = api(env, ns, "Sandbox")
            .list(&ListParams::default().labels(&format!("{P}/id={id}")))
            .await?;
        let sandbox = the_only(list.items, &format!("Sandboxes labelled {P}/id={id}"))?;
        let name = sandbox
            .metadata
            .name
            .clone()
            .ok_or("a Sandbox without a name")?;
        Ok(ServerSandbox { id, sandbox, name })
    }
}

/// The containers of the Sandbox's pod template, by name, as the server
/// wrote them.
fn template_containers(sandbox: &DynamicObject, field: &str) -> Result<Vec<Container>> {
    let list = &sandbox.data["spec"]["podTemplate"]["spec"][field];
    Ok(serde_json::from_value(if list.is_null() {
        json!([])
    } else {
        list.clone()
    })?)
}

/// The readiness probe's `httpGet`, with the apiserver's default scheme
/// (`HTTP`) filled in: the stored pod has it, the Sandbox's template (a
/// custom resource, which the apiserver does not default) does not.
fn probe_get(c: &Container) -> Option<k8s_openapi::api::core::v1::HTTPGetAction> {
    let mut get = c.readiness_probe.as_ref()?.http_get.clone()?;
    get.scheme.get_or_insert_with(|| "HTTP".to_owned());
    Some(get)
}

/// The stored pod is the server's template as built: the same containers
/// in the same places, each with its image, command, args, env,
/// capabilities and probe; no expiry or token annotation of the webhook's.
fn as_built(p: &Pod, sandbox: &DynamicObject) -> Result<()> {
    let spec = p.spec.as_ref().ok_or("a pod without a spec")?;
    for (field, stored) in [
        (
            "initContainers",
            spec.init_containers.clone().unwrap_or_default(),
        ),
        ("containers", spec.containers.clone()),
    ] {
        let built = template_containers(sandbox, field)?;
        let names = |cs: &[Container]| cs.iter().map(|c| c.name.clone()).collect::<Vec<_>>();
        check(
            names(&stored) == names(&built),
            format!(
                "{field}: the pod has {:?}, the server built {:?}",
                names(&stored),
                names(&built)
            ),
        )?;
        for (s, b) in stored.iter().zip(&built) {
            let same = s.image == b.image
                && s.command == b.command
                && s.args == b.args
                && s.env == b.env
                && s.security_context == b.security_context
                && probe_get(s) == probe_get(b);
            check(
                same,
                format!(
                    "{field} {}: changed at admission:\n  built  {b:?}\n  stored {s:?}",
                    b.name
                ),
            )?;
        }
    }
    for key in ["expires-at", "egress-auth-token"] {
        check(
            annotation(p, key).is_none(),
            format!("the pod got {P}/{key} at admission"),
        )?;
    }
    Ok(())
}

/// The sandbox's egress sidecar (a container of the server's layout), its
/// token from its own env.
fn sidecar(p: &Pod) -> Result<(&Container, String)> {
    let egress = container(p, "egress").ok_or("the server's pod has no egress container")?;
    let token = env_value(egress, "OPENSANDBOX_EGRESS_TOKEN")
        .ok_or("the sidecar has no OPENSANDBOX_EGRESS_TOKEN")?;
    Ok((egress, token.to_owned()))
}

/// Scenario a.
pub(crate) async fn stack_server_sandbox_runs(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    let server = server(env, id, &ns).await?;
    let skip = [("reason", "server-completed")];
    let skips = async || {
        release_metric(
            env,
            "webhook",
            "sandbox_webhook_admission_skips_total",
            &skip,
        )
        .await
    };
    let before = skips().await?;
    let ServerSandbox {
        id: sandbox_id,
        sandbox,
        name,
    } = ServerSandbox::create(env, &server, &ns).await?;
    let p = env.pods(&ns).get(&name).await?;
    check(
        controller_owner(&p) == Some(("Sandbox", name.as_str())),
        format!(
            "the pod's controller owner is {:?}, not Sandbox {name}",
            controller_owner(&p)
        ),
    )?;

    // Admitted as server-completed, with no patch.
    let after = skips().await?;
    check(
        after > before,
        format!(
            "the webhook did not count the server's pod as server-completed (skips {before} -> {after}; SPEC 12)"
        ),
    )?;
    as_built(&p, &sandbox)?;
    println!(
        "    the server's Sandbox {name} -> agent-sandbox's pod {name}: admitted as server-completed (skips {before} -> {after}), containers as the server built them"
    );

    // It runs on the real node as built.
    check(is_ready(&p), format!("{name} is not Ready"))?;
    let main = first_container(&p)
        .map(|c| c.name.clone())
        .ok_or("no main container")?;
    let log = env
        .logs_with(&ns, &name, &main, "sandbox: reported")
        .await?;
    logged(
        &log,
        "bootstrap.sh: starting /opt/opensandbox/execd in the background",
        "bootstrap.sh",
    )?;
    logged(
        &log,
        &format!("sandbox: env OPENSANDBOX_ID={sandbox_id}"),
        "the server's OPENSANDBOX_ID",
    )?;
    let ping = env.kubectl(&execd_ping(&ns, &name, &main, &[]))?;
    check_pong(&ping)?;
    let (egress, token) = sidecar(&p)?;
    let status = container_status(&p, &egress.name).ok_or("no status of the egress container")?;
    check(status.ready, "the egress sidecar is not Ready")?;
    let probe_header = egress
        .readiness_probe
        .as_ref()
        .and_then(|r| r.http_get.as_ref())
        .and_then(|h| h.http_headers.as_ref())
        .and_then(|hs| hs.iter().find(|h| h.name == "OPENSANDBOX-EGRESS-AUTH"))
        .map(|h| h.value.clone());
    check(
        probe_header.as_deref() == Some(token.as_str()),
        "the sidecar's readiness probe does not carry its token",
    )?;
    let sidecar_log = env.logs(&ns, &name, "egress")?;
    logged(
        &sidecar_log,
        "healthz: 200",
        "the sidecar answering the kubelet's probe",
    )?;
    logged(&sidecar_log, "(\"kube-probe/", "the kubelet's probe")?;
    let ip = pod_ip(&p)?;
    let without = egress_healthz(&ip, None)?;
    let with = egress_healthz(&ip, Some(&token))?;
    check(
        (without, with) == (401, 200),
        format!("{ip}:18080/healthz answered {without} without the token, {with} with it"),
    )?;
    check_no_token(&p)?;
    println!(
        "    {name}: Running on {}, execd answered {}, the sidecar Ready through its token probe (401 without, 200 with it), no API token",
        env.var("NODE_NAME")?,
        ping.trim()
    );
    Ok(())
}

/// Scenario b: deleted through the server's API, the sandbox is gone, pod
/// and Sandbox.
pub(crate) async fn stack_server_sandbox_deleted(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[PRIVILEGED]).await?;
    let server = server(env, id, &ns).await?;
    let ServerSandbox {
        id: sandbox_id,
        name,
        ..
    } = ServerSandbox::create(env, &server, &ns).await?;
    let pods = env.pods(&ns);
    check(
        pods.get_opt(&name).await?.is_some_and(|p| is_ready(&p)),
        format!("the pod {name} does not run"),
    )?;
    let started = Instant::now();
    let status = server.delete(&sandbox_id).await?;
    check(
        status == 204,
        format!("DELETE /v1/sandboxes/{sandbox_id} answered {status}"),
    )?;
    let sandboxes = api(env, &ns, "Sandbox");
    wait_for(
        &format!("Sandbox {name} and its pod gone"),
        Duration::from_secs(60),
        async || {
            let gone =
                sandboxes.get_opt(&name).await?.is_none() && pods.get_opt(&name).await?.is_none();
            Ok(gone.then_some(()))
        },
    )
    .await?;
    let (after, _) = server.get(&sandbox_id).await?;
    check(
        after == 404,
        format!("GET /v1/sandboxes/{sandbox_id} answers {after} after the delete"),
    )?;
    println!(
        "    DELETE /v1/sandboxes/{sandbox_id}: 204; Sandbox and pod {name} gone {:.1}s later; GET answers 404",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
