//! Injecting: what the webhook adds to a pod (execd's installer and
//! volume, the egress sidecar, the main container's changes, the expiry
//! annotation, the service account token setting), what it finds already
//! injected, and where each addition goes.

pub(crate) mod automount;
pub(crate) mod drops;
pub(crate) mod egress;
pub(crate) mod execd;
pub(crate) mod expiry;
pub(crate) mod guard;
pub(crate) mod held;
pub(crate) mod kept;
pub(crate) mod layout;
pub(crate) mod owned;
mod probe;
pub(crate) mod record;
pub(crate) mod run_as;
pub(crate) mod same;
pub(crate) mod sandbox;
pub(crate) mod server;
pub(crate) mod upstream;
