//! The e2e main (`common::suite::main`): the shared webhook, and each
//! scenario's webhook configurations removed after it.

use std::path::Path;
use std::process::{Command, ExitCode};

use crate::Result;
use crate::env::{Env, check};
use crate::processes::Webhook;
use common::processes::{Cluster, Plane, bin_path};
use common::suite;

async fn setup(work: &Path, cluster: &Cluster) -> Result<Env> {
    let certs = work.join("certs");
    let status = Command::new(bin_path())
        .args(["certs", "--dns", "localhost", "--ip", "127.0.0.1", "--out"])
        .arg(&certs)
        .status()?;
    check(status.success(), "sandbox-webhook certs")?;
    let ca = std::fs::read(certs.join("ca.crt"))?;
    let config = work.join("config.yaml");
    std::fs::write(&config, "{}\n")?;
    let webhook = Webhook::start(&certs, &config, work.join("webhook.log"))?;
    let audit_log = cluster.vars()?.get("AUDIT_LOG")?.into();
    Ok(Env {
        audit_log,
        client: cluster.client().await?,
        certs,
        ca,
        config,
        work: work.to_owned(),
        webhook,
    })
}

/// Each scenario's webhook configurations are removed after it.
pub fn main() -> ExitCode {
    let clean_up = async |env: &mut Env, name: &'static str| env.clean_up(name).await;
    suite::main(
        "e2e",
        crate::SCENARIOS,
        Plane::Bare,
        setup,
        crate::run_scenario,
        ("cleaning up", clean_up),
    )
}
