//! The core through its entry point, for what spans its modules.

mod guard;
mod layout;
mod server;
