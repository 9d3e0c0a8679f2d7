//! Certificates for installs, `serve --dev` and tests: a private CA and the
//! leaf certificates it signs (ECDSA P-256, via rcgen).

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{Datelike, Days, NaiveDate, Utc};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::RootCertStore;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use thiserror::Error;
use x509_parser::certificate::X509Certificate;

#[derive(Debug, Error)]
pub enum CertError {
    #[error("cannot generate a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot generate a serial number: {0}")]
    Random(String),
    #[error("validity of {0} days is out of range")]
    Days(u32),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A certificate and its private key, both PEM.
#[derive(Debug, Clone)]
pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A private CA that signs server and client certificates.
pub struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    /// A self-signed CA that signs leaf certificates only.
    ///
    /// # Errors
    /// [`CertError::Days`] for a validity out of range, else what rcgen
    /// reports.
    pub fn new(common_name: &str, days: u32) -> Result<Self, CertError> {
        let mut params = base_params(common_name, Vec::new(), days)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate()?;
        Ok(Ca {
            issuer: CertifiedIssuer::self_signed(params, key)?,
        })
    }

    #[must_use]
    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A serving certificate for the given DNS names and IP addresses.
    ///
    /// # Errors
    /// [`CertError::Days`] for a validity out of range, else what rcgen
    /// reports.
    pub fn server(&self, dns: &[String], ips: &[IpAddr], days: u32) -> Result<Pair, CertError> {
        let (from, until) = valid_for(days)?;
        self.server_valid(dns, ips, from, until)
    }

    /// A serving certificate valid from the start of the day `from` to the
    /// start of the day `until` (UTC), which may lie in the past or the
    /// future: what a server must refuse to serve, for its tests.
    ///
    /// # Errors
    /// What rcgen reports.
    pub fn server_valid(
        &self,
        dns: &[String],
        ips: &[IpAddr],
        from: NaiveDate,
        until: NaiveDate,
    ) -> Result<Pair, CertError> {
        let names: Vec<String> = dns
            .iter()
            .cloned()
            .chain(ips.iter().map(IpAddr::to_string))
            .collect();
        let common_name = names.first().map_or("sandbox-webhook", String::as_str);
        let mut params = params_between(common_name, names.clone(), from, until)?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate (for mTLS tests and setups).
    ///
    /// # Errors
    /// [`CertError::Days`] for a validity out of range, else what rcgen
    /// reports.
    pub fn client(&self, common_name: &str, days: u32) -> Result<Pair, CertError> {
        let mut params = base_params(common_name, Vec::new(), days)?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params)
    }

