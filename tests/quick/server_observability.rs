//! contract: metrics.handshakes, metrics.reloads, metrics.build-info, http.cert-validity
//!
//! What an operator sees of the classic outages: handshake failures
//! by reason, the certificate's expiry, the build, and whether the last
//! configuration reload took; series no client can multiply; the log.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use common::cli::temp_file;
use common::https::{client, post_review, try_post};
use common::metrics::Metrics;
use common::processes::Daemon;
use common::reviews;
use common::served::Served;
use common::server::{Pki, Running, eventually, read_response, start_with_config, tls_connect};
use sandbox_webhook::certs::Ca;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::server_support::{
    HANDSHAKE_FAILURES, half_sent_review, metric_reaches, post_create, start_fresh,
};

/// contract: metrics.handshakes
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_rejects_the_certificate_is_counted_as_such() {
    let (_pki, server) = start_fresh().await;
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
    let patience = Duration::from_secs(5);
    metric_reaches(
        &server,
        "the failure is counted",
        patience,
        HANDSHAKE_FAILURES,
        &labels,
        1,
    )
    .await;
    // Not TLS at all.
    let mut plain = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let labels = [("reason", "protocol")];
    let what = "plain HTTP is a protocol failure";
    metric_reaches(&server, what, patience, HANDSHAKE_FAILURES, &labels, 1).await;
    server.shutdown().await;
}

/// contract: metrics.build-info
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_expiry_and_build_are_exposed() {
    let (pki, server) = start_fresh().await;
    let pem = std::fs::read(pki.path("tls.crt")).unwrap();
    let der = rustls_pemfile::certs(&mut &pem[..])
        .next()
        .unwrap()
        .unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
    let not_after = u64::try_from(cert.validity().not_after.timestamp()).unwrap();

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

    let patience = Duration::from_secs(10);
    std::fs::write(&path, "prefix: [not, a, prefix]\n").unwrap();
    metric_reaches(&server, "rejected", patience, name, &[], 0).await;
    std::fs::write(&path, "prefix: example.org\n").unwrap();
    metric_reaches(&server, "accepted again", patience, name, &[], 1).await;
    server.shutdown().await;
}

/// docs/operations.md's metrics table lists every metric family `/metrics` exposes
/// (without the `sandbox_webhook_` prefix), so the table cannot drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operations_guide_lists_every_exposed_metric() {
    let (_pki, server) = start_fresh().await;
    let exposition = server.metrics().await;
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .unwrap();
    let families: Vec<&str> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE sandbox_webhook_"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(families.len() >= 13, "{exposition}");
    let missing: Vec<&&str> = families
        .iter()
        .filter(|f| !guide.contains(&format!("`{f}")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/operations.md: the metrics table lacks {missing:?}: add a row for each (a metric is one row of `metric_fields!`; ARCHITECTURE.md, \"A metric\")"
    );
}

/// The series `/metrics` exposes (name and labels, without values).
fn series(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s.to_owned()))
        .collect()
}

/// Requests a hostile client varies at will, each carrying `mark`: an
/// operation, a kind, a namespace, a path and a content type of its own
/// choosing, and a body that is no review.
async fn hostile_round(c: &reqwest::Client, server: &Running, mark: &str) {
    let pod = json!({"apiVersion": "v1", "kind": mark, "metadata": {"name": mark, "namespace": mark,
        "labels": {"opensandbox.io/id": mark}}, "spec": {"containers": [{"name": mark, "image": mark}]}});
    for (path, operation) in [
        ("/mutate", mark),
        ("/validate", mark),
        ("/mutate", "CREATE"),
    ] {
        let body = reviews::review(mark, mark, operation, &pod, None);
        let _ = post_review(c, &server.url(path), body).await;
    }
    let _ = try_post(
        c,
        &server.url(&format!("/{mark}")),
        "application/json",
        b"{}".to_vec(),
    )
    .await;
    let _ = try_post(
        c,
        &server.url("/mutate"),
        &format!("text/{mark}"),
        b"{}".to_vec(),
    )
    .await;
    let _ = post_review(c, &server.url("/mutate"), mark.as_bytes().to_vec()).await;
}

