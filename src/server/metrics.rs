//! Prometheus metrics (served by the admin port in the text exposition
//! format of `prometheus-client`, which Prometheus scrapes natively).
//!
//! Label values are `&'static str`, so counting a request allocates nothing
//! once its label set exists.

use std::time::Duration;

use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::{MetricType, TypedMetric};
use tracing_appender::non_blocking::ErrorCounter;

use crate::admin::metrics::{Exposition, create_series, encode, label_sets, metric_fields};
use crate::mutate::{Risk, SkipReason};
use crate::review::Outcome;

label_sets! {
    RequestLabels { operation, outcome }
    /// A `reason` label: a skip reason, a handshake failure's, or why a
    /// certificate was refused.
    ReasonLabels { reason }
    /// A `risk` label of `server_completed_risks_total`.
    RiskLabels { risk }
    ListenerLabels { listener }
    BuildLabels { version, revision }
    ResultLabels { result }
}

/// The reasons a serving certificate is refused for its validity window
/// (`tls::TlsError::validity_reason`), so that each series of
/// `cert_validity_rejections_total` exists from the start.
pub(crate) const VALIDITY_REASONS: [&str; 2] = ["expired", "not_yet_valid"];

/// The label set of `handshake_failures`: every reason a failed handshake
/// is counted under (`handshake::handshake_failure_reason`, the handshake
/// timeout), so that each series exists from the start.
pub(crate) const HANDSHAKE_FAILURE_REASONS: [&str; 11] = [
    "timeout",
    "shed",
    "replayed",
    "eof",
    "peer_rejected_certificate",
    "alert",
    "no_client_certificate",
    "invalid_client_certificate",
    "incompatible",
    "protocol",
    "io",
];

/// The crate version and the git revision it was built from (`build.rs`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const REVISION: &str = env!("SANDBOX_WEBHOOK_REVISION");

/// A reload counter; cheap to clone (the family is shared).
pub type ReloadCounter = Family<ResultLabels, Counter>;

pub const SUCCESS: ResultLabels = ResultLabels { result: "success" };
pub const FAILURE: ResultLabels = ResultLabels { result: "failure" };

/// Operation label for a request that failed before its operation was known.
pub const UNKNOWN_OPERATION: &str = "unknown";

/// Which admission path a request came in on. The two share every metric;
/// `/validate`'s operation label values start with `validate/`, so that the
/// series of `/mutate` are the ones they always were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhook {
    Mutate,
    Validate,
}

metric_fields! {
    pub struct Metrics {
        requests: Family<RequestLabels, Counter> = "admission_requests",
            "AdmissionReview requests answered, by operation (validate/* for /validate) and outcome (mutated, unchanged, allowed, skipped, denied, error)";
        skips: Family<ReasonLabels, Counter> = "admission_skips",
            "Requests allowed untouched (pods, and workloads not judged), by skip reason";
        /// Pods OpenSandbox's server completed in a shape that could undo
        /// the policy of its sidecar (contract: coexist.risks).
        server_completed_risks: Family<RiskLabels, Counter> = "server_completed_risks",
            "Pods OpenSandbox's server completed, admitted as built in a shape that could undo the policy of their egress sidecar, by risk (host-network, privileged, capability)";
        // 50µs .. ~0.8s: a review takes tens of microseconds; the top buckets
        // catch slow clients and stalls well before the apiserver's 10s.
        duration: Histogram = "admission_duration" in Seconds
            built Histogram::new(exponential_buckets(0.000_05, 2.0, 18)),
            "Time from request start to response, including reading the body";
        in_flight: Gauge = "requests_in_flight",
            "Admission requests being handled";
        panics: Counter = "panics",
            "Handler panics caught and answered with 500";
        pub(crate) cert_reloads: ReloadCounter = "cert_reloads",
            "Reloads of the serving certificate and key (and the client CA), by result";
        /// Serving certificates refused at reload for their validity window.
        pub(crate) cert_validity_rejections: Family<ReasonLabels, Counter> = "cert_validity_rejections",
            "Serving certificates refused at reload because they are expired or not yet valid, by reason (expired, not_yet_valid); the previous certificate is still served";
        pub(crate) config_reloads: ReloadCounter = "config_reloads",
            "Reloads of the configuration file, by result";
        /// 1 while the configuration in use is the file's current content, 0
        /// after a reload was rejected (the previous configuration is kept).
        pub(crate) config_last_reload_success: Gauge = "config_last_reload_success",
            "1 if the last configuration load or reload succeeded, 0 if it was rejected and the previous configuration is still in use";
        /// `notAfter` of the serving certificate in use, in Unix seconds.
        pub(crate) certificate_expiry: Gauge = "certificate_expiry_timestamp" in Seconds,
            "Expiry (notAfter) of the serving certificate in use, as a Unix time";
        /// Request body bytes buffered right now (bounded by the body budget).
        pub(crate) body_buffered: Gauge = "request_body_buffered" in Bytes,
            "Request body bytes buffered right now, across connections (bounded by --max-buffered-bytes)";
        /// Answer bytes held until written (in the same budget as bodies).
        pub(crate) answer_buffered: Gauge = "answer_buffered" in Bytes,
            "Answer bytes held until the client takes them, across connections (in the budget of --max-buffered-bytes)";
        handshake_failures: Family<ReasonLabels, Counter> = "tls_handshake_failures",
            "TLS handshakes on the admission port that failed, by reason (peer_rejected_certificate is the symptom of a wrong caBundle)";
        open_connections: Family<ListenerLabels, Gauge> = "open_connections",
            "Connections open, by listener (admission, admin)";
        evictions: Family<ListenerLabels, Counter> = "connections_evicted",
            "Connections closed at the connection cap to make room for a new one, by listener";
        /// Log lines dropped because the log sink did not keep up.
        pub(crate) log_lines_dropped: LinesDropped = "log_lines_dropped",
            "Log lines dropped because the log sink (stderr) did not keep up and the queue in front of it was full";
        build_info: Family<BuildLabels, Gauge> = "build_info",
            "Always 1; the labels say which build is running";
    }
}

