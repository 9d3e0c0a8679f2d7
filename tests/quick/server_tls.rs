//! The real server's certificates, over TLS on 127.0.0.1 port 0: rotation
//! through a kubelet `..data` swap and by replacing the files (a bad pair
//! is refused and the current one kept), a bad pair at start, and mTLS
//! with a client CA.

use std::path::Path;

use common::https::{client, client_builder, der, fresh_client, peer_cert, post_review, try_post};
use common::server::{
    PATIENCE, Pki, RELOAD, Running, egress_review, eventually, read_response, replace,
    test_settings, tls_connect,
};
use sandbox_webhook::certs::{Ca, Pair};
use sandbox_webhook::server::{Server, TlsFiles};

use crate::server_support::{egress_review_request, start_fresh};

const CERT_RELOADS: &str = "sandbox_webhook_cert_reloads_total";

/// A fresh PKI with a serving pair written as its `tls.crt` / `tls.key`: the
/// PKI, the pair and the files.
fn fresh_pki_with_a_pair() -> (Pki, Pair, TlsFiles) {
    let pki = Pki::new();
    let (pair, files) = pki.write_leaf();
    (pki, pair, files)
}

/// Replaces `files` with `pair`, the key first, each file atomically.
fn replace_pair(files: &TlsFiles, pair: &Pair) {
    replace(&files.key, pair.key_pem.as_bytes());
    replace(&files.cert, pair.cert_pem.as_bytes());
}

/// What refuses a server on `files` at start, as its message.
async fn refused_at_start(files: &TlsFiles) -> String {
    let refused = Server::bind(test_settings(files.clone())).await.err();
    refused.expect("refused").to_string()
}

/// Sets up `dir` like a kubelet Secret volume: the files are symlinks
/// through `..data`, which points at a timestamped directory.
fn kubelet_swap(dir: &Path, version: &str, cert: &str, key: &str) {
    let target = dir.join(version);
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("tls.crt"), cert).unwrap();
    std::fs::write(target.join("tls.key"), key).unwrap();
    let tmp = dir.join("..data_tmp");
    std::os::unix::fs::symlink(version, &tmp).unwrap();
    // The atomic step: rename over the old `..data` link.
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        let link = dir.join(name);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(format!("..data/{name}"), &link).unwrap();
        }
    }
}

/// Waits until a new connection (no pooling: a new handshake each time) is
/// served `pair`'s certificate; prints how long the reload after `how` took.
async fn serves_after_reload(pki: &Pki, url: &str, pair: &Pair, how: &str) {
    let latency = eventually(
        "a new connection sees the new certificate",
        PATIENCE,
        || async {
            let r = post_review(&fresh_client(pki), url, egress_review("uid-rot", true)).await;
            r.status() == 200 && peer_cert(&r) == der(&pair.cert_pem)
        },
    )
    .await;
    eprintln!("observed certificate reload latency ({how}, poll every {RELOAD:?}): {latency:?}");
}

/// A review over `client` is answered, by a server presenting `pair`'s
/// certificate.
async fn served(client: &reqwest::Client, url: &str, pair: &Pair) {
    let r = post_review(client, url, egress_review("uid-rot", true)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(peer_cert(&r), der(&pair.cert_pem));
}

/// After a bad pair on disk: waits until `failures` reloads have failed in
/// all (`what`), then checks that new connections are still served
/// `current`'s certificate.
async fn keeps_after_a_bad_pair(
    server: &Running,
    pki: &Pki,
    current: &Pair,
    failures: u64,
    what: &str,
) {
    let failure = [("result", "failure")];
    eventually(what, PATIENCE, || async {
        server.metric(CERT_RELOADS, &failure).await == failures
    })
    .await;
    served(&fresh_client(pki), &server.url("/mutate"), current).await;
}

/// contract: http.cert-reload
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_rotation_via_kubelet_symlink_swap() {
    let pki = Pki::new();
    let dir = pki.path("tls");
    std::fs::create_dir(&dir).unwrap();
    let old = pki.leaf();
    kubelet_swap(&dir, "..2026_01_01_00_00_00.1", &old.cert_pem, &old.key_pem);
    let files = TlsFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
        client_ca: None,
    };
    let server = Running::start(test_settings(files)).await;
    let url = server.url("/mutate");

    // A keep-alive connection, opened before the rotation.
    let keep_alive = client(&pki);
    served(&keep_alive, &url, &old).await;

    let new = pki.leaf();
    kubelet_swap(&dir, "..2026_01_02_00_00_00.2", &new.cert_pem, &new.key_pem);
    serves_after_reload(&pki, &url, &new, "..data swap").await;

    // The old connection was not dropped: it still answers, with the
    // certificate it was established with.
    served(&keep_alive, &url, &old).await;
    let success = [("result", "success")];
    assert_eq!(server.metric(CERT_RELOADS, &success).await, 1);

    // A corrupt certificate: rejected, counted, the current pair stays.
    let failure = [("result", "failure")];
    assert_eq!(server.metric(CERT_RELOADS, &failure).await, 0);
    let garbage = "-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n";
    kubelet_swap(&dir, "..2026_01_03_00_00_00.3", garbage, &new.key_pem);
    keeps_after_a_bad_pair(&server, &pki, &new, 1, "the failure is counted").await;
    server.shutdown().await;
}