/// Every metric label takes its value from a fixed set: after a first
/// round of hostile requests has made each kind of series appear, a second
/// round with other values adds none, and no value a client sent is a label.
/// contract: limits.metric-labels
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_cannot_create_series() {
    let (pki, server) = start_fresh().await;
    let c = client(&pki);
    hostile_round(&c, &server, "zzhostile-one").await;
    let first = series(&server.metrics().await);
    hostile_round(&c, &server, "zzhostile-two").await;
    let text = server.metrics().await;
    let second = series(&text);
    let added: Vec<&String> = second.difference(&first).collect();
    assert!(added.is_empty(), "new series: {added:?}");
    assert!(!text.contains("zzhostile"), "{text}");
    // The operations a client made up reached the counter, as `other`.
    for operation in ["other", "validate/other"] {
        let seen = second
            .iter()
            .any(|s| s.contains(&format!("operation=\"{operation}\"")));
        assert!(seen, "no operation {operation}: {text}");
    }
    let requests = Metrics::parse(&text).sum("sandbox_webhook_admission_requests_total", &[]);
    assert!(requests >= 8, "the hostile requests were counted: {text}");
    server.shutdown().await;
}

/// `serve` logs to stderr, filtered by `RUST_LOG`, as JSON with
/// `--log-format json`: at start-up its version, configuration path, prefix
/// and images, then one line per admission with its outcome.
/// contract: metrics.startup-log
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_logs_its_start_and_each_admission_as_json() {
    let (_dir, config) = temp_file(
        "config.yaml",
        "prefix: sandbox.example.com\nexecd: {image: registry.example.com/execd:v9}\negress: {image: registry.example.com/egress:v9}\n",
    );
    let config_arg = config.display().to_string();
    let mut served = Served::start(&["--log-format", "json", "--config", &config_arg]);
    let pki = &served.pki;
    let c = client(pki);
    let url = format!("https://127.0.0.1:{}/mutate", served.addr.port());
    let sandbox = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "logged",
        "labels": {"sandbox.example.com/id": "logged"}},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "1"]}]}});
    let plain = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}});
    for (uid, pod) in [("uid-logged", &sandbox), ("uid-plain", &plain)] {
        let r = post_create(&c, &url, uid, pod).await;
        assert_eq!(r.status(), 200);
    }
    let log_path = pki.path("serve.log");
    served.daemon.terminate().unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let fields = |message: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|l| l["fields"]["message"] == message)
            .map(|l| &l["fields"])
            .collect()
    };
    let start = fields("starting sandbox-webhook");
    assert_eq!(start.len(), 1, "{log}");
    assert_eq!(start[0]["version"], env!("CARGO_PKG_VERSION"), "{log}");
    assert_eq!(start[0]["config"], config_arg.as_str(), "{log}");
    let loaded = fields("configuration loaded");
    assert_eq!(loaded.len(), 1, "{log}");
    assert_eq!(loaded[0]["prefix"], "sandbox.example.com", "{log}");
    assert_eq!(
        loaded[0]["execd_image"], "registry.example.com/execd:v9",
        "{log}"
    );
    assert_eq!(
        loaded[0]["egress_image"], "registry.example.com/egress:v9",
        "{log}"
    );
    let admissions = fields("admission");
    let outcomes: Vec<(&Value, &Value)> = admissions
        .iter()
        .map(|f| (&f["uid"], &f["outcome"]))
        .collect();
    assert_eq!(
        outcomes,
        [
            (&json!("uid-logged"), &json!("mutated")),
            (&json!("uid-plain"), &json!("skipped"))
        ],
        "{log}"
    );
    assert!(lines.iter().all(|l| l["level"] != "DEBUG"), "RUST_LOG=info");

    // RUST_LOG=warn keeps the info lines out.
    let (pki, addr, admin, args) = Served::args(&["--log-format", "json"]);
    let log_path = pki.path("warn.log");
    let mut daemon = Daemon::new("webhook", log_path.clone());
    daemon
        .start(
            &args,
            &[("RUST_LOG", Path::new("warn"))],
            &admin.to_string(),
            Duration::from_secs(30),
        )
        .unwrap();
    let url = format!("https://127.0.0.1:{}/mutate", addr.port());
    let r = post_create(&client(&pki), &url, "uid-warn", &sandbox).await;
    assert_eq!(r.status(), 200);
    daemon.terminate().unwrap();
    let quiet = std::fs::read_to_string(&log_path).unwrap();
    assert!(!quiet.contains("\"INFO\""), "RUST_LOG=warn:\n{quiet}");
}