/// A counter read from the logging queue's own count at each scrape.
#[derive(Clone, Default)]
pub(crate) struct LinesDropped(Arc<OnceLock<ErrorCounter>>);

impl LinesDropped {
    /// Counts what `counter` counts from now on; set once.
    pub(crate) fn follow(&self, counter: ErrorCounter) {
        let _ = self.0.set(counter);
    }

    fn get(&self) -> u64 {
        self.0
            .get()
            .map_or(0, |c| u64::try_from(c.dropped_lines()).unwrap_or(u64::MAX))
    }
}

impl std::fmt::Debug for LinesDropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LinesDropped({})", self.get())
    }
}

impl TypedMetric for LinesDropped {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for LinesDropped {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

impl Metrics {
    pub fn new() -> Self {
        let metrics = Self::registered();
        let build = BuildLabels {
            version: VERSION,
            revision: REVISION,
        };
        metrics.build_info.get_or_create(&build).set(1);
        metrics.config_last_reload_success.set(1);
        metrics.create_every_series();
        metrics
    }

    /// Every series that can appear exists from the start at 0, so a
    /// dashboard (or a test) sees an increase rather than a new series.
    fn create_every_series(&self) {
        let skips = SkipReason::ALL.map(|r| ReasonLabels { reason: r.as_str() });
        create_series(&self.skips, skips);
        let risks = Risk::ALL.map(|r| RiskLabels { risk: r.as_str() });
        create_series(&self.server_completed_risks, risks);
        for family in [&self.cert_reloads, &self.config_reloads] {
            create_series(family, [SUCCESS, FAILURE]);
        }
        let reason = |reason| ReasonLabels { reason };
        create_series(&self.cert_validity_rejections, VALIDITY_REASONS.map(reason));
        create_series(
            &self.handshake_failures,
            HANDSHAKE_FAILURE_REASONS.map(reason),
        );
        let listeners = ["admission", "admin"].map(|listener| ListenerLabels { listener });
        create_series(&self.open_connections, listeners.clone());
        create_series(&self.evictions, listeners);
    }

    pub fn handshake_failed(&self, reason: &'static str) {
        self.handshake_failures
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    /// The open-connections gauge of one listener.
    pub fn open_connections(&self, listener: &'static str) -> Gauge {
        self.open_connections
            .get_or_create(&ListenerLabels { listener })
            .clone()
    }

    pub fn evicted(&self, listener: &'static str) {
        self.evictions
            .get_or_create(&ListenerLabels { listener })
            .inc();
    }

    pub fn admission(
        &self,
        webhook: Webhook,
        operation: &str,
        outcome: Outcome,
        elapsed: Duration,
    ) {
        self.requests
            .get_or_create(&RequestLabels {
                operation: operation_label(webhook, operation),
                outcome: outcome.as_str(),
            })
            .inc();
        if let Outcome::Skipped(reason) = outcome {
            self.skips
                .get_or_create(&ReasonLabels {
                    reason: reason.as_str(),
                })
                .inc();
        }
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// A pod OpenSandbox's server completed in a shape that could undo its
    /// sidecar's policy.
    pub fn server_completed_risk(&self, risk: Risk) {
        self.server_completed_risks
            .get_or_create(&RiskLabels {
                risk: risk.as_str(),
            })
            .inc();
    }

    /// A request answered with an HTTP error instead of an `AdmissionReview`;
    /// `None` when the path is not known either (a panic).
    pub fn admission_error(&self, webhook: Option<Webhook>, elapsed: Option<Duration>) {
        let operation = match webhook {
            Some(Webhook::Validate) => "validate/unknown",
            Some(Webhook::Mutate) | None => UNKNOWN_OPERATION,
        };
        self.requests
            .get_or_create(&RequestLabels {
                operation,
                outcome: "error",
            })
            .inc();
        if let Some(elapsed) = elapsed {
            self.duration.observe(elapsed.as_secs_f64());
        }
    }

    pub fn panicked(&self) {
        self.panics.inc();
        self.admission_error(None, None);
    }

    /// Counts a request as in flight until the guard is dropped (also when
    /// the handler panics and unwinds).
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Exposition for Metrics {
    fn encode(&self) -> Result<String, std::fmt::Error> {
        encode(&self.registry, 4096)
    }
}

pub struct InFlight<'a>(&'a Gauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Maps the request's operation to a fixed label set, so a client cannot
/// create unbounded series.
fn operation_label(webhook: Webhook, operation: &str) -> &'static str {
    match (webhook, operation) {
        (Webhook::Mutate, "CREATE") => "CREATE",
        (Webhook::Mutate, "UPDATE") => "UPDATE",
        (Webhook::Mutate, "DELETE") => "DELETE",
        (Webhook::Mutate, "CONNECT") => "CONNECT",
        (Webhook::Mutate, _) => "other",
        (Webhook::Validate, "CREATE") => "validate/CREATE",
        (Webhook::Validate, "UPDATE") => "validate/UPDATE",
        (Webhook::Validate, "DELETE") => "validate/DELETE",
        (Webhook::Validate, "CONNECT") => "validate/CONNECT",
        (Webhook::Validate, _) => "validate/other",
    }
}