    fn sign(&self, mut params: CertificateParams) -> Result<Pair, CertError> {
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

fn base_params(
    common_name: &str,
    names: Vec<String>,
    days: u32,
) -> Result<CertificateParams, CertError> {
    let (from, until) = valid_for(days)?;
    params_between(common_name, names, from, until)
}

/// From yesterday (day granularity is enough, and starting yesterday
/// tolerates clock skew) to `days` from today.
fn valid_for(days: u32) -> Result<(NaiveDate, NaiveDate), CertError> {
    let today = Utc::now().date_naive();
    let start = today.checked_sub_days(Days::new(1));
    let end = today.checked_add_days(Days::new(u64::from(days)));
    match (start, end) {
        (Some(start), Some(end)) => Ok((start, end)),
        _ => Err(CertError::Days(days)),
    }
}

fn params_between(
    common_name: &str,
    names: Vec<String>,
    from: NaiveDate,
    until: NaiveDate,
) -> Result<CertificateParams, CertError> {
    let mut params = CertificateParams::new(names)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    // chrono's month and day always fit a u8; the error is unreachable.
    let ymd = |d: NaiveDate| match (u8::try_from(d.month()), u8::try_from(d.day())) {
        (Ok(month), Ok(day)) => Ok(rcgen::date_time_ymd(d.year(), month, day)),
        _ => Err(CertError::Days(0)),
    };
    params.not_before = ymd(from)?;
    params.not_after = ymd(until)?;
    // Random, positive, 16 bytes: unique per certificate, so a rotated
    // certificate is distinguishable from the old one by its serial.
    let mut serial = [0u8; 16];
    getrandom::fill(&mut serial).map_err(|e| CertError::Random(e.to_string()))?;
    serial[0] &= 0x7f;
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    Ok(params)
}

/// What `certs` and `serve --dev` write.
pub struct Bundle {
    pub ca_pem: String,
    pub server: Pair,
}

/// A new CA (valid twice as long as the leaf, as `certs/gen.sh` does) and a
/// serving certificate signed by it.
///
/// # Errors
/// As [`Ca::new`] and [`Ca::server`].
pub fn generate(dns: &[String], ips: &[IpAddr], days: u32) -> Result<Bundle, CertError> {
    let ca = Ca::new("sandbox-webhook-ca", days.saturating_mul(2))?;
    let server = ca.server(dns, ips, days)?;
    Ok(Bundle {
        ca_pem: ca.cert_pem(),
        server,
    })
}

impl Bundle {
    /// Writes `ca.crt`, `tls.crt` and `tls.key` (mode 0600) into `dir`,
    /// creating it.
    ///
    /// # Errors
    /// [`CertError::Write`], naming the file.
    pub fn write(&self, dir: &Path) -> Result<(), CertError> {
        std::fs::create_dir_all(dir).map_err(|source| CertError::Write {
            path: dir.to_owned(),
            source,
        })?;
        write_file(&dir.join("ca.crt"), self.ca_pem.as_bytes(), false)?;
        write_file(&dir.join("tls.crt"), self.server.cert_pem.as_bytes(), false)?;
        write_file(&dir.join("tls.key"), self.server.key_pem.as_bytes(), true)
    }
}

/// Writes `bytes` to `path`; a secret is created with mode 0600 and also
/// narrowed if the file already existed.
///
/// # Errors
/// [`CertError::Write`], naming the file.
pub fn write_file(path: &Path, bytes: &[u8], secret: bool) -> Result<(), CertError> {
    let err = |source| CertError::Write {
        path: path.to_owned(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        // `mode` applies only when the file is created.
        if path.exists() {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        }
    }
    let mut file = options.open(path).map_err(err)?;
    file.write_all(bytes).map_err(err)?;
    file.sync_all().map_err(err)
}

/// Why a bundle already on disk cannot be served again.
#[derive(Debug, Error)]
pub enum Unusable {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {what}", path.display())]
    Invalid { path: PathBuf, what: String },
}

/// Checks the bundle [`Bundle::write`] left in `dir`: the leaf is signed by
/// (issued under the name of) the CA next to it, its key is the one in
/// `tls.key`, it names every `dns` and `ips` entry, and both certificates
/// stay valid for at least `min_days` more days.
///
/// # Errors
/// The first check that fails, naming the file.
pub fn check_written(
    dir: &Path,
    dns: &[String],
    ips: &[IpAddr],
    min_days: u32,
) -> Result<(), Unusable> {
    let read = |name: &str| {
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => Ok((path, bytes)),
            Err(source) => Err(Unusable::Read { path, source }),
        }
    };
    let (ca_path, ca_pem) = read("ca.crt")?;
    let (leaf_path, leaf_pem) = read("tls.crt")?;
    let (key_path, key_pem) = read("tls.key")?;
    let ca_der = first_der(&ca_path, &ca_pem)?;
    let leaf_der = first_der(&leaf_path, &leaf_pem)?;
    let ca = parse_der(&ca_path, &ca_der)?;
    let leaf = parse_der(&leaf_path, &leaf_der)?;
    let invalid = |path: &Path, what: String| Unusable::Invalid {
        path: path.to_owned(),
        what,
    };

    let horizon = Utc::now().timestamp() + i64::from(min_days) * 86_400;
    for (path, cert) in [(&ca_path, &ca), (&leaf_path, &leaf)] {
        if cert.validity().not_after.timestamp() < horizon {
            return Err(invalid(
                path,
                format!("expires in less than {min_days} days"),
            ));
        }
    }
    // What a client does: the chain to ca.crt, validity and each name.
    let verifier = verifier(&ca_der).map_err(|e| invalid(&ca_path, e))?;
    let leaf_cert = CertificateDer::from(leaf_der.as_slice());
    let names = dns.iter().cloned().chain(ips.iter().map(IpAddr::to_string));
    for name in names {
        let server_name =
            ServerName::try_from(name.as_str()).map_err(|e| invalid(&leaf_path, e.to_string()))?;
        verifier
            .verify_server_cert(&leaf_cert, &[], &server_name, &[], UnixTime::now())
            .map_err(|e| invalid(&leaf_path, format!("not valid for {name}: {e}")))?;
    }

    let key = std::str::from_utf8(&key_pem)
        .ok()
        .and_then(|pem| KeyPair::from_pem(pem).ok())
        .ok_or_else(|| invalid(&key_path, "not a PEM private key".into()))?;
    if key.public_key_raw() != leaf.public_key().subject_public_key.data.as_ref() {
        return Err(invalid(&key_path, "does not match tls.crt".into()));
    }
    Ok(())
}

fn first_der(path: &Path, pem: &[u8]) -> Result<Vec<u8>, Unusable> {
    match rustls_pemfile::certs(&mut &pem[..]).next() {
        Some(Ok(der)) => Ok(der.to_vec()),
        _ => Err(Unusable::Invalid {
            path: path.to_owned(),
            what: "no PEM certificate".into(),
        }),
    }
}

fn parse_der<'a>(path: &Path, der: &'a [u8]) -> Result<X509Certificate<'a>, Unusable> {
    x509_parser::parse_x509_certificate(der)
        .map(|(_, cert)| cert)
        .map_err(|e| Unusable::Invalid {
            path: path.to_owned(),
            what: format!("not an X.509 certificate: {e}"),
        })
}

