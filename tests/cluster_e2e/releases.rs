//! Another release beside the one `cluster.sh up` installed: its own
//! `sandbox-webhook serve` (and, when asked, `controller`) on the host,
//! with its own configuration file, and the chart's webhook configurations
//! for it (rendered by `helm template`, in the chart's `webhook.url` mode),
//! removed again by [`Release::remove`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::harness::{Env, P, Result, annotation, sandbox_pod, wait_for};
use common::metrics::Metrics;
use common::processes::{Daemon, daemon_args, free_port, serve_args};

pub struct Release {
    pub webhook: Daemon,
    pub controller: Option<(Daemon, String)>,
    /// The chart's objects, as applied.
    objects: String,
}

/// `cluster.sh up`'s webhook configuration file with `changes` (a YAML
/// mapping merged over it), written to the work directory as `name`.
pub fn config_file(env: &Env, from: &str, name: &str, changes: &str) -> Result<PathBuf> {
    let mut config: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(env.var(from)?)?)?;
    let changes: Value = serde_yaml_ng::from_str(changes)?;
    json_patch::merge(&mut config, &changes);
    let path = env.work.join(name);
    std::fs::write(&path, serde_yaml_ng::to_string(&config)?)?;
    Ok(path)
}

impl Release {
    /// Starts release `name`'s webhook with `config` (YAML merged over the
    /// installed release's configuration), its controller too when
    /// `controller`, and applies the chart's webhook configurations
    /// rendered with `set` (`--set` values) for it.
    pub fn install(
        env: &Env,
        name: &str,
        config: &str,
        controller: bool,
        set: &[&str],
    ) -> Result<Release> {
        let file = config_file(
            env,
            "WEBHOOK_CONFIG",
            &format!("{name}-config.yaml"),
            config,
        )?;
        let HostWebhook {
            daemon: webhook,
            port,
            ..
        } = HostWebhook::start(env, &file.display().to_string(), &format!("{name}-webhook"))?;
        let namespace = env.var("RELEASE_NAMESPACE")?;

        let controller = if controller {
            let file = config_file(
                env,
                "CONTROLLER_CONFIG",
                &format!("{name}-controller.yaml"),
                config,
            )?;
            let admin = format!("127.0.0.1:{}", free_port()?);
            let mut args =
                daemon_args("controller", &file.display().to_string(), &admin, namespace);
            args.extend([
                "--lease-name".to_owned(),
                format!("{name}-controller"),
                "--identity".to_owned(),
                format!("{name}-host"),
            ]);
            let mut daemon = Daemon::new(
                "controller",
                env.work.join(format!("{name}-controller.log")),
            );
            let kubeconfig = PathBuf::from(env.var("KUBECONFIG")?);
            daemon.start(
                &args,
                &[("KUBECONFIG", &kubeconfig)],
                &admin,
                Duration::from_secs(60),
            )?;
            Some((daemon, admin))
        } else {
            None
        };

        let url = format!("webhook.url=https://127.0.0.1:{port}/mutate");
        let ca = format!("webhook.caBundle={}", env.var("WEBHOOK_CA")?);
        let mut args = vec![
            "--namespace",
            namespace,
            "--set",
            "deployment.enabled=false",
            "--set",
            &url,
            "--set-file",
            &ca,
            "--set",
            "validation.enabled=false",
            "--show-only",
            "templates/mutatingwebhookconfiguration.yaml",
        ];
        for value in set {
            args.extend(["--set", value]);
        }
        let objects = env.helm_template(name, &args)?;
        env.kubectl(&["apply", "-f", "-"], &objects)?;
        Ok(Release {
            webhook,
            controller,
            objects,
        })
    }

    /// Removes the release's webhook configurations (its processes stop
    /// when it is dropped).
    pub fn remove(&self, env: &Env) -> Result<()> {
        env.kubectl(&["delete", "--ignore-not-found", "-f", "-"], &self.objects)?;
        Ok(())
    }

    pub fn controller_metrics(&self) -> Result<Metrics> {
        let (_, admin) = self.controller.as_ref().ok_or("no controller")?;
        metrics(admin)
    }
}

/// One `sandbox-webhook serve` on the host: the cluster's serving
/// certificate, the configuration file `config`, a free port and admin
/// port; its log is `<log>.log` in the work directory.
pub struct HostWebhook {
    pub daemon: Daemon,
    pub port: u16,
    pub admin: String,
}

impl HostWebhook {
    pub fn start(env: &Env, config: &str, log: &str) -> Result<HostWebhook> {
        let certs = PathBuf::from(env.var("WEBHOOK_CA")?)
            .parent()
            .map(Path::to_path_buf)
            .ok_or("WEBHOOK_CA has no directory")?;
        let port = free_port()?;
        let admin = format!("127.0.0.1:{}", free_port()?);
        let namespace = env.var("RELEASE_NAMESPACE")?;
        let args = serve_args(config, &certs, port, &admin, namespace);
        let mut daemon = Daemon::new("webhook", env.work.join(format!("{log}.log")));
        daemon.start(&args, &[], &admin, Duration::from_secs(20))?;
        Ok(HostWebhook {
            daemon,
            port,
            admin,
        })
    }
}

pub fn metrics(admin: &str) -> Result<Metrics> {
    let (code, body) = common::wire::get(admin, "/metrics")?;
    common::processes::check(code == 200, format!("{admin}/metrics answered {code}"))?;
    Ok(Metrics::parse(&body))
}

/// The record of `pod`, read.
pub fn record(pod: &Pod) -> Option<Value> {
    serde_json::from_str(annotation(pod, &format!("{P}/injected"))?).ok()
}

/// Waits until a dry-run create of a sandbox in `ns` (with `labels`) is
/// injected with a record whose `revision` is `revision` (`None`: the
/// default release's, without one): the apiserver picks up webhook
/// configurations and namespace labels asynchronously.
pub async fn wait_injected_by(
    env: &Env,
    ns: &str,
    labels: &[(&str, &str)],
    revision: Option<&str>,
) -> Result<()> {
    let pods = env.pods(ns);
    let dry = common::cluster::dry_run();
    let mut probe = sandbox_pod("probe", &serde_json::json!({}), &serde_json::json!({}))?;
    for (k, v) in labels {
        probe
            .metadata
            .labels
            .get_or_insert_default()
            .insert((*k).to_owned(), (*v).to_owned());
    }
    let what = format!("a sandbox in {ns} injected by revision {revision:?}");
    wait_for(&what, Duration::from_secs(30), async || {
        let stored = pods.create(&dry, &probe).await?;
        let by = record(&stored).map(|r| r["revision"].as_str().map(str::to_owned));
        Ok((by == Some(revision.map(str::to_owned))).then_some(()))
    })
    .await
}
