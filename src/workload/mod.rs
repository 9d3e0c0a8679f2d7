//! Workloads whose pod template the pod webhook will later judge (contract:
//! workload.judge): which kinds they are, where their template is, and the
//! pre-flight that judges a template as the pod webhook would judge its pods.
//!
//! Everything here is pure: an object in, a template or a verdict out.
//! Nothing is mutated; `inject` on manifests finds templates through the
//! same table.

mod judge;
mod kinds;
#[cfg(test)]
mod tests;

pub use judge::{Verdict, judge, judge_change, template_pod};
pub use kinds::{KINDS, Template, WorkloadError, WorkloadKind, find_template};
