//! The webhook processes a run starts: `sandbox-webhook serve` on 127.0.0.1,
//! killed on drop (the control plane is `common::processes::Cluster`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::Result;
use common::metrics::Metrics;
use common::processes::{Daemon, free_port, serve_args};
use common::wire;

/// The `--namespace` of every webhook the tests start: always excluded.
pub const OWN_NAMESPACE: &str = "e2e-webhook-home";

/// A `sandbox-webhook serve` process; killed on drop.
pub struct Webhook {
    daemon: Daemon,
    args: Vec<String>,
    port: u16,
    admin: String,
}

impl Webhook {
    pub fn start(certs: &Path, config: &Path, log: PathBuf) -> Result<Self> {
        Self::start_with(certs, config, log, &[])
    }

    /// [`Webhook::start`] with more `serve` flags.
    pub fn start_with(certs: &Path, config: &Path, log: PathBuf, extra: &[String]) -> Result<Self> {
        let port = free_port()?;
        let admin = format!("127.0.0.1:{}", free_port()?);
        let mut args = serve_args(
            &config.display().to_string(),
            certs,
            port,
            &admin,
            OWN_NAMESPACE,
        );
        args.extend_from_slice(extra);
        let mut w = Webhook {
            daemon: Daemon::new("webhook", log),
            args,
            port,
            admin,
        };
        w.restart()?;
        Ok(w)
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    pub fn restart(&mut self) -> Result<()> {
        self.daemon
            .start(&self.args, &[], &self.admin, Duration::from_secs(20))
    }

    pub fn stop(&mut self) {
        self.daemon.kill();
    }

    pub fn metrics(&self) -> Result<Metrics> {
        let (code, body) = wire::get(&self.admin, "/metrics")?;
        if code != 200 {
            return Err(format!("/metrics answered {code}").into());
        }
        Ok(Metrics::parse(&body))
    }
}
