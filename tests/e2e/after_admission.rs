//! contract: select.pod-update, egress.update-images, egress.ephemeral, select.webhook-configuration
//!
//! After admission, through a real apiserver with the chart's rules (UPDATE
//! of pods and of `pods/ephemeralcontainers`, `failurePolicy: Fail`): the
//! webhook's containers keep their images, an ephemeral container beside a
//! policy is held to the rules of any other container, and what passes is
//! stored without `NET_RAW` or `NET_ADMIN`. Everything else a sandbox's
//! owner updates (labels, the main container's image) goes through.

use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

use crate::Result;
use crate::env::{Env, check, init_names};
use common::pods::{SandboxPod, dropped_capabilities, first_container};

const POLICY: &str =
    r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;

/// The apiserver's refusal of `result` (its code and message), or an error
/// saying what it stored instead.
fn refused<T>(result: kube::Result<T>, what: &str) -> Result<(u16, String)> {
    match result {
        Err(kube::Error::Api(e)) => Ok((e.code, e.message)),
        Err(e) => Err(format!("{what}: {e}").into()),
        Ok(_) => Err(format!("{what}: the apiserver stored it").into()),
    }
}

/// contract: select.pod-update, egress.update-images, egress.ephemeral,
/// select.webhook-configuration
pub async fn the_guarantee_holds_after_admission(env: &Env, id: &str) -> Result<()> {
    let scope = env.scope(id).await?;
    let pods = scope.pods();
    let stored = scope
        .admit(&SandboxPod::new("later").annotation("network-policy", POLICY))
        .await?;
    check(
        init_names(&stored).get(1) == Some(&"egress"),
        "the sidecar is init container 1",
    )?;

    // An injected container's image: refused (images are mutable).
    let swap = json!([{"op": "replace", "path": "/spec/initContainers/1/image", "value": "attacker.example/egress:latest"}]);
    let (code, message) = refused(
        pods.patch(
            "later",
            &PatchParams::default(),
            &Patch::Json::<Value>(serde_json::from_value(swap)?),
        )
        .await,
        "the sidecar's image swapped",
    )?;
    check(
        code == 403 && message.contains("init container 'egress' was injected by the webhook"),
        format!("the swap was refused with {code}: {message}"),
    )?;
    println!("    UPDATE of the sidecar's image: {code} {message}");

    // The sandbox's own image, and a label: stored.
    let own = json!({"metadata": {"labels": {"team": "a"}},
                     "spec": {"containers": [{"name": "sandbox", "image": "busybox:1.37"}]}});
    let updated = pods
        .patch("later", &PatchParams::default(), &Patch::Strategic(&own))
        .await?;
    let main_image = first_container(&updated).and_then(|c| c.image.clone());
    check(
        main_image.as_deref() == Some("busybox:1.37"),
        format!("the main container's image is {main_image:?}"),
    )?;

    // Ephemeral containers, as `kubectl debug` adds them (with security
    // context `sc`, unless null).
    let debug = async |name: &str, sc: Value| {
        let mut c = json!({"name": name, "image": "busybox:1.36", "stdin": true,
                           "targetContainerName": "sandbox"});
        if !sc.is_null() {
            c["securityContext"] = sc;
        }
        let patch = json!({"spec": {"ephemeralContainers": [c]}});
        pods.patch_ephemeral_containers("later", &PatchParams::default(), &Patch::Strategic(patch))
            .await
    };
    for (name, sc, says) in [
        ("privileged", json!({"privileged": true}), "is privileged"),
        (
            "netadmin",
            json!({"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}}),
            "NET_ADMIN",
        ),
    ] {
        let (code, message) = refused(debug(name, sc).await, name)?;
        check(
            code == 403
                && message.contains(&format!("ephemeral container '{name}'"))
                && message.contains(says),
            format!("ephemeral container {name} was refused with {code}: {message}"),
        )?;
    }
    let debugged = debug("debugger", Value::Null).await?;
    let ephemeral = debugged
        .spec
        .as_ref()
        .and_then(|s| s.ephemeral_containers.as_ref())
        .and_then(|e| e.iter().find(|c| c.name == "debugger"))
        .ok_or("the debugger is not stored")?;
    let drop = dropped_capabilities(ephemeral.security_context.as_ref());
    check(
        drop == ["NET_ADMIN", "NET_RAW"],
        format!("the stored ephemeral container drops {drop:?}"),
    )?;
    println!(
        "    ephemeral containers: privileged and NET_ADMIN refused; the default one stored dropping {drop:?}"
    );
    Ok(())
}