fn verifier(ca_der: &[u8]) -> Result<Arc<WebPkiServerVerifier>, String> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(ca_der.to_vec()))
        .map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local() -> (Vec<String>, Vec<IpAddr>) {
        (
            vec!["localhost".to_owned()],
            vec![
                IpAddr::from([127, 0, 0, 1]),
                IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]),
            ],
        )
    }

    #[test]
    fn a_written_bundle_is_reusable_until_close_to_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let (dns, ips) = local();
        generate(&dns, &ips, 30).unwrap().write(dir.path()).unwrap();
        check_written(dir.path(), &dns, &ips, 1).unwrap();
        let err = check_written(dir.path(), &dns, &ips, 31).unwrap_err();
        assert!(
            err.to_string().contains("expires in less than 31 days"),
            "{err}"
        );
    }

    #[test]
    fn a_bundle_that_does_not_fit_is_not_reused() {
        let (dns, ips) = local();
        let missing = tempfile::tempdir().unwrap();
        assert!(matches!(
            check_written(missing.path(), &dns, &ips, 1),
            Err(Unusable::Read { .. })
        ));

        let dir = tempfile::tempdir().unwrap();
        generate(&dns[..], &ips[..1], 30)
            .unwrap()
            .write(dir.path())
            .unwrap();
        let err = check_written(dir.path(), &dns, &ips, 1).unwrap_err();
        assert!(err.to_string().contains("not valid for ::1"), "{err}");

        // A key and CA from another bundle.
        let other = generate(&dns, &ips, 30).unwrap();
        generate(&dns, &ips, 30).unwrap().write(dir.path()).unwrap();
        write_file(
            &dir.path().join("tls.key"),
            other.server.key_pem.as_bytes(),
            true,
        )
        .unwrap();
        let err = check_written(dir.path(), &dns, &ips, 1).unwrap_err();
        assert!(err.to_string().ends_with("does not match tls.crt"), "{err}");
        write_file(&dir.path().join("ca.crt"), other.ca_pem.as_bytes(), false).unwrap();
        let err = check_written(dir.path(), &dns, &ips, 1).unwrap_err();
        assert!(err.to_string().contains("not valid for localhost"), "{err}");

        write_file(&dir.path().join("tls.crt"), b"garbage", false).unwrap();
        let err = check_written(dir.path(), &dns, &ips, 1).unwrap_err();
        assert!(err.to_string().ends_with("no PEM certificate"), "{err}");
    }
}
