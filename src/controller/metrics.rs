//! The controller's Prometheus metrics (contract: controller.metrics), served
//! on its admin port.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::memory;
use crate::admin::metrics::{Exposition, create_series, encode, label_sets, metric_fields};
use crate::lifecycle::DriftState;

label_sets! {
    ActionLabels { action }
    OperationLabels { operation }
    StateLabels { state }
}

/// Every `action` label of `sandbox_webhook_expired_total`.
pub const EXPIRED_ACTIONS: [&str; 5] = [
    "deleted-pod",
    "deleted-owner",
    "shutdown-owner",
    "suspended-owner",
    "left-owned",
];

/// Every `operation` label of `sandbox_webhook_controller_api_errors_total`.
pub const OPERATIONS: [&str; 7] = [
    "delete-pod",
    "delete-owner",
    "shutdown-owner",
    "suspend-owner",
    "get-pod",
    "patch-status",
    "create-event",
];

metric_fields! {
    pub struct ControllerMetrics {
        expired: Family<ActionLabels, Counter> = "expired",
            "Expired sandboxes handled, by action (deleted-pod, deleted-owner, shutdown-owner, suspended-owner, left-owned)";
        unschedulable: Counter = "platform_unschedulable",
            "Pending sandboxes reported as unschedulable because of their platform";
        leader: Gauge = "controller_leader",
            "1 while this controller holds the Lease and acts, else 0";
        cached: Gauge = "controller_cached_pods",
            "Sandbox pods in the controller's cache (0 on a standby); its memory grows with this";
        timers: Gauge = "controller_timers",
            "Wake-ups armed: one per cached sandbox whose expiry (or a retried write) is still ahead (0 on a standby)";
        resident: Gauge = "controller_resident_memory_bytes",
            "Resident memory of this controller process (read at each scrape)";
        limit: Gauge = "controller_memory_limit_bytes",
            "Memory limit of this controller's container (its cgroup), 0 when it has none";
        api_errors: Family<OperationLabels, Counter> = "controller_api_errors",
            "Kubernetes API calls that failed and are retried, by operation";
        drift: Family<StateLabels, Gauge> = "drift_pods",
            "Watched sandbox pods by how they stand against what this release injects: current, stale, not-injected, server-completed, opted-out (0 on a standby)";
    }
}

impl ControllerMetrics {
    pub fn new() -> Self {
        let metrics = Self::registered();
        // Every series exists from the start at 0, so a rate or a test sees
        // an increase rather than a new series.
        create_series(
            &metrics.expired,
            EXPIRED_ACTIONS.map(|action| ActionLabels { action }),
        );
        let operations = OPERATIONS.map(|operation| OperationLabels { operation });
        create_series(&metrics.api_errors, operations);
        create_series(
            &metrics.drift,
            DriftState::ALL.map(|s| StateLabels { state: s.as_str() }),
        );
        metrics
    }

    /// The sandboxes per drift state, in `DriftState::ALL`'s order.
    pub fn set_drift(&self, counts: [usize; DriftState::ALL.len()]) {
        for (state, n) in DriftState::ALL.iter().zip(counts) {
            self.drift
                .get_or_create(&StateLabels {
                    state: state.as_str(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    pub fn expired(&self, action: &'static str) {
        self.expired.get_or_create(&ActionLabels { action }).inc();
    }

    pub fn unschedulable(&self) {
        self.unschedulable.inc();
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    pub fn set_cached(&self, n: usize) {
        self.cached.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn set_timers(&self, n: usize) {
        self.timers.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn api_error(&self, operation: &'static str) {
        self.api_errors
            .get_or_create(&OperationLabels { operation })
            .inc();
    }
}

impl Exposition for ControllerMetrics {
    fn encode(&self) -> Result<String, std::fmt::Error> {
        let bytes = |b: Option<u64>| i64::try_from(b.unwrap_or(0)).unwrap_or(i64::MAX);
        self.resident.set(bytes(memory::resident_bytes()));
        self.limit.set(bytes(memory::limit_bytes()));
        encode(&self.registry, 2048)
    }
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_names() {
        let m = ControllerMetrics::new();
        m.expired("deleted-owner");
        m.unschedulable();
        m.set_leader(true);
        m.set_timers(3);
        let text = m.encode().unwrap();
        assert!(
            text.contains("sandbox_webhook_expired_total{action=\"deleted-owner\"} 1"),
            "{text}"
        );
        assert!(text.contains("sandbox_webhook_expired_total{action=\"left-owned\"} 0"));
        assert!(text.contains("sandbox_webhook_platform_unschedulable_total 1"));
        assert!(text.contains("sandbox_webhook_controller_leader 1"));
        assert!(text.contains("sandbox_webhook_controller_timers 3"));
        assert!(text.contains("sandbox_webhook_controller_cached_pods 0"));
        m.set_drift([3, 2, 1, 0, 4]);
        let text = m.encode().unwrap();
        for (state, n) in [
            ("current", 3),
            ("stale", 2),
            ("not-injected", 1),
            ("server-completed", 0),
            ("opted-out", 4),
        ] {
            assert!(
                text.contains(&format!(
                    "sandbox_webhook_drift_pods{{state=\"{state}\"}} {n}"
                )),
                "{text}"
            );
        }
        let resident = text
            .lines()
            .find_map(|l| l.strip_prefix("sandbox_webhook_controller_resident_memory_bytes "))
            .and_then(|v| v.parse::<i64>().ok());
        assert!(resident.is_some_and(|r| r > 1 << 20), "{text}");
        assert!(text.contains("sandbox_webhook_controller_memory_limit_bytes "));
    }
}
