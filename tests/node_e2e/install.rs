//! Scenario 1: installed as users install it. The suite's setup ran `helm
//! install` of the chart (in-cluster, the podman-built image on the real
//! node); this checks what that made:
//! - the webhook and the controller run as pods on the real node, each
//!   process as the chart's non-root user, with no capabilities and a
//!   read-only root filesystem (read in /proc on the host);
//! - the apiserver calls the webhook through its Service: the webhook
//!   configuration names the Service, not a URL, and the apiserver resolves
//!   it to a ready endpoint of its `EndpointSlices` (`--enable-aggregator-routing`:
//!   there is no kube-proxy), so a sandbox create lands on a webhook pod,
//!   whose own metrics count it;
//! - the controller holds its Lease, written with its own `ServiceAccount`'s
//!   token (the apiserver's audit log names the user).

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;

use crate::harness::{Env, RELEASE, RELEASE_NS, Result, check, is_ready, wait_for};
use crate::node::{http_get, pid_of, pod_ip, root_mount, status_field};
use common::cluster::check_count;
use common::metrics::Metrics;

/// The chart's non-root user and group.
const USER: &str = "65532";

pub(crate) async fn installed_as_users_install_it(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[]).await?;
    let node = env.var("NODE_NAME")?;
    for (component, container) in [("webhook", "webhook"), ("controller", "controller")] {
        let pods = env.release_pods(component).await?;
        check_count(&pods, 2, &format!("{component} pods"))?;
        for p in &pods {
            let name = p.metadata.name.as_deref().unwrap_or("?");
            let on = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
            check(
                on == Some(node),
                format!("{name} runs on {on:?}, not {node}"),
            )?;
            check(is_ready(p), format!("{name} is not Ready"))?;
            let image = p.spec.as_ref().map(|s| s.containers[0].image.clone());
            check(
                image
                    .iter()
                    .flatten()
                    .any(|i| env.image.ends_with(i.as_str())),
                format!("{name} runs {image:?}, not {}", env.image),
            )?;
            check_process(env, p, container)?;
        }
        println!(
            "    {component}: 2 pods Running and Ready on {node}, each as {USER}:{USER}, no capabilities, read-only root"
        );
    }
    through_the_service(env, &ns).await?;
    lease_with_own_identity(env).await
}

/// The container's process as the kernel sees it.
fn check_process(env: &Env, p: &k8s_openapi::api::core::v1::Pod, container: &str) -> Result<()> {
    let name = p.metadata.name.as_deref().unwrap_or("?");
    let pid = pid_of(env, p, container)?;
    let all = |v: &str| format!("{v} {v} {v} {v}");
    for (key, want) in [
        ("Uid", all(USER)),
        ("Gid", all(USER)),
        ("CapEff", "0000000000000000".into()),
        ("CapBnd", "0000000000000000".into()),
        ("NoNewPrivs", "1".into()),
        ("Seccomp", "2".into()),
    ] {
        let got = status_field(pid, key)?;
        check(
            got == want,
            format!("{name}: {key} is {got:?}, expected {want:?}"),
        )?;
    }
    let root = root_mount(pid)?;
    check(
        root == "ro",
        format!("{name}: its root filesystem is mounted {root}"),
    )
}

