//! The lifecycle controller's decisions (contract: diagnose.same-plan): a pod,
//! the configuration and the clock in; what to do with it out, a write as
//! data (what it writes, what it reads again first, the Event it records).
//! Nothing here does I/O: `crate::controller` is the thin Kubernetes layer
//! that carries these out, and `sandbox-webhook diagnose` prints the same
//! decisions.

mod decide;
mod diagnose;
pub mod drift;
pub(crate) mod expiry;
mod facts;
mod ids;
mod plan;
pub(crate) mod platform;
mod pod;
mod unschedulable;
mod write;

pub use decide::{Action, Decision, Due, History, decide, due};
pub use diagnose::{
    Diagnosis, ExpiryReport, InjectionReport, PlatformReport, diagnose, diagnose_all,
};
pub use drift::{Drift, DriftState};
pub use expiry::{ExpiryAction, ExpiryPlan, Removal};
pub use facts::{Intern, Owner, PodFacts};
pub use ids::{ExpiresAt, Uid, Version};
pub use plan::{
    Plan, PlatformAction, Unwatched, is_audited, is_cached, is_watched, plan, unwatched,
};
pub use platform::{PlatformReading, condition_type};
pub use pod::{RawJson, SandboxPod, SpecFields, StatusFields};
pub use write::{Event, EventType, Mark, Recheck, RemovalEvent, Steps, Write, whole_seconds_up};

#[cfg(test)]
mod tests;
