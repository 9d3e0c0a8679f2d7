//! Pod Security admission (enabled in `cluster.sh`) runs after the mutating
//! webhooks, so it judges the injected pod. A sandbox that meets the
//! `restricted` level still meets it after injection when it asks for no
//! network policy. With a policy it needs `privileged`: the egress sidecar
//! adds `NET_ADMIN` and the installer is privileged (it disables IPv6), which
//! `restricted` and `baseline` both refuse.

use k8s_openapi::api::core::v1::Container;
use kube::api::PostParams;
use serde_json::json;

use crate::Result;
use crate::env::{Env, Scope, check, check_init_containers};
use common::pods::SandboxPod;

const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;

/// Everything the `restricted` level asks of a pod and its containers.
fn restricted_sandbox(name: &str) -> SandboxPod {
    SandboxPod::new(name)
        .spec_field(
            "securityContext",
            json!({"runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}}),
        )
        .main_field(
            "securityContext",
            json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}),
        )
}

fn init<'p>(pod: &'p k8s_openapi::api::core::v1::Pod, name: &str) -> Option<&'p Container> {
    pod.spec
        .as_ref()?
        .init_containers
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
}

/// The create is refused by Pod Security at `level`, and the message
/// names each violation the webhook's additions cause.
async fn refused(env: &Env, ns: &str, name: &str, level: &str) -> Result<()> {
    let pod = restricted_sandbox(name)
        .annotation("network-policy", POLICY)
        .pod();
    match env.pods(ns).create(&PostParams::default(), &pod).await {
        Ok(_) => Err(format!("a sandbox with a network policy was admitted at {level}").into()),
        Err(kube::Error::Api(e)) => {
            let m = &e.message;
            check(
                e.code == 403 && m.contains(&format!("violates PodSecurity \"{level}:latest\"")),
                format!("refused by Pod Security {level} (got {}: {m})", e.code),
            )?;
            check(
                m.contains("\"execd-installer\"") && m.contains("privileged"),
                format!("the privileged installer is named (got: {m})"),
            )?;
            check(
                m.contains("\"egress\"") && m.contains("NET_ADMIN"),
                format!("the sidecar's NET_ADMIN is named (got: {m})"),
            )
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn pod_security_levels(env: &Env, id: &str) -> Result<()> {
    let scope = Scope::new(env, id);
    let restricted = scope.namespace("", &[(ENFORCE, "restricted")]).await?;
    let baseline = scope
        .namespace("baseline", &[(ENFORCE, "baseline")])
        .await?;
    let privileged = scope
        .namespace("privileged", &[(ENFORCE, "privileged")])
        .await?;
    scope.register(&[env.main_entry()]).await?;
    // The probe is not restricted-compliant; the configuration is the same
    // for all three namespaces.
    scope.wait_active(&privileged, true).await?;

    // restricted, no network policy: created and stored with injection.
    let pods = env.pods(&restricted);
    pods.create(
        &PostParams::default(),
        &restricted_sandbox("compliant").pod(),
    )
    .await
    .map_err(|e| format!("a restricted-compliant sandbox was refused: {e}"))?;
    let stored = pods.get("compliant").await?;
    check_init_containers(&stored, &["execd-installer"], "stored with the installer")?;
    let installer = init(&stored, "execd-installer").ok_or("no installer")?;
    let sc = installer
        .security_context
        .as_ref()
        .ok_or("installer has no securityContext")?;
    check(
        sc.allow_privilege_escalation == Some(false),
        "installer: allowPrivilegeEscalation false",
    )?;
    check(
        sc.capabilities
            .as_ref()
            .and_then(|c| c.drop.as_ref())
            .is_some_and(|d| d.iter().any(|c| c == "ALL")),
        "installer drops ALL",
    )?;
    check(
        stored.spec.as_ref().ok_or("spec")?.containers[0]
            .command
            .as_ref()
            .and_then(|c| c.first())
            .is_some_and(|c| c == "/opt/opensandbox/bootstrap.sh"),
        "main container wrapped",
    )?;

    // With a network policy: refused at restricted and at baseline ...
    refused(env, &restricted, "with-policy", "restricted").await?;
    refused(env, &baseline, "with-policy", "baseline").await?;
    // ... admitted at privileged, with the sidecar.
    env.pods(&privileged)
        .create(
            &PostParams::default(),
            &restricted_sandbox("with-policy")
                .annotation("network-policy", POLICY)
                .pod(),
        )
        .await?;
    let stored = env.pods(&privileged).get("with-policy").await?;
    check_init_containers(
        &stored,
        &["execd-installer", "egress"],
        "privileged: stored with installer and sidecar",
    )
}
