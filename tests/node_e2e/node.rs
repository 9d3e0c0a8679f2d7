//! What the host sees of the real node: its containers' processes (through
//! the node's `ctr` and /proc, as `tests/image/run.sh` reads a podman
//! container's), and what pods serve on the node's bridge, the only
//! non-loopback addresses a test reaches.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use crate::harness::{Env, Result};
use common::pods::container_status;
use common::wire;

/// The containerd id of `container` (an init container or not) of `p`.
pub fn container_id(p: &Pod, container: &str) -> Option<String> {
    container_status(p, container)?
        .container_id
        .as_deref()?
        .strip_prefix("containerd://")
        .map(str::to_owned)
}

/// The node's running tasks: container id to host PID (`ctr tasks ls`).
pub fn tasks(env: &Env) -> Result<HashMap<String, u32>> {
    let out = env.ctr(&["tasks", "ls"])?;
    Ok(out
        .lines()
        .skip(1)
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let id = cols.next()?;
            let pid = cols.next()?.parse().ok()?;
            (cols.next() == Some("RUNNING")).then(|| (id.to_owned(), pid))
        })
        .collect())
}

/// The host PID of `container` of `p`, a running task of the node.
pub fn pid_of(env: &Env, p: &Pod, container: &str) -> Result<u32> {
    let name = p.metadata.name.as_deref().unwrap_or("?");
    let id = container_id(p, container).ok_or(format!("{name}/{container} has no container id"))?;
    tasks(env)?.get(&id).copied().ok_or_else(|| {
        format!("{name}/{container} ({id}) is not a running task of the node").into()
    })
}

/// One field of /proc/PID/status, whitespace collapsed (`Uid`, `CapEff`...).
pub fn status_field(pid: u32, key: &str) -> Result<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}:")))
        .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .ok_or_else(|| format!("/proc/{pid}/status has no {key}").into())
}

/// The first mount option of the process's root filesystem (`ro` or `rw`).
pub fn root_mount(pid: u32) -> Result<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))?;
    text.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f.get(4) == Some(&"/")).then(|| f.get(5).and_then(|o| o.split(',').next()))?
        })
        .map(str::to_owned)
        .ok_or_else(|| format!("/proc/{pid}/mountinfo has no root mount").into())
}

/// Whether capability `bit` is in the hex mask `hex` (a `CapEff` value).
pub fn has_capability(hex: &str, bit: u32) -> Result<bool> {
    let mask = u64::from_str_radix(hex.trim(), 16).map_err(|e| format!("CapEff {hex:?}: {e}"))?;
    Ok(mask & (1 << bit) != 0)
}

/// `CAP_NET_ADMIN`'s bit (`linux/capability.h`).
pub const NET_ADMIN: u32 = 12;
/// CAP_NET_RAW's bit.
pub const NET_RAW: u32 = 13;

/// The pod's IP on the node's bridge.
pub fn pod_ip(p: &Pod) -> Result<String> {
    p.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .ok_or_else(|| format!("{} has no IP", p.metadata.name.as_deref().unwrap_or("?")).into())
}

/// A plain-HTTP GET to a pod on the bridge, with `headers`; status and body.
pub fn http_get(
    ip: &str,
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<(u16, String)> {
    wire::get_with(&format!("{ip}:{port}"), path, headers)
}

/// What the egress sidecar's probe path `<ip>:18080/healthz` answers with
/// `token` in its auth header (`None`: without the header).
pub fn egress_healthz(ip: &str, token: Option<&str>) -> Result<u16> {
    let headers: Vec<(&str, &str)> = token
        .map(|t| ("OPENSANDBOX-EGRESS-AUTH", t))
        .into_iter()
        .collect();
    Ok(http_get(ip, 18080, "/healthz", &headers)?.0)
}

/// The serial (hex) of the certificate served at `addr` to a client that
/// asks for `server_name` and trusts `ca_pem`: the handshake must verify.
pub async fn served_serial(addr: SocketAddr, server_name: &str, ca_pem: &[u8]) -> Result<String> {
    let config = wire::client_config(ca_pem)?;
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(server_name.to_owned())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::clone(&config))
        .connect(name, tcp)
        .await?;
    let (_, session) = tls.get_ref();
    let der = session
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("no peer certificate")?;
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|e| format!("the served certificate does not parse: {e}"))?;
    Ok(cert.raw_serial_as_string())
}
