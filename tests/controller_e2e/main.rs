//! contract: controller.leader, controller.renewal-policy, diagnose.same-plan (and each scenario
//! its own)
//!
//! End-to-end proof of the lifecycle controller against
//! a real kube-apiserver and etcd (`tests/e2e/cluster.sh`): two
//! `sandbox-webhook controller` replicas share a Lease; every assertion is
//! on what the apiserver stores. There is no scheduler or kubelet, so a
//! scheduling failure is written to the status subresource as kube-scheduler
//! writes it. Each scenario uses its own namespace, `e2e-ctl-<name>`, and
//! leaves the replicas as it found them, so they pass in any order
//! (`tests/common/suite.rs`: name filters, `E2E_ORDER`); it prints
//! `N passed, M failed`.

mod expiry;
mod harness;
mod leadership;
mod never_early;
mod platform;
mod sandbox_owner;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use chrono::Utc;
use common::cluster::{the_only, wait_for};
use common::metrics::check_counted_once;
use common::processes::Plane;
use common::suite;
use harness::{
    Cluster, Controller, HOME, LEASE_SECONDS, Result, check, diagnose, events, namespace,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::Api;
use serde_json::Value;

pub(crate) const SCHEDULER_MESSAGE: &str = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
pub(crate) const CAPACITY_MESSAGE: &str = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";

suite::scenarios![
    Env;
    expiry::expired_pod_is_deleted_on_time,
    expiry::renewed_pod_survives_its_old_time,
    expiry::manual_cleanup_and_invalid_stay,
    expiry::job_owner_is_deleted,
    expiry::replicaset_owner_is_left_with_a_warning,
    sandbox_owner::v1beta1_sandbox_owner_is_told_to_shut_down,
    sandbox_owner::v1beta1_sandbox_owner_is_suspended,
    sandbox_owner::v1beta1_sandbox_owner_is_deleted,
    expiry::recreated_pod_is_not_hit_by_a_stale_decision,
    never_early::never_removed_before_its_time,
    platform::unschedulable_platform_is_reported,
    leadership::invalid_renewal_is_denied_by_the_policy,
    leadership::standby_takes_over_when_the_leader_dies,
    leadership::sigterm_releases_the_lease,
    platform::delete_unschedulable_removes_the_pod,
];

pub(crate) struct Env {
    client: Client,
    work: PathBuf,
    config: PathBuf,
    controllers: Vec<Controller>,
}

impl Env {
    pub(crate) fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub(crate) fn leader(&self) -> Result<&Controller> {
        let leaders: Vec<_> = self.controllers.iter().filter(|c| c.is_leader()).collect();
        the_only(leaders, "leaders")
    }

    pub(crate) async fn wait_leader(&self, timeout: Duration) -> Result<usize> {
        wait_for("a leader", timeout, async || {
            Ok(self.controllers.iter().position(Controller::is_leader))
        })
        .await
    }

    /// Waits up to three leases for one replica to lead: what a fresh
    /// start of the replicas takes at most.
    async fn led_after_start(&self) -> Result<()> {
        self.wait_leader(Duration::from_secs(LEASE_SECONDS * 3))
            .await
            .map(|_| ())
    }

    /// Writes `config` and restarts both replicas with it (a replica reads
    /// the file at start).
    pub(crate) async fn reconfigure(&mut self, config: &str) -> Result<()> {
        std::fs::write(&self.config, config)?;
        for c in &mut self.controllers {
            c.kill();
        }
        for c in &mut self.controllers {
            c.restart()?;
        }
        self.led_after_start().await
    }

    /// The leader's `sandbox_webhook_expired_total` for `action`.
    pub(crate) fn expired_total(&self, action: &str) -> Result<u64> {
        self.leader()?
            .metric("sandbox_webhook_expired_total", &[("action", action)])
    }

    /// An error unless the leader counted exactly one more expiry with
    /// `action` than `before`.
    pub(crate) fn expired_once_more(&self, action: &str, before: u64) -> Result<()> {
        let after = self.expired_total(action)?;
        check_counted_once(&format!("expired_total{{{action}}}"), before, after)
    }

    pub(crate) fn diagnose(&self, pod: &Pod, now: chrono::DateTime<Utc>) -> Result<Value> {
        diagnose(pod, now, &self.config, &self.work)
    }

    /// The one Event in `ns` about `pod` with `reason` (and, if given, of
    /// `type_`: Normal, Warning), waiting up to `secs` seconds for it; an
    /// error when there is none, more than one, or one of another type.
    pub(crate) async fn event(
        &self,
        ns: &str,
        pod: &str,
        reason: &str,
        type_: Option<&str>,
        secs: u64,
    ) -> Result<Event> {
        let timeout = Duration::from_secs(secs);
        let found = events(&self.client, ns, pod, reason, 1, timeout).await?;
        let event = the_only(found, &format!("{reason} events about {pod}"))?;
        if let Some(want) = type_ {
            check(
                event.type_.as_deref() == Some(want),
                format!(
                    "the {reason} Event about {pod} is {:?}, not {want}",
                    event.type_
                ),
            )?;
        }
        Ok(event)
    }

    /// The one `SandboxExpired` Event about `pod` (of `type_`, if given),
    /// waiting up to 10 s for it; an error `{what}: {note}` unless its note
    /// holds each of `says`.
    pub(crate) async fn expired_event_says(
        &self,
        ns: &str,
        pod: &str,
        type_: Option<&str>,
        says: &[&str],
        what: &str,
    ) -> Result<()> {
        let event = self.event(ns, pod, "SandboxExpired", type_, 10).await?;
        let note = event.note.unwrap_or_default();
        check(
            says.iter().all(|s| note.contains(s)),
            format!("{what}: {note}"),
        )
    }

    /// Creates scenario `id`'s own namespace, `e2e-ctl-<id>`; its name.
    pub(crate) async fn namespace(&self, id: &str) -> Result<String> {
        let name = format!("e2e-ctl-{}", id.replace('_', "-"));
        namespace(&self.client, &name).await?;
        Ok(name)
    }

    /// After a scenario: both replicas running with the empty configuration
    /// file and one of them leading, whatever the scenario did to them.
    async fn restore(&mut self) -> Result<()> {
        if std::fs::read_to_string(&self.config)? != EMPTY_CONFIG {
            return self.reconfigure(EMPTY_CONFIG).await;
        }
        for c in &mut self.controllers {
            if !c.running() {
                c.restart()?;
            }
        }
        self.led_after_start().await
    }
}

/// The configuration file the replicas start with.
const EMPTY_CONFIG: &str = "{}\n";

async fn setup(work: &Path, cluster: &Cluster) -> Result<Env> {
    let client = cluster.client().await?;
    namespace(&client, HOME).await?;
    let config = work.join("config.yaml");
    std::fs::write(&config, EMPTY_CONFIG)?;
    let controllers = vec![
        Controller::start("ctl-a", &cluster.kubeconfig(), &config, work)?,
        Controller::start("ctl-b", &cluster.kubeconfig(), &config, work)?,
    ];
    let env = Env {
        client,
        work: work.to_owned(),
        config,
        controllers,
    };
    env.led_after_start().await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    env.leader()?;
    Ok(env)
}

/// The replicas are restored after each scenario.
fn main() -> ExitCode {
    let restore = async |env: &mut Env, _: &'static str| env.restore().await;
    suite::main(
        "controller e2e",
        SCENARIOS,
        Plane::Bare,
        setup,
        run_scenario,
        ("restoring the replicas", restore),
    )
}
