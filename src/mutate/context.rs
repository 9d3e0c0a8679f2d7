//! Everything the decision depends on besides the pod, injected so that
//! output is reproducible.

use chrono::{DateTime, Utc};

use crate::config::Config;

use super::intent::token::TokenSource;

/// Everything the decision depends on besides the pod.
pub struct Context<'a> {
    pub config: &'a Config,
    pub now: DateTime<Utc>,
    /// The webhook's own namespace, always excluded.
    pub own_namespace: Option<&'a str>,
    pub tokens: &'a dyn TokenSource,
}