/// The webhook configuration names the Service; its `EndpointSlice` lists the
/// webhook pods, ready; a sandbox create is answered by one of them.
async fn through_the_service(env: &Env, ns: &str) -> Result<()> {
    let mwc: Api<MutatingWebhookConfiguration> = Api::all(env.client.clone());
    let config = mwc.get(&format!("{RELEASE}-{RELEASE_NS}")).await?;
    let client = &config.webhooks.as_ref().ok_or("no webhooks")?[0].client_config;
    check(
        client.url.is_none(),
        format!("the webhook is called by URL: {:?}", client.url),
    )?;
    let service = client
        .service
        .as_ref()
        .ok_or("the webhook names no Service")?;
    check(
        service.name == RELEASE && service.namespace == RELEASE_NS,
        format!(
            "the webhook names Service {}/{}",
            service.namespace, service.name
        ),
    )?;
    let slices: Api<EndpointSlice> = Api::namespaced(env.client.clone(), RELEASE_NS);
    let list = slices
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={RELEASE}")))
        .await?;
    let mut ready: Vec<String> = list
        .items
        .iter()
        .flat_map(|s| s.endpoints.iter().flatten())
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .flat_map(|e| e.addresses.iter().cloned())
        .collect();
    ready.sort();
    let mut ips = Vec::new();
    for p in env.release_pods("webhook").await? {
        ips.push(pod_ip(&p)?);
    }
    ips.sort();
    check(
        ready == ips,
        format!("the Service's ready endpoints are {ready:?}, the webhook pods' IPs {ips:?}"),
    )?;

    let before = mutated(&ips)?;
    let pod = env.sandbox("through-service", "sleep 1")?.pod();
    let stored = env.pods(ns).create(&PostParams::default(), &pod).await?;
    let inits = common::pods::init_names(&stored);
    check(
        inits.first() == Some(&"execd-installer"),
        format!("the stored pod's init containers are {inits:?}"),
    )?;
    let after = wait_for(
        "the webhook pods' metrics to count the create",
        Duration::from_secs(10),
        async || {
            let now = mutated(&ips)?;
            Ok((now > before).then_some(now))
        },
    )
    .await?;
    println!(
        "    the apiserver called Service {RELEASE_NS}/{RELEASE} (clientConfig.service, no url): it picked a ready endpoint of {ips:?} from the EndpointSlice; the pods counted {before} -> {after} mutations"
    );
    Ok(())
}

/// The webhook pods' mutated CREATE admissions, read on their admin port.
fn mutated(ips: &[String]) -> Result<u64> {
    let mut sum = 0;
    for ip in ips {
        let (code, body) = http_get(ip, 8080, "/metrics", &[])?;
        check(code == 200, format!("{ip}:8080/metrics answered {code}"))?;
        sum += Metrics::parse(&body).value_or_zero(
            "sandbox_webhook_admission_requests_total",
            &[("operation", "CREATE"), ("outcome", "mutated")],
        );
    }
    Ok(sum)
}

/// The Lease's holder is a controller pod, and the audit log shows its
/// `ServiceAccount` writing it.
async fn lease_with_own_identity(env: &Env) -> Result<()> {
    let name = format!("{RELEASE}-controller");
    let holder = wait_for(
        "the controller's Lease to be held",
        Duration::from_secs(30),
        async || env.controller_lease_holder().await,
    )
    .await?;
    let controllers = env.release_pod_names("controller").await?;
    check(
        controllers.contains(&holder),
        format!("Lease {name} is held by {holder:?}, not one of {controllers:?}"),
    )?;
    let user = format!("system:serviceaccount:{RELEASE_NS}:{RELEASE}-controller");
    let audit = std::fs::read_to_string(env.var("AUDIT_LOG")?)?;
    let writers: Vec<String> = audit
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| {
            e["objectRef"]["resource"] == "leases"
                && e["objectRef"]["namespace"] == RELEASE_NS
                && e["objectRef"]["name"] == name.as_str()
                && e["responseStatus"]["code"]
                    .as_u64()
                    .is_some_and(|c| c < 300)
        })
        .filter_map(|e| e["user"]["username"].as_str().map(str::to_owned))
        .collect();
    check(
        !writers.is_empty(),
        format!("the audit log has no write of Lease {name}"),
    )?;
    check(
        writers.iter().all(|w| *w == user),
        format!("Lease {name} was written by {writers:?}, not only by {user}"),
    )?;
    println!(
        "    Lease {RELEASE_NS}/{name} held by {holder}; the audit log shows {} writes, all by {user}",
        writers.len()
    );
    Ok(())
}
