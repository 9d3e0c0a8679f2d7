//! Certificates for installs, `serve --dev` and tests: a private CA and the
//! leaf certificates it signs (ECDSA P-256, via rcgen).

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use chrono::{Datelike, Days, Utc};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SerialNumber,
};
use thiserror::Error;

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
    pub fn new(common_name: &str, days: u32) -> Result<Self, CertError> {
        let mut params = base_params(common_name, Vec::new(), days)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate()?;
        Ok(Ca {
            issuer: CertifiedIssuer::self_signed(params, key)?,
        })
    }

    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A serving certificate for the given DNS names and IP addresses.
    pub fn server(&self, dns: &[String], ips: &[IpAddr], days: u32) -> Result<Pair, CertError> {
        let names: Vec<String> = dns
            .iter()
            .cloned()
            .chain(ips.iter().map(IpAddr::to_string))
            .collect();
        let common_name = names.first().map_or("sandbox-webhook", String::as_str);
        let mut params = base_params(common_name, names.clone(), days)?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params)
    }

    /// A client certificate (for mTLS tests and setups).
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
    let mut params = CertificateParams::new(names)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    params.distinguished_name = dn;
    // Day granularity is enough; starting yesterday tolerates clock skew.
    let today = Utc::now().date_naive();
    let start = today.checked_sub_days(Days::new(1));
    let end = today.checked_add_days(Days::new(u64::from(days)));
    let (Some(start), Some(end)) = (start, end) else {
        return Err(CertError::Days(days));
    };
    let ymd = |d: chrono::NaiveDate| rcgen::date_time_ymd(d.year(), d.month() as u8, d.day() as u8);
    params.not_before = ymd(start);
    params.not_after = ymd(end);
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
