//! `controller`: wires flags, logging, the runtime and signals to
//! [`crate::controller::run`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use super::exit::fail;
use super::logging::{LogFormat, init_logging};
use super::signals::Signals;
use crate::controller::initial_list::InitialList;
use crate::controller::{self, ControllerSettings, LeaseSettings};

#[derive(Debug, clap::Args)]
pub struct ControllerArgs {
    /// Configuration file (YAML), the same file as `serve`'s; its
    /// `controller:` section is read here. Defaults when omitted.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Admin (plain HTTP: /livez, /readyz, /metrics) listen address.
    #[arg(long, value_name = "ADDR", default_value = "[::]:8080")]
    pub admin_addr: SocketAddr,
    /// The controller's own namespace: its pods are ignored, and the Lease
    /// lives there unless --lease-namespace says otherwise.
    #[arg(long, value_name = "NS", env = "POD_NAMESPACE")]
    pub namespace: Option<String>,
    /// Name of the coordination.k8s.io/v1 Lease the replicas share.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "sandbox-webhook-controller"
    )]
    pub lease_name: String,
    /// Namespace of the Lease (default: --namespace, else `default`).
    #[arg(long, value_name = "NS")]
    pub lease_namespace: Option<String>,
    /// Seconds a standby waits after the leader's last renewal before it
    /// takes over.
    #[arg(long, value_name = "SECONDS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub lease_duration: u64,
    /// The leader renews this many seconds before its lease would run out.
    #[arg(long, value_name = "SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub lease_grace: u64,
    /// This replica's identity in the Lease (default: `$POD_NAME`, else the
    /// host name and a random suffix).
    #[arg(long, value_name = "ID", env = "POD_NAME")]
    pub identity: Option<String>,
    /// How the pod watch fills its cache: `streaming` (the apiserver sends
    /// the pods as watch events, KEP-3157), `list` (a paginated LIST), or
    /// `auto`: streaming where the apiserver serves it.
    #[arg(long, value_enum, default_value_t = InitialList::Auto)]
    pub initial_list: InitialList,
    /// Log line format, on stderr; the level comes from `RUST_LOG` (default
    /// info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

pub fn controller(args: ControllerArgs) -> ExitCode {
    let _logging = init_logging(args.log_format);
    if args.lease_grace >= args.lease_duration {
        return fail("--lease-grace must be shorter than --lease-duration");
    }
    let namespace = args.namespace.filter(|ns| !ns.is_empty());
    let identity = match args.identity.filter(|i| !i.is_empty()) {
        Some(identity) => identity,
        None => match default_identity() {
            Ok(identity) => identity,
            Err(e) => return fail(e),
        },
    };
    let settings = ControllerSettings {
        config_path: args.config,
        admin_addr: args.admin_addr,
        lease: LeaseSettings {
            name: args.lease_name,
            namespace: args
                .lease_namespace
                .or_else(|| namespace.clone())
                .unwrap_or_else(|| "default".to_owned()),
            identity,
            duration_seconds: args.lease_duration,
            grace_seconds: args.lease_grace,
        },
        own_namespace: namespace,
        initial_list: args.initial_list,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(async {
        let signals = Signals::new().map_err(|e| format!("cannot listen for signals: {e}"))?;
        controller::run(settings, signals.first(": releasing leadership"))
            .await
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// The host name and 8 random hex digits, so two replicas on one host (or
/// a restarted one) never share an identity.
fn default_identity() -> Result<String, String> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for an identity: {e}"))?;
    let suffix = format!("{:08x}", u32::from_be_bytes(bytes));
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "controller".to_owned(), |h| h.trim().to_owned());
    Ok(format!("{host}-{suffix}"))
}
