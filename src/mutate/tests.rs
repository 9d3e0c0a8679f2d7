//! The core through its entry point, for what spans its modules.

mod layout;
mod server;
