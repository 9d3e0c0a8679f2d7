//! The admin plumbing that `serve` and the controller share: the metrics
//! registry and its exposition, the probe routes (`/livez`, `/readyz`,
//! `/metrics`) and the readiness they answer from. Each process serves its
//! own admin port (`server::admin`, `controller::admin`) on these.

pub(crate) mod metrics;
pub(crate) mod probes;
pub(crate) mod readiness;

pub(crate) use probes::{RouteError, probes};
pub(crate) use readiness::Readiness;
