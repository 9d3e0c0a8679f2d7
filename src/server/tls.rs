//! rustls configuration whose certificate and client CA can be swapped while
//! serving.
//!
//! The `rustls::ServerConfig` is built once; what changes lives behind
//! `ArcSwap`s that it consults per handshake: the certificate resolver and the
//! client-certificate verifier. A handshake takes whatever is current, and
//! established connections keep the keys they negotiated, so a rotation never
//! drops a connection.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use thiserror::Error;
use tokio::task::JoinHandle;

use super::metrics::{Metrics, ReasonLabels, VALIDITY_REASONS};
use super::reload::{self, ReadError, Watch};

/// The files the TLS listener serves from.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// CA bundle for client certificates; when set, clients must present one
    /// signed by it (mTLS with the apiserver).
    pub client_ca: Option<PathBuf>,
}

#[derive(Debug, Error)]
pub enum TlsError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("{}: not PEM: {source}", path.display())]
    Pem {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: no certificate (expected a PEM `CERTIFICATE` block)", path.display())]
    NoCertificate { path: PathBuf },
    #[error("{}: no private key (expected a PEM PKCS#8, SEC1 or PKCS#1 key)", path.display())]
    NoKey { path: PathBuf },
    #[error("{}: unusable private key: {source}", path.display())]
    Key {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("{}: unusable certificate: {source}", path.display())]
    Certificate {
        path: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("the key in {} does not match the certificate in {}", key.display(), cert.display())]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error(
        "{}: the certificate expired at {} (it is now {}); renew it, an expired certificate is not served",
        path.display(), rfc3339(*not_after), rfc3339(*now)
    )]
    Expired {
        path: PathBuf,
        not_after: i64,
        now: i64,
    },
    #[error(
        "{}: the certificate is not valid before {} (it is now {}); check this machine's clock or the issuer's, a certificate is not served before it is valid",
        path.display(), rfc3339(*not_before), rfc3339(*now)
    )]
    NotYetValid {
        path: PathBuf,
        not_before: i64,
        now: i64,
    },
    #[error("{}: cannot read the certificate's validity: {message}", path.display())]
    Validity { path: PathBuf, message: String },
    #[error("{}: unusable client CA bundle: {message}", path.display())]
    ClientCa { path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The TLS side of a running server.
pub(crate) struct Tls {
    /// Built once; what rotates is behind it (resolver, verifier).
    pub config: Arc<rustls::ServerConfig>,
    resolver: Arc<CertResolver>,
    client_verifier: Option<Arc<ReloadingClientVerifier>>,
    provider: Arc<CryptoProvider>,
    files: TlsFiles,
    initial_pair: Vec<Vec<u8>>,
    initial_ca: Vec<Vec<u8>>,
    /// `notAfter` of the serving certificate loaded at start-up.
    pub expiry: Option<i64>,
}

impl Tls {
    /// Reads and checks the certificate, key and client CA, and builds the
    /// acceptor. Called before binding so that a bad file fails start-up.
    pub async fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());

        let pair_paths = [files.cert.clone(), files.key.clone()];
        let initial_pair = reload::read_all(&pair_paths).await?;
        let key = certified_key(&initial_pair, &files, &provider)?;
        let expiry = Some(valid_now(&key, &files.cert, unix_now())?);
        let resolver = Arc::new(CertResolver {
            current: ArcSwap::from_pointee(key),
        });

        let (client_verifier, initial_ca) = match &files.client_ca {
            Some(path) => {
                let initial_ca = reload::read_all(std::slice::from_ref(path)).await?;
                let verifier = client_verifier(&initial_ca[0], path, &provider)?;
                let reloading = Arc::new(ReloadingClientVerifier {
                    current: ArcSwap::from_pointee(Current(verifier)),
                });
                (Some(reloading), initial_ca)
            }
            None => (None, Vec::new()),
        };

        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
        let builder = match &client_verifier {
            Some(v) => builder.with_client_cert_verifier(v.clone()),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(resolver.clone());
        // The apiserver speaks HTTP/1.1 to webhooks; offering only that keeps
        // one code path (and one set of timeouts) on the server.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];

        Ok(Tls {
            config: Arc::new(config),
            resolver,
            client_verifier,
            provider,
            files,
            initial_pair,
            initial_ca,
            expiry,
        })
    }

    /// Starts the pollers that swap in new certificate pairs and client CAs.
    pub fn spawn_reloaders(
        &self,
        interval: Duration,
        metrics: &Arc<Metrics>,
    ) -> Vec<JoinHandle<()>> {
        let counter = &metrics.cert_reloads;
        let expiry = metrics.certificate_expiry.clone();
        let refused = metrics.cert_validity_rejections.clone();
        let mut tasks = Vec::with_capacity(2);
        let (resolver, provider, files) = (
            self.resolver.clone(),
            self.provider.clone(),
            self.files.clone(),
        );
        tasks.push(reload::spawn(
            Watch {
                what: "tls certificate",
                paths: vec![self.files.cert.clone(), self.files.key.clone()],
                initial: self.initial_pair.clone(),
                interval,
                counter: counter.clone(),
                last_success: None,
            },
            move |contents| {
                let key = certified_key(contents, &files, &provider)?;
                let not_after = valid_now(&key, &files.cert, unix_now()).inspect_err(|e| {
                    if let Some(reason) = e.validity_reason() {
                        refused.get_or_create(&ReasonLabels { reason }).inc();
                    }
                })?;
                expiry.set(not_after);
                resolver.current.store(Arc::new(key));
                Ok::<_, TlsError>(())
            },
        ));
        if let (Some(verifier), Some(path)) = (&self.client_verifier, &self.files.client_ca) {
            let (verifier, provider, ca_path) =
                (verifier.clone(), self.provider.clone(), path.clone());
            tasks.push(reload::spawn(
                Watch {
                    what: "client CA",
                    paths: vec![path.clone()],
                    initial: self.initial_ca.clone(),
                    interval,
                    counter: counter.clone(),
                    last_success: None,
                },
                move |contents| {
                    let next = client_verifier(&contents[0], &ca_path, &provider)?;
                    verifier.current.store(Arc::new(Current(next)));
                    Ok::<_, TlsError>(())
                },
            ));
        }
        tasks
    }
}

