//! The renewal policy and leader election: failover and release on SIGTERM.

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::Env;
use crate::harness::{
    HOME, LEASE, LEASE_SECONDS, P, Result, check, check_at, create_expiring, in_seconds, pp, repo,
    rfc3339, succeeded, wait_gone,
};

/// The chart's renewal policy, rendered by helm as the apiserver serves the
/// API, applied, exercised with a bad and a good renewal, and removed again:
/// it judges every sandbox pod's updates, not only this scenario's.
/// contract: controller.renewal-policy
pub(crate) async fn invalid_renewal_is_denied_by_the_policy(env: &Env, id: &str) -> Result<()> {
    let policies = Api::<ValidatingAdmissionPolicy>::all(env.client.clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(env.client.clone());
    let mut created = Vec::new();
    let outcome = async {
        let mut applied = 0;
        for doc in serde_yaml_ng::Deserializer::from_str(&render_renewal_policy()?) {
            let value = <Value as serde::Deserialize>::deserialize(doc)?;
            let kind = value["kind"].as_str().unwrap_or_default().to_owned();
            let name = value["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match kind.as_str() {
                "ValidatingAdmissionPolicy" => {
                    let p: ValidatingAdmissionPolicy = serde_json::from_value(value)?;
                    policies.create(&pp(), &p).await?;
                }
                "ValidatingAdmissionPolicyBinding" => {
                    let b: ValidatingAdmissionPolicyBinding = serde_json::from_value(value)?;
                    bindings.create(&pp(), &b).await?;
                }
                _ => continue,
            }
            created.push((kind, name));
            applied += 1;
        }
        check(
            applied == 2,
            format!("the chart rendered {applied} policy objects, expected 2"),
        )?;
        renewals_are_checked(env, id).await
    }
    .await;
    // The binding first: it names the policy.
    for (kind, name) in created.into_iter().rev() {
        let deleted = match kind.as_str() {
            "ValidatingAdmissionPolicy" => delete(&policies, &name).await,
            "ValidatingAdmissionPolicyBinding" => delete(&bindings, &name).await,
            _ => Ok(()),
        };
        if outcome.is_ok() {
            deleted.map_err(|e| format!("removing {kind} {name}: {e}"))?;
        }
    }
    outcome
}

/// Deletes object `name` of `api`.
async fn delete<K>(api: &Api<K>, name: &str) -> kube::Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.delete(name, &DeleteParams::default()).await.map(|_| ())
}

/// `templates/controller-renewal-policy.yaml` as `helm template` renders it.
fn render_renewal_policy() -> Result<String> {
    let helm = std::process::Command::new(repo().join("tests/e2e/cluster.sh"))
        .arg("helm")
        .output()?;
    check(helm.status.success(), "cluster.sh helm")?;
    let helm = String::from_utf8(helm.stdout)?.trim().to_owned();
    let out = std::process::Command::new(helm)
        .args(["template", "sbx"])
        .arg(repo().join("charts/sandbox-webhook"))
        .args([
            "--namespace",
            HOME,
            "--api-versions",
            "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
        ])
        .args(["--show-only", "templates/controller-renewal-policy.yaml"])
        .output()?;
    succeeded(&out, "helm template")?;
    Ok(String::from_utf8(out.stdout)?)
}

/// With the policy in place: a bad renewal denied, a good one allowed.
async fn renewals_are_checked(env: &Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let pods = env.pods(ns);
    let far = Utc::now() + TimeDelta::hours(1);
    create_expiring(&pods, "renew", far).await?;
    let set = |v: &str| json!({"metadata": {"annotations": {format!("{P}/expires-at"): v}}});
    // The policy is picked up asynchronously: retry until it denies.
    let deadline = Instant::now() + Duration::from_secs(30);
    let message = loop {
        match pods
            .patch(
                "renew",
                &PatchParams::default(),
                &Patch::Merge(&set("tomorrow")),
            )
            .await
        {
            Err(kube::Error::Api(e)) => break e.message,
            Ok(_) => {
                check(
                    Instant::now() < deadline,
                    "the invalid renewal was still allowed after 30s",
                )?;
                pods.patch(
                    "renew",
                    &PatchParams::default(),
                    &Patch::Merge(&set(&rfc3339(far))),
                )
                .await?;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e.into()),
        }
    };
    check(
        message.contains("RFC 3339"),
        format!("denial message: {message}"),
    )?;
    let later = rfc3339(far + TimeDelta::hours(1));
    pods.patch(
        "renew",
        &PatchParams::default(),
        &Patch::Merge(&set(&later)),
    )
    .await?;
    Ok(())
}

/// The killed leader, restarted, is ready (`restart` waits for its
/// `/readyz` 200) while it stands by.
/// contract: controller.leader, controller.admin
pub(crate) async fn standby_takes_over_when_the_leader_dies(env: &mut Env, id: &str) -> Result<()> {
    let ns = &env.namespace(id).await?;
    let leader = env.wait_leader(Duration::from_secs(10)).await?;
    let standby = 1 - leader;
    env.controllers[leader].kill();
    let killed = Instant::now();
    let pods = env.pods(ns);
    let at = in_seconds(1);
    let failover = create_expiring(&pods, "failover", at).await?;
    let d = env.diagnose(&failover, at)?;
    check_at(&d, "/expiry/action", "delete-pod")?;
    let limit = Duration::from_secs(LEASE_SECONDS + 3);
    while !env.controllers[standby].is_leader() {
        check(
            killed.elapsed() < limit,
            format!("the standby did not take over within {limit:?}"),
        )?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let takeover = killed.elapsed();
    let gone = wait_gone(&pods, "failover", Duration::from_secs(20)).await?;
    let acted = gone.duration_since(killed);
    println!(
        "    leader killed: standby leader after {} ms, expired pod removed {} ms after the kill (lease {LEASE_SECONDS} s)",
        takeover.as_millis(),
        acted.as_millis()
    );
    check(
        acted <= limit,
        format!("the standby acted {acted:?} after the kill (limit {limit:?})"),
    )?;
    env.controllers[leader].restart()?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    check(
        !env.controllers[leader].is_leader(),
        "the restarted replica stands by",
    )?;
    check(env.controllers[standby].running(), "the new leader runs")
}

/// contract: controller.leader
pub(crate) async fn sigterm_releases_the_lease(env: &mut Env, _id: &str) -> Result<()> {
    let leader = env.wait_leader(Duration::from_secs(10)).await?;
    let identity = env.controllers[leader].identity.clone();
    let status = env.controllers[leader].terminate()?;
    check(
        status.success(),
        format!("controller exit status on SIGTERM: {status}"),
    )?;
    let lease = Api::<Lease>::namespaced(env.client.clone(), HOME)
        .get(LEASE)
        .await?;
    let holder = lease.spec.and_then(|s| s.holder_identity);
    check(
        holder.as_deref() != Some(identity.as_str()),
        format!("the Lease is still held by {identity} after SIGTERM"),
    )?;
    let next = env
        .wait_leader(Duration::from_secs(LEASE_SECONDS + 3))
        .await?;
    check(next != leader, "the other replica leads")?;
    env.controllers[leader].restart()
}
