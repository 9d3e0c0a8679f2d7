//! What every scenario of the real-node suite gets: a client, the cluster's
//! variables (`cluster.env`), the release the suite installed with
//! `helm install`, and helpers for pods that really run on the real node.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::owners::OwnerTurns;
pub use common::P;
use common::cluster::{ScenarioNamespaces, run, wait_noting};
pub use common::cluster::{is_ready, wait_for};
use common::cluster_env::ClusterEnv;
use common::pods::{SandboxPod, pod_names};
pub use common::processes::{Cluster, Result, check, repo};

/// The namespace label that sets the Pod Security level a namespace enforces.
pub const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
/// A Pod Security level that admits a sandbox with a network policy.
pub const PRIVILEGED: (&str, &str) = (ENFORCE, "privileged");

/// The release, as a platform team would name it.
pub const RELEASE: &str = "sandbox-webhook";
pub const RELEASE_NS: &str = "sandbox-webhook";

/// The cluster of `cluster.sh start --node` (its `cluster.env`), scenario
/// namespaces `e2e-node-<id>`.
pub struct Env {
    cluster: ClusterEnv,
    /// The control plane's directory.
    pub dir: PathBuf,
    /// The project's image, as the chart names it.
    pub image: String,
    /// When scenarios c and d of `owners` may change `ownerActions`.
    pub owners: OwnerTurns,
}

