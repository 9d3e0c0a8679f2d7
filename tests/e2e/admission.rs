//! What an admitted or denied sandbox pod looks like once the apiserver has
//! stored (or refused) it.

use kube::api::PostParams;
use serde_json::json;

use crate::Result;
use crate::env::{Env, annotation, check, check_init_containers, has_init};
use common::P;
use common::pods::{SandboxPod, dropped_capabilities, env_value, has_env};

/// The network policy of the sandboxes that ask for one.
const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;

/// contract: answer.patch, execd.installer, execd.command-wrap
pub async fn sandbox_pod_is_stored_mutated(env: &Env, id: &str) -> Result<()> {
    let scope = env.scope(id).await?;
    let before = chrono::Utc::now();
    let pod = SandboxPod::new("basic")
        .annotation("platform", "linux/amd64")
        .annotation("timeout", "1h");
    let stored = scope.admit(&pod).await?;
    let spec = stored.spec.as_ref().ok_or("no spec")?;
    check_init_containers(
        &stored,
        &["execd-installer"],
        "execd-installer is the only init container",
    )?;
    let volumes = spec.volumes.as_ref().ok_or("no volumes")?;
    check(
        volumes
            .iter()
            .any(|v| v.name == "opensandbox-bin" && v.empty_dir.is_some()),
        "opensandbox-bin emptyDir volume",
    )?;
    let main = &spec.containers[0];
    check(
        main.command.as_deref()
            == Some(
                &[
                    "/opt/opensandbox/bootstrap.sh".to_owned(),
                    "sleep".into(),
                    "3600".into(),
                ][..],
            ),
        "command wrapped by bootstrap.sh",
    )?;
    check(
        env_value(main, "EXECD") == Some("/opt/opensandbox/execd"),
        "EXECD env",
    )?;
    check(
        main.volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "opensandbox-bin" && m.mount_path == "/opt/opensandbox"),
        "bin volume mounted in main",
    )?;
    let selector = spec.node_selector.as_ref().ok_or("no nodeSelector")?;
    check(
        selector.get("kubernetes.io/os").map(String::as_str) == Some("linux")
            && selector.get("kubernetes.io/arch").map(String::as_str) == Some("amd64"),
        "platform nodeSelector",
    )?;
    let at = annotation(&stored, &format!("{P}/expires-at")).ok_or("no expires-at")?;
    let at = chrono::DateTime::parse_from_rfc3339(at)?;
    let delta = at.signed_duration_since(before).num_seconds();
    check(
        (3590..=3660).contains(&delta),
        format!("expires-at is about an hour ahead (got {delta}s)"),
    )?;
    Ok(())
}

pub async fn network_policy_gets_native_sidecar(env: &Env, id: &str) -> Result<()> {
    let scope = env.scope(id).await?;
    let pod = SandboxPod::new("egress").annotation("network-policy", POLICY);
    let stored = scope.admit(&pod).await?;
    check_init_containers(
        &stored,
        &["execd-installer", "egress"],
        "installer then egress",
    )?;
    let spec = stored.spec.as_ref().ok_or("no spec")?;
    let egress = &spec.init_containers.as_ref().ok_or("no init")?[1];
    check(
        egress.restart_policy.as_deref() == Some("Always"),
        "egress is a native sidecar",
    )?;
    let token =
        annotation(&stored, &format!("{P}/egress-auth-token")).ok_or("no token annotation")?;
    check(token.len() == 32, "token is 32 characters")?;
    let env_token = env_value(egress, "OPENSANDBOX_EGRESS_TOKEN");
    check(
        env_token == Some(token),
        "sidecar token matches the annotation",
    )?;
    let main = &spec.containers[0];
    check(
        !has_env(main, "OPENSANDBOX_EGRESS_TOKEN"),
        "token not in the main container",
    )?;
    let drops = dropped_capabilities(main.security_context.as_ref());
    check(
        drops.contains(&"NET_ADMIN".to_owned()),
        "main drops NET_ADMIN",
    )?;
    Ok(())
}

