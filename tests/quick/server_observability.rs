//! contract: metrics.handshakes, metrics.reloads, metrics.build-info, http.cert-validity
//!
//! What an operator sees of the classic outages: handshake failures
//! by reason, the certificate's expiry, the build, and whether the last
//! configuration reload took.

use crate::common;

use std::time::Duration;

use common::metrics::Metrics;
use common::server::{Pki, Running, eventually, start_with_config, tls_connect};
use sandbox_webhook::certs::Ca;
use tokio::io::AsyncWriteExt;

/// contract: metrics.handshakes
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_rejects_the_certificate_is_counted_as_such() {
    let pki = Pki::new();
    let server = Running::start(pki.settings()).await;
    // The classic outage: the webhook configuration's caBundle is another CA.
    let wrong = Pki {
        ca: Ca::new("other-ca", 2).expect("CA"),
        dir: tempfile::tempdir().unwrap(),
    };
    assert!(
        tls_connect(server.addr, wrong.client_config())
            .await
            .is_err()
    );
    let labels = [("reason", "peer_rejected_certificate")];
    eventually("the failure is counted", Duration::from_secs(5), || async {
        server
            .metric("sandbox_webhook_tls_handshake_failures_total", &labels)
            .await
            == 1
    })
    .await;
    // Not TLS at all.
    let mut plain = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let labels = [("reason", "protocol")];
    eventually(
        "plain HTTP is a protocol failure",
        Duration::from_secs(5),
        || async {
            server
                .metric("sandbox_webhook_tls_handshake_failures_total", &labels)
                .await
                == 1
        },
    )
    .await;
    server.shutdown().await;
}

/// contract: metrics.build-info
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_expiry_and_build_are_exposed() {
    let pki = Pki::new();
    let settings = pki.settings();
    let pem = std::fs::read(&settings.tls.cert).unwrap();
    let der = rustls_pemfile::certs(&mut &pem[..])
        .next()
        .unwrap()
        .unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
    let not_after = u64::try_from(cert.validity().not_after.timestamp()).unwrap();

    let server = Running::start(settings).await;
    let text = server.metrics().await;
    let metrics = Metrics::parse(&text);
    assert_eq!(
        metrics.value("sandbox_webhook_certificate_expiry_timestamp_seconds", &[]),
        not_after
    );
    assert_eq!(
        metrics.sum(
            "sandbox_webhook_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1
    );
    assert!(!text.contains("revision=\"\""), "{text}");

    // A rotated certificate updates the gauge.
    let next = pki.ca.server(&["localhost".into()], &[], 30).unwrap();
    std::fs::write(pki.path("tls.crt"), &next.cert_pem).unwrap();
    std::fs::write(pki.path("tls.key"), &next.key_pem).unwrap();
    eventually("the new expiry", Duration::from_secs(10), || async {
        server
            .metric("sandbox_webhook_certificate_expiry_timestamp_seconds", &[])
            .await
            > not_after + 20 * 86_400
    })
    .await;
    server.shutdown().await;
}

/// contract: metrics.reloads
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_reload_sets_last_reload_success_to_zero() {
    let (_pki, server, path) = start_with_config("prefix: example.com\n").await;
    let name = "sandbox_webhook_config_last_reload_success";
    assert_eq!(server.metric(name, &[]).await, 1);

    std::fs::write(&path, "prefix: [not, a, prefix]\n").unwrap();
    eventually("rejected", Duration::from_secs(10), || async {
        server.metric(name, &[]).await == 0
    })
    .await;
    std::fs::write(&path, "prefix: example.org\n").unwrap();
    eventually("accepted again", Duration::from_secs(10), || async {
        server.metric(name, &[]).await == 1
    })
    .await;
    server.shutdown().await;
}

/// The README's metrics table lists every metric family `/metrics` exposes
/// (without the `sandbox_webhook_` prefix), so the table cannot drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_lists_every_exposed_metric() {
    let pki = Pki::new();
    let server = Running::start(pki.settings()).await;
    let exposition = server.metrics().await;
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
            .unwrap();
    let families: Vec<&str> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE sandbox_webhook_"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(families.len() >= 13, "{exposition}");
    let missing: Vec<&&str> = families
        .iter()
        .filter(|f| !readme.contains(&format!("`{f}")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md lacks the metrics {missing:?}"
    );
}