/// Builds the project's image, imports it into the real node and installs
/// the chart with `helm install`, as a platform team would (only the node's
/// selector and toleration, and the stand-in execd and egress images, set).
pub async fn setup(work: &Path, cluster: &Cluster) -> Result<Env> {
    let started = Instant::now();
    let out = run(
        Command::new(repo().join("tests/image/node/webhook-image.sh")).arg(cluster.dir()),
        "",
    )?;
    let env = Env {
        cluster: ClusterEnv::new(work, cluster, NAMESPACES).await?,
        dir: cluster.dir().to_owned(),
        image: out.trim().to_owned(),
        owners: OwnerTurns::default(),
    };
    println!(
        "  the image {} built (podman) and imported into the node in {:.1}s",
        env.image,
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    install(&env)?;
    println!(
        "  helm install {RELEASE} (in-cluster, on the real node) ready in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    wait_for(
        "the apiserver to call the installed webhook",
        Duration::from_secs(60),
        async || Ok(env.injected("default").await?.then_some(())),
    )
    .await?;
    Ok(env)
}

impl Deref for Env {
    type Target = ClusterEnv;

    fn deref(&self) -> &ClusterEnv {
        &self.cluster
    }
}

fn install(env: &Env) -> Result<()> {
    let on_node = env.on_node_values()?;
    let values = json!({
        "nodeSelector": on_node["nodeSelector"],
        "tolerations": on_node["tolerations"],
        "controller": {"nodeSelector": on_node["nodeSelector"], "tolerations": on_node["tolerations"]},
        "config": {
            "execd": {"image": env.var("EXECD_IMAGE")?},
            "egress": {"image": env.var("EGRESS_IMAGE")?},
        },
    });
    let file = env.work.join("values.yaml");
    std::fs::write(&file, serde_json::to_vec_pretty(&values)?)?;
    run(
        Command::new(env.var("HELM")?)
            .args(["install", RELEASE])
            .arg(repo().join("charts/sandbox-webhook"))
            .args(["--namespace", RELEASE_NS, "--create-namespace"])
            .arg(format!("--kubeconfig={}", env.var("KUBECONFIG")?))
            .arg("--values")
            .arg(&file)
            .args(["--wait", "--timeout", "180s"]),
        "",
    )?;
    Ok(())
}

impl Env {
    /// `helm upgrade` of the release with `sets` (`--set` each) on top of
    /// its values, as an operator changes them; returns once it rolled out.
    pub fn helm_upgrade(&self, sets: &[&str]) -> Result<()> {
        let mut command = Command::new(self.var("HELM")?);
        command
            .args(["upgrade", RELEASE])
            .arg(repo().join("charts/sandbox-webhook"))
            .args(["--namespace", RELEASE_NS, "--reuse-values"])
            .arg(format!("--kubeconfig={}", self.var("KUBECONFIG")?));
        for set in sets {
            command.args(["--set", set]);
        }
        run(command.args(["--wait", "--timeout", "180s"]), "")?;
        Ok(())
    }

    /// The node selector and toleration that put a pod on the real node.
    pub fn on_node_values(&self) -> Result<Value> {
        let (key, value) = self
            .var("NODE_SELECTOR")?
            .split_once('=')
            .ok_or("NODE_SELECTOR is not key=value")?;
        let taint = self.var("NODE_TAINT")?;
        let taint_key = taint.split_once('=').map_or(taint, |(k, _)| k);
        Ok(json!({
            "nodeSelector": {key: value},
            "tolerations": [{"key": taint_key, "operator": "Exists", "effect": "NoSchedule"}],
        }))
    }

    /// A sandbox pod `name` on the real node, running `script` with the
    /// node's busybox image (under bootstrap.sh once injected).
    pub fn sandbox(&self, name: &str, script: &str) -> Result<SandboxPod> {
        let pod = SandboxPod::new(name)
            .image(self.var("BUSYBOX_IMAGE")?)
            .command(&["sh", "-c", script]);
        Ok(self
            .on_node(pod)?
            .spec_field("terminationGracePeriodSeconds", json!(5))
            .spec_field("enableServiceLinks", json!(false)))
    }

    /// `pod` with the node selector and toleration that put it on the real
    /// node.
    pub fn on_node(&self, pod: SandboxPod) -> Result<SandboxPod> {
        let on_node = self.on_node_values()?;
        Ok(pod
            .spec_field("nodeSelector", on_node["nodeSelector"].clone())
            .spec_field("tolerations", on_node["tolerations"].clone()))
    }

    /// Runs the cluster's kubectl with `args`; its stdout.
    pub fn kubectl(&self, args: &[&str]) -> Result<String> {
        run_command(self.kubectl_command(args)?)
    }

    /// The cluster's kubectl with `args`, to run elsewhere.
    pub fn kubectl_command(&self, args: &[&str]) -> Result<Command> {
        let mut c = Command::new(self.var("KUBECTL")?);
        c.arg(format!("--kubeconfig={}", self.var("KUBECONFIG")?))
            .args(args);
        Ok(c)
    }

    /// Runs the node's `ctr` (namespace k8s.io) with `args`; its stdout.
    pub fn ctr(&self, args: &[&str]) -> Result<String> {
        run(
            Command::new(self.var("NODE_CTR")?)
                .args(["--address", self.var("NODE_CONTAINERD_SOCK")?])
                .args(["--namespace", "k8s.io"])
                .args(args),
            "",
        )
    }

    /// A server-side dry-run sandbox create in `ns` comes back injected.
    pub async fn injected(&self, ns: &str) -> Result<bool> {
        let dry = common::cluster::dry_run();
        let pod = self
            .pods(ns)
            .create(&dry, &self.sandbox("probe", "true")?.pod())
            .await?;
        Ok(pod
            .spec
            .iter()
            .flat_map(|s| s.init_containers.iter().flatten())
            .any(|c| c.name == "execd-installer"))
    }

    /// The release's pods of `component` (`webhook` or `controller`).
    pub async fn release_pods(&self, component: &str) -> Result<Vec<Pod>> {
        // The chart's selector labels (the controller's name has a suffix).
        let name = match component {
            "controller" => "sandbox-webhook-controller",
            _ => "sandbox-webhook",
        };
        let selector =
            format!("app.kubernetes.io/name={name},app.kubernetes.io/instance={RELEASE}");
        let list = self
            .pods(RELEASE_NS)
            .list(&ListParams::default().labels(&selector))
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect())
    }

    /// The names of the release's pods of `component`.
    pub async fn release_pod_names(&self, component: &str) -> Result<Vec<String>> {
        Ok(pod_names(&self.release_pods(component).await?))
    }

    /// Who holds the controller's Lease, if anyone does.
    pub async fn controller_lease_holder(&self) -> Result<Option<String>> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), RELEASE_NS);
        Ok(leases
            .get_opt(&format!("{RELEASE}-controller"))
            .await?
            .and_then(|l| l.spec?.holder_identity))
    }

    /// Waits until pod `name` in `ns` is Ready; the pod.
    pub async fn ready(&self, ns: &str, name: &str, timeout: Duration) -> Result<Pod> {
        let pods = self.pods(ns);
        wait_for(&format!("pod {ns}/{name} Ready"), timeout, async || {
            let p = pods.get(name).await?;
            Ok(is_ready(&p).then_some(p))
        })
        .await
    }

    /// The logs of container `container` of pod `name` in `ns`, through the
    /// apiserver (and the kubelet's authenticated API).
    pub fn logs(&self, ns: &str, name: &str, container: &str) -> Result<String> {
        self.kubectl(&["logs", "-n", ns, name, "-c", container])
    }

    /// [`Env::logs`] once they have a line containing `needle`: a container
    /// without a readiness probe is Ready as soon as it started, before its
    /// command has written anything.
    pub async fn logs_with(
        &self,
        ns: &str,
        name: &str,
        container: &str,
        needle: &str,
    ) -> Result<String> {
        wait_noting(
            &format!("a line with {needle:?} in the log of {ns}/{name}/{container}"),
            Duration::from_secs(30),
            "the log",
            async |last: &mut String| {
                *last = self.logs(ns, name, container)?;
                Ok(last.contains(needle).then(|| last.clone()))
            },
        )
        .await
    }
}

/// Runs `command`; its stdout, or an error with its stderr.
pub fn run_command(mut command: Command) -> Result<String> {
    run(&mut command, "")
}

/// Deleting one waits for the kubelet stops a pod's containers first.
const NAMESPACES: ScenarioNamespaces = ScenarioNamespaces {
    prefix: "e2e-node",
    cleanup: Duration::from_secs(120),
};

/// Lines of `log` that contain `needle`, for messages.
pub fn lines_with<'a>(log: &'a str, needle: &str) -> Vec<&'a str> {
    log.lines().filter(|l| l.contains(needle)).collect()
}

/// `Err` naming `what` unless `log` has a line containing `needle`; shows
/// the log's last lines otherwise.
pub fn logged(log: &str, needle: &str, what: &str) -> Result<()> {
    let tail: Vec<&str> = log.lines().rev().take(15).collect();
    check(
        log.lines().any(|l| l.contains(needle)),
        format!(
            "{what}: no line with {needle:?}; the log ends with:\n      {}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n      ")
        ),
    )
}