/// contract: http.cert-reload
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_rotation_by_replacing_files() {
    let (pki, old, files) = fresh_pki_with_a_pair();
    let server = Running::start(test_settings(files.clone())).await;
    let url = server.url("/mutate");
    let review = || egress_review("uid-rot", true);
    let r = post_review(&fresh_client(&pki), &url, review()).await;
    assert_eq!(peer_cert(&r), der(&old.cert_pem));

    let new = pki.leaf();
    replace_pair(&files, &new);
    serves_after_reload(&pki, &url, &new, "file replace").await;

    // A valid certificate with somebody else's key: refused.
    let failure = [("result", "failure")];
    let before = server.metric(CERT_RELOADS, &failure).await;
    let other = pki.leaf();
    replace(&files.cert, other.cert_pem.as_bytes());
    keeps_after_a_bad_pair(&server, &pki, &new, before + 1, "the mismatch is counted").await;
    server.shutdown().await;
}

/// TLS 1.2 and 1.3 are both served, and the one application protocol is
/// `http/1.1`: a client that offers h2 first is given HTTP/1.1, and a
/// review is answered over each.
/// contract: http.tls
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_12_and_13_are_served_with_alpn_http_11() {
    use std::sync::Arc;
    use tokio::io::AsyncWriteExt;

    let (pki, server) = start_fresh().await;
    let mut roots = rustls::RootCertStore::empty();
    let ca = pki.ca.cert_pem();
    for cert in rustls_pemfile::certs(&mut ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    for version in [&rustls::version::TLS12, &rustls::version::TLS13] {
        let mut config = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let mut tls = tls_connect(server.addr, Arc::new(config))
            .await
            .unwrap_or_else(|e| panic!("{:?}: {e}", version.version));
        let (_, session) = tls.get_ref();
        assert_eq!(session.protocol_version(), Some(version.version));
        assert_eq!(session.alpn_protocol(), Some(&b"http/1.1"[..]));
        tls.write_all(&egress_review_request("uid-tls"))
            .await
            .unwrap();
        let answer = read_response(&mut tls).await.expect("a response");
        assert_eq!(answer.status, 200, "{:?}", version.version);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_certificate_fails_start_naming_the_file() {
    let (pki, _, files) = fresh_pki_with_a_pair();
    std::fs::write(&files.key, "not a key").unwrap();
    let text = refused_at_start(&files).await;
    assert!(text.contains(&files.key.display().to_string()), "{text}");

    let other = pki.leaf();
    std::fs::write(&files.key, &other.key_pem).unwrap();
    let text = refused_at_start(&files).await;
    assert!(text.contains("does not match"), "{text}");
}

/// contract: http.client-ca
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mtls_requires_a_client_certificate_from_the_ca() {
    let (pki, _, mut files) = fresh_pki_with_a_pair();
    let client_ca = Ca::new("apiserver-client-ca", 1).unwrap();
    std::fs::write(pki.path("client-ca.crt"), client_ca.cert_pem()).unwrap();
    files.client_ca = Some(pki.path("client-ca.crt"));
    let server = Running::start(test_settings(files)).await;
    let url = server.url("/mutate");
    let review = egress_review("uid-mtls", true);
    let json = "application/json";

    let refused = try_post(&client(&pki), &url, json, review.clone()).await;
    assert!(
        refused.is_err(),
        "a client without a certificate got {refused:?}"
    );

    let presenting = |pair: &Pair| {
        let pem = format!("{}{}", pair.cert_pem, pair.key_pem);
        let identity = reqwest::Identity::from_pem(pem.as_bytes()).unwrap();
        client_builder(&pki).identity(identity).build().unwrap()
    };
    let stranger = Ca::new("someone-else", 1)
        .unwrap()
        .client("kube-apiserver", 1)
        .unwrap();
    let refused = try_post(&presenting(&stranger), &url, json, review.clone()).await;
    assert!(
        refused.is_err(),
        "a certificate from another CA got {refused:?}"
    );

    let apiserver = client_ca.client("kube-apiserver", 1).unwrap();
    let r = post_review(&presenting(&apiserver), &url, review).await;
    assert_eq!(r.status(), 200);
    server.shutdown().await;
}

/// A pair outside its validity window, expired or not yet valid: refused at
/// start with a sentence that names the file and what is wrong.
/// contract: http.cert-validity
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_and_future_certificates_are_refused_at_start() {
    let (pki, _, files) = fresh_pki_with_a_pair();
    for (pair, says) in [
        (pki.leaf_valid(-30, -1), "the certificate expired at"),
        (pki.leaf_valid(2, 30), "the certificate is not valid before"),
    ] {
        std::fs::write(&files.cert, &pair.cert_pem).unwrap();
        std::fs::write(&files.key, &pair.key_pem).unwrap();
        let text = refused_at_start(&files).await;
        let named = format!("{}: {says}", files.cert.display());
        assert!(text.contains(&named), "{text}");
    }
}

/// The same at reload: refused, counted by reason, and the current pair is
/// still served; a valid pair afterwards is taken.
/// contract: http.cert-validity, http.cert-reload
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_and_future_certificates_are_refused_at_reload() {
    let (pki, current, files) = fresh_pki_with_a_pair();
    let server = Running::start(test_settings(files.clone())).await;
    let refused = "sandbox_webhook_cert_validity_rejections_total";
    for (pair, reason) in [
        (pki.leaf_valid(-30, -1), "expired"),
        (pki.leaf_valid(2, 30), "not_yet_valid"),
    ] {
        replace_pair(&files, &pair);
        eventually(reason, PATIENCE, || async {
            server.metric(refused, &[("reason", reason)]).await == 1
        })
        .await;
        served(&fresh_client(&pki), &server.url("/mutate"), &current).await;
    }
    let next = pki.leaf();
    replace_pair(&files, &next);
    serves_after_reload(&pki, &server.url("/mutate"), &next, "after refusals").await;
    server.shutdown().await;
}
