//! Prometheus metrics (served by the admin port in the text exposition
//! format of `prometheus-client`, which Prometheus scrapes natively).
//!
//! Label values are `&'static str`, so counting a request allocates nothing
//! once its label set exists.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::mutate::SkipReason;
use crate::review::Outcome;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub operation: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SkipLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

/// A reload counter; cheap to clone (the family is shared).
pub type ReloadCounter = Family<ResultLabels, Counter>;

pub const SUCCESS: ResultLabels = ResultLabels { result: "success" };
pub const FAILURE: ResultLabels = ResultLabels { result: "failure" };

/// Operation label for a request that failed before its operation was known.
pub const UNKNOWN_OPERATION: &str = "unknown";

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    skips: Family<SkipLabels, Counter>,
    duration: Histogram,
    in_flight: Gauge,
    panics: Counter,
    pub(crate) cert_reloads: ReloadCounter,
    pub(crate) config_reloads: ReloadCounter,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sandbox_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "admission_requests",
            "AdmissionReview requests answered, by operation and outcome (mutated, unchanged, skipped, denied, error)",
            requests.clone(),
        );
        let skips = Family::<SkipLabels, Counter>::default();
        registry.register(
            "admission_skips",
            "Requests allowed untouched, by skip reason",
            skips.clone(),
        );
        // 50µs .. ~0.8s: a review takes tens of microseconds; the top buckets
        // catch slow clients and stalls well before the apiserver's 10s.
        let duration = Histogram::new(exponential_buckets(0.000_05, 2.0, 15));
        registry.register_with_unit(
            "admission_duration",
            "Time from request start to response, including reading the body",
            Unit::Seconds,
            duration.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "requests_in_flight",
            "Admission requests being handled",
            in_flight.clone(),
        );
        let panics = Counter::default();
        registry.register(
            "panics",
            "Handler panics caught and answered with 500",
            panics.clone(),
        );
        let cert_reloads = ReloadCounter::default();
        registry.register(
            "cert_reloads",
            "Reloads of the serving certificate and key (and the client CA), by result",
            cert_reloads.clone(),
        );
        let config_reloads = ReloadCounter::default();
        registry.register(
            "config_reloads",
            "Reloads of the configuration file, by result",
            config_reloads.clone(),
        );

        // Every series that can appear exists from the start at 0, so a
        // dashboard (or a test) sees an increase rather than a new series.
        for reason in SkipReason::ALL {
            let _ = skips.get_or_create(&SkipLabels {
                reason: reason.as_str(),
            });
        }
        for family in [&cert_reloads, &config_reloads] {
            let _ = family.get_or_create(&SUCCESS);
            let _ = family.get_or_create(&FAILURE);
        }

        Metrics {
            registry,
            requests,
            skips,
            duration,
            in_flight,
            panics,
            cert_reloads,
            config_reloads,
        }
    }

    pub fn admission(&self, operation: &str, outcome: Outcome, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                operation: operation_label(operation),
                outcome: outcome.as_str(),
            })
            .inc();
        if let Outcome::Skipped(reason) = outcome {
            self.skips
                .get_or_create(&SkipLabels {
                    reason: reason.as_str(),
                })
                .inc();
        }
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// A request answered with an HTTP error instead of an AdmissionReview.
    pub fn admission_error(&self, elapsed: Option<Duration>) {
        self.requests
            .get_or_create(&RequestLabels {
                operation: UNKNOWN_OPERATION,
                outcome: "error",
            })
            .inc();
        if let Some(elapsed) = elapsed {
            self.duration.observe(elapsed.as_secs_f64());
        }
    }

    pub fn panicked(&self) {
        self.panics.inc();
        self.admission_error(None);
    }

    /// Counts a request as in flight until the guard is dropped (also when
    /// the handler panics and unwinds).
    pub fn in_flight(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::with_capacity(4096);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
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
fn operation_label(operation: &str) -> &'static str {
    match operation {
        "CREATE" => "CREATE",
        "UPDATE" => "UPDATE",
        "DELETE" => "DELETE",
        "CONNECT" => "CONNECT",
        _ => "other",
    }
}
