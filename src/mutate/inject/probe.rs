//! The egress sidecar's probes: `GET /healthz` on its API port with the
//! token header. The sidecar answers only once its rules are in place.

use serde::Serialize;

/// The sidecar's API port, which its probes and the control plane call.
pub(super) const API_PORT: u16 = 18080;
/// The header that carries the sidecar's token.
pub(super) const AUTH_HEADER: &str = "OPENSANDBOX-EGRESS-AUTH";

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Probe<'a> {
    http_get: HttpGet<'a>,
    period_seconds: u32,
    failure_threshold: u32,
}

/// The readiness probe's: 30 s unready before the pod says so.
pub(super) const READY_FAILURES: u32 = 30;
/// The startup probe's: two minutes to program the rules (and start the
/// MITM proxy) before the kubelet restarts the sidecar.
pub(super) const STARTUP_FAILURES: u32 = 120;

impl<'a> Probe<'a> {
    /// `GET /healthz` on the API port with the token header, every second.
    pub(super) fn healthz(token: &'a str, failure_threshold: u32) -> Self {
        Probe {
            http_get: HttpGet {
                path: "/healthz",
                port: API_PORT,
                http_headers: [HttpHeader {
                    name: AUTH_HEADER,
                    value: token,
                }],
            },
            period_seconds: 1,
            failure_threshold,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct HttpGet<'a> {
    path: &'static str,
    port: u16,
    http_headers: [HttpHeader<'a>; 1],
}

/// An `httpHeaders` item of a probe.
#[derive(Debug, Serialize)]
struct HttpHeader<'a> {
    name: &'static str,
    value: &'a str,
}
