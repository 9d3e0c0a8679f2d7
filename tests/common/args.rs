//! Command-line arguments the binary's tests pass again and again, named
//! for what they make the binary do.

/// `serve`'s certificate flags naming files that do not exist: for a run
/// that must stop before it reads them.
pub const ABSENT_TLS: &[&str] = &["--tls-cert", "absent.crt", "--tls-key", "absent.key"];

/// Both listeners on an ephemeral loopback port, so runs never collide.
pub const LOOPBACK_PORTS: &[&str] = &["--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"];
