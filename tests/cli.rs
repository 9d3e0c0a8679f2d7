//! The `certs` subcommand writes a usable CA and serving certificate.

use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{ServerName, UnixTime};

#[test]
fn certs_writes_a_ca_and_a_serving_pair() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_sandbox-webhook"))
        .args([
            "certs",
            "--dns",
            "webhook.ns.svc",
            "--ip",
            "127.0.0.1",
            "--out",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());

    let read = |name: &str| std::fs::read(out.join(name)).unwrap();
    let ca: Vec<_> = rustls_pemfile::certs(&mut &read("ca.crt")[..])
        .collect::<Result<_, _>>()
        .unwrap();
    let leaf: Vec<_> = rustls_pemfile::certs(&mut &read("tls.crt")[..])
        .collect::<Result<_, _>>()
        .unwrap();
    let key = rustls_pemfile::private_key(&mut &read("tls.key")[..])
        .unwrap()
        .expect("a private key");
    assert_eq!((ca.len(), leaf.len()), (1, 1));

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out.join("tls.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The leaf is signed by the CA and valid for the names asked for.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca[0].clone()).unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    for name in ["webhook.ns.svc", "127.0.0.1"] {
        verifier
            .verify_server_cert(
                &leaf[0],
                &[],
                &ServerName::try_from(name).unwrap(),
                &[],
                UnixTime::now(),
            )
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // And the key belongs to it.
    let signing = provider.key_provider.load_private_key(key).unwrap();
    rustls::sign::CertifiedKey::new(leaf, signing)
        .keys_match()
        .unwrap();
}

#[test]
fn certs_defaults_to_local_names() {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_sandbox-webhook"))
        .args(["certs", "--out"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    for name in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(
            dir.path().join(name).metadata().unwrap().len() > 0,
            "{name}"
        );
    }
}
