//! `serve --dev`: throwaway certificates for a webhook on this machine.
//!
//! A dev webhook may already be running from the same directory, serving
//! `certs/dev` (and a local apiserver may trust its CA). So certificates that
//! are still good are served again as they are, and new ones are written
//! only once this process holds its ports: a second `serve --dev` that cannot
//! bind leaves the first one's files alone.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use crate::certs;

/// Days a leaf is issued for, and the least it must have left to be reused.
const DAYS: u32 = 30;
const MIN_DAYS_LEFT: u32 = 1;

pub const ADDR: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8443);
pub const ADMIN_ADDR: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// Dev mode listens on loopback only: its CA key was never kept secret and
/// its certificate names only localhost.
pub fn check_loopback(addrs: &[(&str, SocketAddr)]) -> Result<(), String> {
    match addrs.iter().find(|(_, addr)| !addr.ip().is_loopback()) {
        None => Ok(()),
        Some((flag, addr)) => Err(format!(
            "--dev listens on loopback only, and {flag} {addr} is not a loopback address \
             (serve --tls-cert F --tls-key F to listen there)"
        )),
    }
}

/// Makes sure `dir` holds a usable bundle for the local names: the one
/// already there if it still verifies, a new one otherwise. Call it only
/// with the ports bound.
pub fn ensure_certs(dir: &Path) -> Result<(), certs::CertError> {
    let (dns, ips) = super::certs::local_names();
    let ca = dir.join("ca.crt");
    match certs::check_written(dir, &dns, &ips, MIN_DAYS_LEFT) {
        Ok(()) => {
            tracing::info!(ca = %ca.display(), "dev mode: serving the certificates already in {}", dir.display());
        }
        Err(why) => {
            tracing::info!(reason = %why, "dev mode: writing new certificates");
            certs::generate(&dns, &ips, DAYS)?.write(dir)?;
            tracing::info!(ca = %ca.display(), "dev mode: wrote a CA and a certificate for localhost, 127.0.0.1 and ::1");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_pass() {
        assert!(check_loopback(&[("--addr", ADDR), ("--admin-addr", ADMIN_ADDR)]).is_ok());
        assert!(check_loopback(&[("--addr", "[::1]:9443".parse().unwrap())]).is_ok());
        let err = check_loopback(&[
            ("--addr", ADDR),
            ("--admin-addr", "[::]:8080".parse().unwrap()),
        ])
        .unwrap_err();
        assert!(
            err.contains("--admin-addr [::]:8080 is not a loopback address"),
            "{err}"
        );
        assert!(check_loopback(&[("--addr", "0.0.0.0:8443".parse().unwrap())]).is_err());
    }
}
