//! `certs`: a private CA and a serving certificate for real installs
//! (`certs/gen.sh` calls this) and tests.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::certs;

#[derive(Debug, clap::Args)]
pub struct CertsArgs {
    /// DNS name for the serving certificate (repeatable), e.g.
    /// sandbox-webhook.opensandbox-system.svc.
    #[arg(long = "dns", value_name = "NAME")]
    pub dns: Vec<String>,
    /// IP address for the serving certificate (repeatable).
    #[arg(long = "ip", value_name = "IP")]
    pub ip: Vec<IpAddr>,
    /// Output directory for ca.crt, tls.crt and tls.key.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Validity of the serving certificate in days (the CA gets twice that).
    #[arg(long, value_name = "N", default_value_t = 365,
          value_parser = clap::value_parser!(u32).range(1..=36500))]
    pub days: u32,
}

/// Names used when none are given: a webhook on this machine.
pub(crate) fn local_names() -> (Vec<String>, Vec<IpAddr>) {
    (
        vec!["localhost".to_owned()],
        vec![
            IpAddr::from([127, 0, 0, 1]),
            IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1]),
        ],
    )
}

pub fn certs(args: CertsArgs) -> ExitCode {
    let (dns, ip) = if args.dns.is_empty() && args.ip.is_empty() {
        local_names()
    } else {
        (args.dns, args.ip)
    };
    let written = certs::generate(&dns, &ip, args.days).and_then(|b| b.write(&args.out));
    match written {
        Ok(()) => {
            let names: Vec<String> = dns
                .iter()
                .cloned()
                .chain(ip.iter().map(IpAddr::to_string))
                .collect();
            eprintln!(
                "wrote {dir}/ca.crt, {dir}/tls.crt, {dir}/tls.key for {}",
                names.join(", "),
                dir = args.out.display()
            );
            super::exit::OK
        }
        Err(e) => super::exit::fail(e),
    }
}
