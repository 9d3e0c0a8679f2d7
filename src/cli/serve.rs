//! `serve`: wires flags, logging, the runtime and signals to
//! [`crate::server::Server`]; `serve --dev` is in `super::dev`.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::exit::fail;
use super::logging::{LogFormat, init_logging};
use super::signals::Signals;

use crate::server::{self, Handler, Listeners, Server, ServerSettings, TlsFiles, Tuning};

/// Where `serve --dev` writes its throwaway certificates (git-ignored).
const DEV_CERT_DIR: &str = "certs/dev";
const ADDR: SocketAddr = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 8443);
const ADMIN_ADDR: SocketAddr = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 8080);

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Configuration file (YAML), reloaded when it changes; the built-in
    /// defaults when omitted.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serving certificate (PEM, leaf first), reloaded when it changes.
    #[arg(long, value_name = "FILE", required_unless_present = "dev")]
    pub tls_cert: Option<PathBuf>,
    /// Private key of the serving certificate (PEM).
    #[arg(long, value_name = "FILE", required_unless_present = "dev")]
    pub tls_key: Option<PathBuf>,
    /// CA bundle (PEM) for client certificates: turns on mTLS.
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,
    /// Admission (HTTPS) listen address [default: [::]:8443; with --dev
    /// 127.0.0.1:8443, and only loopback addresses are accepted].
    #[arg(long, value_name = "ADDR")]
    pub addr: Option<SocketAddr>,
    /// Admin (plain HTTP: /livez, /readyz, /metrics) listen address
    /// [default: [::]:8080; with --dev 127.0.0.1:8080].
    #[arg(long, value_name = "ADDR")]
    pub admin_addr: Option<SocketAddr>,
    /// The webhook's own namespace, which is never mutated.
    #[arg(long, value_name = "NS", env = "POD_NAMESPACE")]
    pub namespace: Option<String>,
    /// Log line format, on stderr; the level comes from `RUST_LOG` (default
    /// info).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Development mode: serve a throwaway CA's certificate for localhost,
    /// 127.0.0.1 and `::1` from `certs/dev/` (reused while valid, else written
    /// once the ports are bound), on loopback only.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key"])]
    pub dev: bool,
    /// Limits and timeouts.
    #[command(flatten)]
    pub tuning: Tuning,
    /// Async runtime worker threads; by default one per CPU this process may
    /// run on (its affinity mask and cgroup CPU quota included).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_threads: Option<u16>,
    /// Benchmarks only: answer every /mutate request with "allowed", no
    /// patch, without looking at the object (see docs/performance.md).
    #[arg(long, hide = true)]
    pub null_handler: bool,
    /// Benchmarks only: answer every /mutate request with the JSON patch in
    /// FILE, without looking at the object (bench/apiserver.sh).
    #[arg(
        long,
        hide = true,
        value_name = "FILE",
        conflicts_with = "null_handler"
    )]
    pub fixed_patch: Option<PathBuf>,
}

pub fn serve(args: ServeArgs) -> ExitCode {
    server::tune_allocator();
    let logging = init_logging(args.log_format);
    let dev = args.dev.then(|| Path::new(DEV_CERT_DIR));
    let (addr, admin_addr) = match dev {
        Some(_) => (
            args.addr.unwrap_or(super::dev::ADDR),
            args.admin_addr.unwrap_or(super::dev::ADMIN_ADDR),
        ),
        None => (
            args.addr.unwrap_or(ADDR),
            args.admin_addr.unwrap_or(ADMIN_ADDR),
        ),
    };
    if dev.is_some()
        && let Err(e) =
            super::dev::check_loopback(&[("--addr", addr), ("--admin-addr", admin_addr)])
    {
        return fail(e);
    }
    let tls = match (dev, args.tls_cert, args.tls_key) {
        (Some(dir), _, _) => TlsFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
            client_ca: args.client_ca,
        },
        (None, Some(cert), Some(key)) => TlsFiles {
            cert,
            key,
            client_ca: args.client_ca,
        },
        // clap enforces `required_unless_present = "dev"`.
        _ => return fail("--tls-cert and --tls-key are required (or use --dev)"),
    };
    let mut tuning = args.tuning;
    fit_fd_limit(&mut tuning);
    let mut settings = ServerSettings::new(tls);
    settings.addr = addr;
    settings.admin_addr = admin_addr;
    settings.config_path = args.config;
    settings.own_namespace = args.namespace.filter(|ns| !ns.is_empty());
    settings.tuning = tuning;
    settings.log_lines_dropped.clone_from(&logging.dropped);
    if args.null_handler {
        tracing::warn!("--null-handler: every request is allowed unread (benchmarks only)");
        settings.handler = Handler::Null;
    }
    if let Some(path) = &args.fixed_patch {
        let patch = match read_patch(path) {
            Ok(patch) => patch,
            Err(e) => return fail(format!("--fixed-patch {}: {e}", path.display())),
        };
        tracing::warn!(
            "--fixed-patch: every request is answered with one patch, unread (benchmarks only)"
        );
        // Read once and kept for the process's life.
        settings.handler = Handler::Fixed(Box::leak(Box::new(patch)));
    }

    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Some(n) = args.worker_threads {
        runtime.worker_threads(n.into());
    }
    let runtime = match runtime.build() {
        Ok(rt) => rt,
        Err(e) => return fail(format!("cannot start the async runtime: {e}")),
    };
    let result = runtime.block_on(async {
        let signals = Signals::new().map_err(|e| format!("cannot listen for signals: {e}"))?;
        let server = match dev {
            Some(dir) => {
                let listeners = Listeners::bind(addr, admin_addr).map_err(|e| e.to_string())?;
                super::dev::ensure_certs(dir).map_err(|e| e.to_string())?;
                Server::bind_to(settings, listeners).await
            }
            None => Server::bind(settings).await,
        };
        let server = server.map_err(|e| e.to_string())?;
        server
            .serve(signals.first(""))
            .await
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

/// Both connection caps, plus room for files and the runtime, must fit in
/// the open-files limit, or accepts fail with EMFILE before the admission
/// cap is reached and a flood locks clients out instead of being evicted.
/// The soft limit is raised to the hard one; if that is still too low, the
/// admission cap is lowered to fit.
fn fit_fd_limit(tuning: &mut Tuning) {
    const RESERVE: u64 = 64;
    let limit = match server::raise_fd_limit() {
        Ok(limit) => limit,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read or raise the open-files limit");
            return;
        }
    };
    let admin = u64::from(tuning.admin_max_connections);
    let needed = u64::from(tuning.max_connections) + admin + RESERVE;
    if limit >= needed {
        tracing::debug!(limit, "open-files limit");
        return;
    }
    let fits = limit.saturating_sub(admin + RESERVE).max(16);
    tracing::warn!(
        limit,
        max_connections = fits,
        "the open-files limit is below the connection caps; lowering --max-connections to fit"
    );
    tuning.max_connections = u32::try_from(fits).unwrap_or(u32::MAX);
}

/// The JSON patch in `path`, for `--fixed-patch`.
fn read_patch(path: &Path) -> Result<crate::mutate::Patch, String> {
    let json = std::fs::read(path).map_err(|e| e.to_string())?;
    crate::mutate::Patch::from_json(json).map_err(|e| e.to_string())
}
