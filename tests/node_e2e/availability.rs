//! Scenarios 4 and 5: the installed webhook stays available, with
//! `failurePolicy: Fail`, while sandboxes are created at a steady rate:
//! - a `kubectl rollout restart` of its Deployment (the kubelet sends
//!   SIGTERM, the endpoints controller takes the pod out of the
//!   `EndpointSlice`, the apiserver stops picking it);
//! - its serving Secret replaced as cert-manager renews it (same CA, new
//!   key and certificate): the kubelet swaps the mounted files (`..data`)
//!   and the webhook serves the new certificate without a restart.
//!
//! No create may be refused. The creates carry a scheduling gate: they are
//! admitted and stored, and nothing runs them.

use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::harness::{Env, RELEASE, RELEASE_NS, Result, check, run_command, wait_for};
use crate::node::{pod_ip, served_serial};
use common::load::{Load, Tally};
use common::pods::{SandboxPod, pod_names};

const ROLLOUT_RATE: u32 = 20;
const ROTATION_RATE: u32 = 10;

/// `rate` gated sandbox creates a second in `ns`.
fn load(env: &Env, ns: &str, rate: u32) -> Load {
    let gate = json!([{"name": "sandbox-webhook-e2e/hold"}]);
    Load::start(env.pods(ns), rate, None, move |i| {
        Ok(SandboxPod::new(&format!("load-{i}"))
            .spec_field("schedulingGates", gate.clone())
            .pod())
    })
}

/// Lets `load` run 2 s more (the creates that were in flight during the
/// change land), then stops it: its tally and the seconds since `started`.
async fn settle_and_stop(load: Load, started: Instant) -> Result<(Tally, f64)> {
    tokio::time::sleep(Duration::from_secs(2)).await;
    let tally = load.stop().await?;
    Ok((tally, started.elapsed().as_secs_f64()))
}

fn report(what: &str, tally: &Tally, seconds: f64) -> Result<()> {
    println!(
        "    {what}: {} sandbox creates over {seconds:.1}s: {} admitted, {} refused",
        tally.total(),
        tally.ok,
        tally.refused.len()
    );
    tally.none_refused()?;
    check(tally.ok > 0, "no create was made")
}

pub(crate) async fn rollout_restart_refuses_nothing(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[]).await?;
    let old = env.release_pod_names("webhook").await?;
    let started = Instant::now();
    let load = load(env, &ns, ROLLOUT_RATE);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let deployment = format!("deployment/{RELEASE}");
    env.kubectl(&["rollout", "restart", "-n", RELEASE_NS, &deployment])?;
    let restarted = started.elapsed().as_secs_f64();
    let kubectl = env.kubectl_command(&[
        "rollout",
        "status",
        "-n",
        RELEASE_NS,
        &deployment,
        "--timeout=180s",
    ])?;
    tokio::task::spawn_blocking(move || run_command(kubectl)).await??;
    // The old pods keep answering through their shutdown delay; the load
    // runs until they are gone.
    let pods = env.pods(RELEASE_NS);
    wait_for(
        "the old webhook pods to be gone",
        Duration::from_secs(90),
        async || {
            for name in &old {
                if pods.get_opt(name).await?.is_some() {
                    return Ok(None);
                }
            }
            Ok(Some(()))
        },
    )
    .await?;
    let (tally, seconds) = settle_and_stop(load, started).await?;
    let new = env.release_pod_names("webhook").await?;
    println!(
        "    rollout restart at t={restarted:.1}s: {old:?} replaced by {new:?}, the old ones gone at t={seconds:.1}s"
    );
    check(
        new.len() == 2 && new.iter().all(|n| !old.contains(n)),
        format!("after the rollout the webhook pods are {new:?} (before: {old:?})"),
    )?;
    report(&format!("rollout at {ROLLOUT_RATE}/s"), &tally, seconds)
}