/// Parses `[cert PEM, key PEM]` and checks that the key belongs to the leaf
/// certificate, so a half-written rotation is refused instead of served.
fn certified_key(
    contents: &[Vec<u8>],
    files: &TlsFiles,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, TlsError> {
    let (cert_pem, key_pem) = match contents {
        [cert, key] => (cert.as_slice(), key.as_slice()),
        _ => {
            return Err(TlsError::NoCertificate {
                path: files.cert.clone(),
            });
        }
    };
    let chain = pem_certs(cert_pem, &files.cert)?;
    let key = rustls_pemfile::private_key(&mut &key_pem[..])
        .map_err(|source| TlsError::Pem {
            path: files.key.clone(),
            source,
        })?
        .ok_or_else(|| TlsError::NoKey {
            path: files.key.clone(),
        })?;
    let signing_key = provider
        .key_provider
        .load_private_key(key)
        .map_err(|source| TlsError::Key {
            path: files.key.clone(),
            source,
        })?;
    let certified = CertifiedKey::new(chain, signing_key);
    match certified.keys_match() {
        Ok(()) => Ok(certified),
        Err(rustls::Error::InconsistentKeys(_)) => Err(TlsError::KeyMismatch {
            cert: files.cert.clone(),
            key: files.key.clone(),
        }),
        Err(source) => Err(TlsError::Certificate {
            path: files.cert.clone(),
            source,
        }),
    }
}

/// How far ahead of this machine's clock a certificate's `notBefore` may
/// be: an issuer stamps a fresh certificate with its own clock (cert-manager
/// with the time of issue), which may run a little ahead.
const NOT_BEFORE_SKEW: i64 = 5 * 60;

impl TlsError {
    /// The metric label of a certificate refused for its validity window.
    fn validity_reason(&self) -> Option<&'static str> {
        match self {
            TlsError::Expired { .. } => Some(VALIDITY_REASONS[0]),
            TlsError::NotYetValid { .. } => Some(VALIDITY_REASONS[1]),
            _ => None,
        }
    }
}

fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn rfc3339(unix: i64) -> String {
    chrono::DateTime::from_timestamp(unix, 0).map_or_else(
        || format!("{unix} (Unix time)"),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

/// Refuses a leaf certificate outside its validity window at `now` (Unix
/// seconds), with [`NOT_BEFORE_SKEW`] allowed on `notBefore`: clients
/// refuse it, so serving it fails every handshake while a good certificate
/// could still be served. Returns its `notAfter`.
fn valid_now(key: &CertifiedKey, path: &Path, now: i64) -> Result<i64, TlsError> {
    let unreadable = |message: String| TlsError::Validity {
        path: path.to_owned(),
        message,
    };
    let leaf = key
        .cert
        .first()
        .ok_or_else(|| unreadable("no certificate".into()))?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref())
        .map_err(|e| unreadable(e.to_string()))?;
    let validity = cert.validity();
    check_window(
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
        now,
        path,
    )
}

fn check_window(not_before: i64, not_after: i64, now: i64, path: &Path) -> Result<i64, TlsError> {
    let path = path.to_owned();
    if now > not_after {
        return Err(TlsError::Expired {
            path,
            not_after,
            now,
        });
    }
    if not_before > now.saturating_add(NOT_BEFORE_SKEW) {
        return Err(TlsError::NotYetValid {
            path,
            not_before,
            now,
        });
    }
    Ok(not_after)
}

fn pem_certs(pem: &[u8], path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Pem {
            path: path.to_owned(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

fn client_verifier(
    pem: &[u8],
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in pem_certs(pem, path)? {
        roots.add(cert).map_err(|e| TlsError::ClientCa {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::ClientCa {
            path: path.to_owned(),
            message: e.to_string(),
        })
}

/// Hands every handshake the current certificate.
pub(crate) struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

impl fmt::Debug for CertResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertResolver").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

#[derive(Debug)]
struct Current(Arc<dyn ClientCertVerifier>);

/// Delegates to the verifier built from the current client CA.
#[derive(Debug)]
pub(crate) struct ReloadingClientVerifier {
    current: ArcSwap<Current>,
}

impl ReloadingClientVerifier {
    /// The verifier of the client CA in use; a reload swaps it whole.
    fn verifier(&self) -> arc_swap::Guard<Arc<Current>> {
        self.current.load()
    }
}

impl ClientCertVerifier for ReloadingClientVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    /// The hint list would have to borrow from the current verifier, which
    /// can be swapped at any time. An empty list is valid (RFC 8446 4.2.4)
    /// and clients, the apiserver included, then offer their configured
    /// certificate.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.verifier()
            .0
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier().0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier().0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_served_within_its_window_and_a_little_skew() {
        let path = Path::new("tls.crt");
        let (before, after) = (1_000_000, 2_000_000);
        assert_eq!(check_window(before, after, before, path).unwrap(), after);
        assert_eq!(check_window(before, after, after, path).unwrap(), after);
        let early = before - NOT_BEFORE_SKEW;
        assert!(check_window(before, after, early, path).is_ok(), "skew");
        let e = check_window(before, after, early - 1, path).unwrap_err();
        assert_eq!(e.validity_reason(), Some("not_yet_valid"));
        assert!(
            e.to_string()
                .starts_with("tls.crt: the certificate is not valid before 1970-01-12T13:46:40Z"),
            "{e}"
        );
        let e = check_window(before, after, after + 1, path).unwrap_err();
        assert_eq!(e.validity_reason(), Some("expired"));
        assert!(
            e.to_string().starts_with(
                "tls.crt: the certificate expired at 1970-01-24T03:33:20Z (it is now 1970-01-24T03:33:21Z)"
            ),
            "{e}"
        );
    }
}