/// The log writer puts the lines it finds queued together into one write
/// (docs/performance.md, "Server CPU per review: where the gap goes"), but
/// holds none back: after a burst of concurrent reviews every admission
/// line is in the log, whole, while the webhook keeps running, and so is
/// the line of a lone review that follows, with nothing after it to fill a
/// buffer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_lines_are_written_whole_and_none_waits_for_more() {
    let served = Served::start(&["--log-format", "json"]);
    let c = client(&served.pki);
    let url = format!("https://127.0.0.1:{}/mutate", served.addr.port());
    let log_path = served.pki.path("serve.log");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "burst",
        "labels": {"opensandbox.io/id": "burst"}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}});
    // Every admission line's uid, once each line is checked whole (JSON).
    let uids = || -> Vec<String> {
        let log = std::fs::read_to_string(&log_path).unwrap();
        log.lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("cut line ({e}): {l}"))
            })
            .filter(|l| l["fields"]["message"] == "admission")
            .map(|l| l["fields"]["uid"].as_str().unwrap_or_default().to_owned())
            .collect()
    };

    // Eight keep-alive connections of 25 reviews each (more handshakes at
    // once from one address would meet the handshake gate).
    let burst = futures_util::future::join_all((0..8).map(|k| {
        let (c, url, pod) = (&c, &url, &pod);
        async move {
            for i in 0..25 {
                let uid = format!("uid-{k}-{i}");
                let r = post_create(c, url, &uid, pod).await;
                assert_eq!(r.status(), 200);
            }
        }
    }));
    burst.await;
    eventually(
        "the burst's 200 admission lines",
        Duration::from_secs(10),
        || {
            let n = uids().len();
            async move { n >= 200 }
        },
    )
    .await;
    let r = post_create(&c, &url, "uid-lone", &pod).await;
    assert_eq!(r.status(), 200);
    eventually("the lone review's line", Duration::from_secs(10), || {
        let lone = uids().iter().any(|u| u == "uid-lone");
        async move { lone }
    })
    .await;
    let seen = uids();
    let distinct: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(
        (seen.len(), distinct.len()),
        (201, 201),
        "one line per admission"
    );
    drop(served);
}

/// A sample of the exposition by its whole series name (for a histogram's
/// `_count` and `_sum`, which the parser folds into the histogram).
fn raw_sample<T: std::str::FromStr>(text: &str, series: &str) -> T {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

/// Each admission is observed once in `admission_duration_seconds`, from
/// the request's start to its answer (a body that arrives slowly counts its
/// wait), into buckets that reach past the 5 s webhook timeout (so a p99
/// near the timeout is seen, not clamped), and `requests_in_flight` is 1
/// while it is handled, 0 after. (`panics_total` is `server_errors`'.)
/// contract: metrics.latency
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_admission_is_timed_from_its_start_and_counted_in_flight() {
    let (pki, server) = start_fresh().await;
    let histogram = "sandbox_webhook_admission_duration_seconds";
    let in_flight = "sandbox_webhook_requests_in_flight";
    let before = server.metrics().await;
    assert_eq!(raw_sample::<u64>(&before, &format!("{histogram}_count")), 0);

    let (mut stream, rest) = half_sent_review(&server, &pki, "uid-timed").await;
    let what = "the request is in flight";
    metric_reaches(&server, what, Duration::from_secs(5), in_flight, &[], 1).await;
    let wait = Duration::from_millis(300);
    tokio::time::sleep(wait).await;
    stream.write_all(&rest).await.unwrap();
    let answer = read_response(&mut stream).await.expect("an answer");
    assert_eq!(answer.status, 200);

    let after = server.metrics().await;
    assert_eq!(Metrics::parse(&after).value(in_flight, &[]), 0);
    assert_eq!(raw_sample::<u64>(&after, &format!("{histogram}_count")), 1);
    let took: f64 = raw_sample(&after, &format!("{histogram}_sum"));
    assert!(
        took >= wait.as_secs_f64(),
        "observed {took} s, less than the {wait:?} the body took"
    );
    let largest = after
        .lines()
        .filter(|l| l.starts_with(&format!("{histogram}_bucket")))
        .filter_map(|l| {
            l.split("le=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse::<f64>()
                .ok()
        })
        .filter(|le| le.is_finite())
        .fold(0.0, f64::max);
    assert!(
        largest > 5.0,
        "the largest finite bucket is {largest} s, short of the 5 s timeout"
    );
    server.shutdown().await;
}