/// contract: egress.extra-env-order, egress.extra-env-transparent
///
/// A pod's `P/egress-env` is stored in its sidecar's
/// env, after the sidecar's own and in the annotation's order, with the
/// sandbox's id beside them; `MITMPROXY_TRANSPARENT: "true"` reaches the
/// main container too.
pub async fn egress_env_reaches_the_stored_sidecar(env: &Env, id: &str) -> Result<()> {
    let scope = env.scope(id).await?;
    let extra = r#"{"OPENSANDBOX_EGRESS_LOG_LEVEL": "debug", "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT": "true", "OPENSANDBOX_EGRESS_DENY_WEBHOOK": null}"#;
    let pod = SandboxPod::new("egress-env")
        .annotation("network-policy", POLICY)
        .annotation("egress-env", extra);
    let stored = scope.admit(&pod).await?;
    let spec = stored.spec.as_ref().ok_or("no spec")?;
    let sidecar = spec
        .init_containers
        .iter()
        .flatten()
        .find(|c| c.name == "egress")
        .ok_or("no sidecar")?;
    let env_of = |c: &k8s_openapi::api::core::v1::Container| -> Vec<(String, String)> {
        c.env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect()
    };
    let got = env_of(sidecar);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    check(
        names
            == [
                "OPENSANDBOX_EGRESS_RULES",
                "OPENSANDBOX_EGRESS_MODE",
                "OPENSANDBOX_EGRESS_SANDBOX_ID",
                "OPENSANDBOX_EGRESS_TOKEN",
                "OPENSANDBOX_EGRESS_LOG_LEVEL",
                "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT",
                "OPENSANDBOX_EGRESS_DENY_WEBHOOK",
            ],
        format!("the stored sidecar's env, in order: {names:?}"),
    )?;
    let value = |name: &str| got.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    check(
        value("OPENSANDBOX_EGRESS_SANDBOX_ID") == Some("egress-env"),
        "the sandbox id",
    )?;
    check(
        value("OPENSANDBOX_EGRESS_LOG_LEVEL") == Some("debug"),
        "the pod's log level",
    )?;
    check(
        value("OPENSANDBOX_EGRESS_DENY_WEBHOOK") == Some(""),
        "null is empty",
    )?;
    let main = env_of(&spec.containers[0]);
    check(
        main.iter()
            .any(|(n, v)| n == "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT" && v == "true"),
        "the main container learns its traffic is intercepted",
    )?;
    check(
        main.iter()
            .any(|(n, v)| n == "OPENSANDBOX_ID" && v == "egress-env"),
        "the main container's OPENSANDBOX_ID",
    )?;
    check(
        sidecar
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "opensandbox-bin" && m.mount_path == "/opt/opensandbox"),
        "the sidecar mounts the bin volume",
    )?;
    Ok(())
}

/// contract: answer.denial
pub async fn invalid_pod_is_denied(env: &Env, id: &str) -> Result<()> {
    let scope = env.scope(id).await?;
    let pod = SandboxPod::new("conflict")
        .annotation("platform", "linux/amd64")
        .spec_field(
            "affinity",
            json!({
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}
                ]}}
            }),
        )
        .pod();
    match scope.pods().create(&PostParams::default(), &pod).await {
        Ok(_) => Err("a conflicting pod was admitted".into()),
        Err(kube::Error::Api(e)) => check(
            e.message.contains(
                "platform conflict with template nodeAffinity: required node affinity does not allow requested platform 'linux/amd64'.",
            ),
            format!("the client sees the webhook's message (got: {})", e.message),
        ),
        Err(e) => Err(e.into()),
    }?;
    check(
        scope.pods().get_opt("conflict").await?.is_none(),
        "nothing stored",
    )
}

/// contract: select.dry-run
pub async fn dry_run_stores_nothing(env: &Env, id: &str) -> Result<()> {
    let scope = env.scope(id).await?;
    let pp = common::cluster::dry_run();
    let returned = scope
        .pods()
        .create(&pp, &SandboxPod::new("dry").pod())
        .await?;
    check(
        has_init(&returned, "execd-installer"),
        "dry-run response is mutated",
    )?;
    check(
        scope.pods().get_opt("dry").await?.is_none(),
        "dry-run stored nothing",
    )
}
