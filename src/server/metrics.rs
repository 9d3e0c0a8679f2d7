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
pub struct ReasonLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ListenerLabels {
    pub listener: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    pub version: &'static str,
    pub revision: &'static str,
}

/// The crate version and the git revision it was built from (`build.rs`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const REVISION: &str = env!("SANDBOX_WEBHOOK_REVISION");

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

/// Which admission path a request came in on. The two share every metric;
/// `/validate`'s operation label values start with `validate/`, so that the
/// series of `/mutate` are the ones they always were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhook {
    Mutate,
    Validate,
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    skips: Family<SkipLabels, Counter>,
    duration: Histogram,
    in_flight: Gauge,
    panics: Counter,
    pub(crate) cert_reloads: ReloadCounter,
    pub(crate) config_reloads: ReloadCounter,
    /// 1 while the configuration in use is the file's current content, 0
    /// after a reload was rejected (the previous configuration is kept).
    pub(crate) config_last_reload_success: Gauge,
    /// `notAfter` of the serving certificate in use, in Unix seconds.
    pub(crate) certificate_expiry: Gauge,
    /// Request body bytes buffered right now (bounded by the body budget).
    pub(crate) body_buffered: Gauge,
    handshake_failures: Family<ReasonLabels, Counter>,
    open_connections: Family<ListenerLabels, Gauge>,
    evictions: Family<ListenerLabels, Counter>,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sandbox_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "admission_requests",
            "AdmissionReview requests answered, by operation (validate/* for /validate) and outcome (mutated, unchanged, allowed, skipped, denied, error)",
            requests.clone(),
        );
        let skips = Family::<SkipLabels, Counter>::default();
        registry.register(
            "admission_skips",
            "Requests allowed untouched (pods, and workloads not judged), by skip reason",
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
        let config_last_reload_success = Gauge::default();
        registry.register(
            "config_last_reload_success",
            "1 if the last configuration load or reload succeeded, 0 if it was rejected and the previous configuration is still in use",
            config_last_reload_success.clone(),
        );
        config_last_reload_success.set(1);
        let certificate_expiry = Gauge::default();
        registry.register_with_unit(
            "certificate_expiry_timestamp",
            "Expiry (notAfter) of the serving certificate in use, as a Unix time",
            Unit::Seconds,
            certificate_expiry.clone(),
        );
        let body_buffered = Gauge::default();
        registry.register_with_unit(
            "request_body_buffered",
            "Request body bytes buffered right now, across connections (bounded by --max-buffered-bytes)",
            Unit::Bytes,
            body_buffered.clone(),
        );
        let handshake_failures = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "tls_handshake_failures",
            "TLS handshakes on the admission port that failed, by reason (peer_rejected_certificate is the symptom of a wrong caBundle)",
            handshake_failures.clone(),
        );
        let open_connections = Family::<ListenerLabels, Gauge>::default();
        registry.register(
            "open_connections",
            "Connections open, by listener (admission, admin)",
            open_connections.clone(),
        );
        let evictions = Family::<ListenerLabels, Counter>::default();
        registry.register(
            "connections_evicted",
            "Connections closed at the connection cap to make room for a new one, by listener",
            evictions.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        registry.register(
            "build_info",
            "Always 1; the labels say which build is running",
            build_info.clone(),
        );
        build_info
            .get_or_create(&BuildLabels {
                version: VERSION,
                revision: REVISION,
            })
            .set(1);

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
        for reason in crate::server::conn::HANDSHAKE_FAILURE_REASONS {
            let _ = handshake_failures.get_or_create(&ReasonLabels { reason });
        }
        for listener in ["admission", "admin"] {
            let labels = ListenerLabels { listener };
            let _ = open_connections.get_or_create(&labels);
            let _ = evictions.get_or_create(&labels);
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
            config_last_reload_success,
            certificate_expiry,
            body_buffered,
            handshake_failures,
            open_connections,
            evictions,
        }
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
                .get_or_create(&SkipLabels {
                    reason: reason.as_str(),
                })
                .inc();
        }
        self.duration.observe(elapsed.as_secs_f64());
    }

    /// A request answered with an HTTP error instead of an AdmissionReview;
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