pub(crate) async fn rotated_certificate_is_served(env: &Env, id: &str) -> Result<()> {
    let ns = env.namespace(id, &[]).await?;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), RELEASE_NS);
    let ca = secrets.get(&format!("{RELEASE}-ca")).await?;
    let ca_crt = data(&ca, "tls.crt")?;
    let server_name = format!("{RELEASE}.{RELEASE_NS}.svc");
    let pods = env.release_pods("webhook").await?;
    let before = serials(&pods, &server_name, &ca_crt).await?;
    let (crt, key, serial) = issue(env, &ca_crt, &data(&ca, "tls.key")?)?;
    check(
        before.iter().all(|s| *s != serial),
        format!("the new serial {serial} is already served"),
    )?;

    let started = Instant::now();
    let load = load(env, &ns, ROTATION_RATE);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // What cert-manager does on renewal: an update of the Secret's data.
    let mut tls = secrets.get(&format!("{RELEASE}-tls")).await?;
    let d = tls.data.get_or_insert_default();
    d.insert("tls.crt".into(), ByteString(crt.clone().into_bytes()));
    d.insert("tls.key".into(), ByteString(key.into_bytes()));
    d.insert("ca.crt".into(), ByteString(ca_crt.clone().into_bytes()));
    secrets
        .replace(&format!("{RELEASE}-tls"), &PostParams::default(), &tls)
        .await?;
    let replaced = started.elapsed().as_secs_f64();
    let served = wait_for(
        "both webhook pods to serve the new certificate",
        Duration::from_secs(90),
        async || {
            let now = serials(&pods, &server_name, &ca_crt).await?;
            Ok(now
                .iter()
                .all(|s| *s == serial)
                .then(|| started.elapsed().as_secs_f64()))
        },
    )
    .await?;
    let (tally, seconds) = settle_and_stop(load, started).await?;

    // Served by the same processes: the pods were not restarted.
    let after = env.release_pods("webhook").await?;
    check(
        pod_names(&after) == pod_names(&pods),
        format!(
            "the webhook pods changed: {:?} -> {:?}",
            pod_names(&pods),
            pod_names(&after)
        ),
    )?;
    for p in &after {
        let restarts: i32 = p
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
            .map(|c| c.restart_count)
            .sum();
        check(
            restarts == 0,
            format!("{:?} restarted {restarts} times", p.metadata.name),
        )?;
    }
    mounted_by_kubelet(env, &after, &crt)?;
    println!(
        "    Secret {RELEASE}-tls replaced at t={replaced:.1}s; the kubelet swapped the mounted files and both pods served serial {serial} (was {before:?}) at t={served:.1}s, without a restart"
    );
    report(&format!("rotation at {ROTATION_RATE}/s"), &tally, seconds)
}

/// The serials the webhook pods serve on 8443, one per pod.
async fn serials(pods: &[Pod], server_name: &str, ca: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for p in pods {
        let addr = format!("{}:8443", pod_ip(p)?).parse()?;
        out.push(served_serial(addr, server_name, ca.as_bytes()).await?);
    }
    Ok(out)
}

fn data(secret: &Secret, key: &str) -> Result<String> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .ok_or(format!("Secret {:?} has no {key}", secret.metadata.name))?;
    Ok(String::from_utf8(bytes.0.clone())?)
}

/// A new serving certificate for the chart's DNS names from its CA, as
/// cert-manager issues one (openssl); its PEM, its key's PEM, its serial.
fn issue(env: &Env, ca_crt: &str, ca_key: &str) -> Result<(String, String, String)> {
    let dir = env.work.join("rotation");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("ca.crt"), ca_crt)?;
    std::fs::write(dir.join("ca.key"), ca_key)?;
    let svc = format!("{RELEASE}.{RELEASE_NS}");
    std::fs::write(
        dir.join("ext.cnf"),
        format!(
            "basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature, keyEncipherment\n\
             extendedKeyUsage = serverAuth\n\
             subjectAltName = DNS:{RELEASE}, DNS:{svc}, DNS:{svc}.svc, DNS:{svc}.svc.cluster.local\n"
        ),
    )?;
    let openssl = |args: &[&str]| -> Result<String> {
        let mut c = std::process::Command::new("openssl");
        c.current_dir(&dir).args(args);
        run_command(c)
    };
    openssl(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        "tls.key",
    ])?;
    openssl(&[
        "req",
        "-new",
        "-key",
        "tls.key",
        "-subj",
        &format!("/CN={svc}.svc"),
        "-out",
        "tls.csr",
    ])?;
    openssl(&[
        "x509",
        "-req",
        "-in",
        "tls.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "30",
        "-extfile",
        "ext.cnf",
        "-out",
        "tls.crt",
    ])?;
    let crt = std::fs::read_to_string(dir.join("tls.crt"))?;
    let key = std::fs::read_to_string(dir.join("tls.key"))?;
    let der = common::https::der(&crt);
    let (_, parsed) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| format!("the issued certificate does not parse: {e}"))?;
    Ok((crt, key, parsed.raw_serial_as_string()))
}

/// The kubelet's copy of the Secret in each pod's volume is the new one.
fn mounted_by_kubelet(env: &Env, pods: &[Pod], crt: &str) -> Result<()> {
    for p in pods {
        let uid = p.metadata.uid.as_deref().ok_or("a pod without a uid")?;
        let file = env.dir.join(format!(
            "node/kubelet/pods/{uid}/volumes/kubernetes.io~secret/tls/tls.crt"
        ));
        let mounted = std::fs::read_to_string(&file)?;
        check(
            mounted == crt,
            format!("{} is not the new certificate", file.display()),
        )?;
        let data = std::fs::read_link(file.with_file_name("..data"))?;
        check(
            data.to_string_lossy().starts_with("..20"),
            format!("..data points at {}", data.display()),
        )?;
    }
    Ok(())
}
