//! End-to-end: a real kube-apiserver and etcd (started by
//! `tests/e2e/cluster.sh`, envtest-style) call a real `sandbox-webhook serve`
//! process on 127.0.0.1 through a MutatingWebhookConfiguration whose
//! `clientConfig.url` points at it. Every assertion is on the pod as stored by
//! the apiserver, read back with GET.
//!
//! The scenarios share one control plane and run in order, so this target has
//! its own main; it prints `N passed, M failed` and stops everything it
//! started, also when a scenario panics.

use std::net::TcpListener;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

type Result<T, E = Box<dyn std::error::Error + Send + Sync>> = std::result::Result<T, E>;

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-webhook");
const P: &str = "opensandbox.io";
/// Namespaces the test creates carry this label; the webhook configuration
/// selects only them, so nothing else in the control plane is touched.
const SCOPE_LABEL: &str = "sandbox-webhook-e2e";
const OWN_NAMESPACE: &str = "e2e-webhook-home";

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

// ---------------------------------------------------------------------------
// processes

/// The control plane; stopped on drop, by PID, whatever happened.
struct Cluster {
    dir: PathBuf,
}

impl Cluster {
    fn start(dir: PathBuf) -> Result<Self> {
        let status = Command::new(repo().join("tests/e2e/cluster.sh"))
            .arg("start")
            .arg(&dir)
            .stdout(Stdio::null())
            .status()?;
        // Constructed before the check so a half-started plane is stopped too.
        let cluster = Cluster { dir };
        if !status.success() {
            return Err(format!("cluster.sh start failed: {status}").into());
        }
        Ok(cluster)
    }

    fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubeconfig")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("tests/e2e/cluster.sh"))
            .arg("stop")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .status();
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A `sandbox-webhook serve` process; killed on drop.
struct Webhook {
    child: Option<Child>,
    args: Vec<String>,
    port: u16,
    admin_port: u16,
    log: PathBuf,
}

impl Webhook {
    fn start(certs: &Path, config: &Path, log: PathBuf) -> Result<Self> {
        let port = free_port()?;
        let admin_port = free_port()?;
        let args = vec![
            "serve".to_owned(),
            "--config".to_owned(),
            config.display().to_string(),
            "--tls-cert".to_owned(),
            certs.join("tls.crt").display().to_string(),
            "--tls-key".to_owned(),
            certs.join("tls.key").display().to_string(),
            "--addr".to_owned(),
            format!("127.0.0.1:{port}"),
            "--admin-addr".to_owned(),
            format!("127.0.0.1:{admin_port}"),
            "--namespace".to_owned(),
            OWN_NAMESPACE.to_owned(),
        ];
        let mut w = Webhook {
            child: None,
            args,
            port,
            admin_port,
            log,
        };
        w.restart()?;
        Ok(w)
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.port)
    }

    fn restart(&mut self) -> Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(BIN)
            .args(&self.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        let ready = format!("http://127.0.0.1:{}/readyz", self.admin_port);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                return Err(format!(
                    "webhook exited at start: {status}; see {}",
                    self.log.display()
                )
                .into());
            }
            if http_get(&ready).is_ok_and(|(code, _)| code == 200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err("webhook not ready within 20s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    fn metrics(&self) -> Result<String> {
        let (_, body) = http_get(&format!("http://127.0.0.1:{}/metrics", self.admin_port))?;
        Ok(body)
    }
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Plain-HTTP GET for the admin port, without pulling in a client stack.
fn http_get(url: &str) -> Result<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").ok_or("http only")?;
    let (host, path) = rest.split_once('/').ok_or("no path")?;
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("bad status line")?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

fn metric_sum(metrics: &str, name: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && labels.iter().all(|lab| l.contains(lab)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

// ---------------------------------------------------------------------------
// objects

fn sandbox_pod(name: &str, annotations: Value) -> Pod {
    let mut annotations = annotations;
    if annotations.is_null() {
        annotations = json!({});
    }
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {format!("{P}/id"): name},
            "annotations": annotations,
        },
        "spec": {
            "containers": [{"name": "sandbox", "image": "busybox:1.36", "command": ["sleep", "3600"]}]
        }
    }))
    .expect("pod")
}

fn plain_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "plain"}},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}
    }))
    .expect("pod")
}

struct WebhookEntry<'a> {
    name: &'a str,
    url: String,
    ca: &'a [u8],
    /// The label key whose existence selects pods.
    id_label: String,
}

fn webhook_configuration(name: &str, entries: &[WebhookEntry<'_>]) -> MutatingWebhookConfiguration {
    use base64::Engine;
    let webhooks: Vec<Value> = entries
        .iter()
        .map(|e| {
            json!({
                "name": e.name,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "reinvocationPolicy": "IfNeeded",
                "matchPolicy": "Equivalent",
                "timeoutSeconds": 5,
                "clientConfig": {
                    "url": e.url,
                    "caBundle": base64::engine::general_purpose::STANDARD.encode(e.ca),
                },
                "rules": [{
                    "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                    "resources": ["pods"], "scope": "Namespaced",
                }],
                "objectSelector": {"matchExpressions": [{"key": e.id_label, "operator": "Exists"}]},
                "namespaceSelector": {
                    "matchLabels": {SCOPE_LABEL: "true"},
                    "matchExpressions": [{
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": ["kube-system", "kube-public", "kube-node-lease", OWN_NAMESPACE],
                    }],
                },
            })
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": webhooks,
    }))
    .expect("webhook configuration")
}

// ---------------------------------------------------------------------------
// the suite

struct Env {
    client: Client,
    certs: PathBuf,
    ca: Vec<u8>,
    work: PathBuf,
    webhook: Webhook,
}

impl Env {
    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    async fn namespace(&self, name: &str, scoped: bool) -> Result<()> {
        let mut labels = serde_json::Map::new();
        if scoped {
            labels.insert(SCOPE_LABEL.into(), json!("true"));
        }
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels},
        }))?;
        let api: Api<Namespace> = Api::all(self.client.clone());
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn main_entry(&self) -> WebhookEntry<'_> {
        WebhookEntry {
            name: "pods.sandbox-webhook.opensandbox.io",
            url: self.webhook.url("/mutate"),
            ca: &self.ca,
            id_label: format!("{P}/id"),
        }
    }

    async fn register(&self, name: &str, entries: &[WebhookEntry<'_>]) -> Result<()> {
        let api: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        let _ = api.delete(name, &DeleteParams::default()).await;
        api.create(
            &PostParams::default(),
            &webhook_configuration(name, entries),
        )
        .await?;
        Ok(())
    }

    async fn unregister(&self, name: &str) -> Result<()> {
        let api: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        api.delete(name, &DeleteParams::default()).await?;
        Ok(())
    }

    /// The apiserver picks up webhook configurations asynchronously: wait
    /// until a dry-run sandbox create comes back mutated (or not).
    async fn wait_webhook_active(&self, ns: &str, active: bool) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let pp = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        loop {
            let probe = sandbox_pod("probe", json!({}));
            let mutated = match self.pods(ns).create(&pp, &probe).await {
                Ok(p) => has_init(&p, "execd-installer"),
                Err(_) => active,
            };
            if mutated == active {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("webhook did not become active={active} within 30s").into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

fn init_names(p: &Pod) -> Vec<String> {
    p.spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map(|v| v.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default()
}

fn has_init(p: &Pod, name: &str) -> bool {
    init_names(p).iter().any(|n| n == name)
}

fn annotation<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn check(cond: bool, what: &str) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(what.to_owned().into())
    }
}

async fn sandbox_pod_is_stored_mutated(env: &Env) -> Result<()> {
    let ns = "e2e-basic";
    env.namespace(ns, true).await?;
    let before = chrono::Utc::now();
    let pod = sandbox_pod(
        "basic",
        json!({format!("{P}/platform"): "linux/amd64", format!("{P}/timeout"): "1h"}),
    );
    env.pods(ns).create(&PostParams::default(), &pod).await?;
    let stored = env.pods(ns).get("basic").await?;
    let spec = stored.spec.as_ref().ok_or("no spec")?;
    check(
        init_names(&stored) == ["execd-installer"],
        "execd-installer is the only init container",
    )?;
    let volumes = spec.volumes.as_ref().ok_or("no volumes")?;
    check(
        volumes
            .iter()
            .any(|v| v.name == "opensandbox-bin" && v.empty_dir.is_some()),
        "opensandbox-bin emptyDir volume",
    )?;
    let main = &spec.containers[0];
    check(
        main.command.as_deref()
            == Some(
                &[
                    "/opt/opensandbox/bootstrap.sh".to_owned(),
                    "sleep".into(),
                    "3600".into(),
                ][..],
            ),
        "command wrapped by bootstrap.sh",
    )?;
    check(
        main.env
            .iter()
            .flatten()
            .any(|e| e.name == "EXECD" && e.value.as_deref() == Some("/opt/opensandbox/execd")),
        "EXECD env",
    )?;
    check(
        main.volume_mounts
            .iter()
            .flatten()
            .any(|m| m.name == "opensandbox-bin" && m.mount_path == "/opt/opensandbox"),
        "bin volume mounted in main",
    )?;
    let selector = spec.node_selector.as_ref().ok_or("no nodeSelector")?;
    check(
        selector.get("kubernetes.io/os").map(String::as_str) == Some("linux")
            && selector.get("kubernetes.io/arch").map(String::as_str) == Some("amd64"),
        "platform nodeSelector",
    )?;
    let at = annotation(&stored, &format!("{P}/expires-at")).ok_or("no expires-at")?;
    let at = chrono::DateTime::parse_from_rfc3339(at)?;
    let delta = at.signed_duration_since(before).num_seconds();
    check(
        (3590..=3660).contains(&delta),
        &format!("expires-at is about an hour ahead (got {delta}s)"),
    )?;
    Ok(())
}

async fn network_policy_gets_native_sidecar(env: &Env) -> Result<()> {
    let ns = "e2e-egress";
    env.namespace(ns, true).await?;
    let policy = r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}"#;
    let pod = sandbox_pod("egress", json!({format!("{P}/network-policy"): policy}));
    env.pods(ns).create(&PostParams::default(), &pod).await?;
    let stored = env.pods(ns).get("egress").await?;
    check(
        init_names(&stored) == ["execd-installer", "egress"],
        "installer then egress",
    )?;
    let spec = stored.spec.as_ref().ok_or("no spec")?;
    let egress = &spec.init_containers.as_ref().ok_or("no init")?[1];
    check(
        egress.restart_policy.as_deref() == Some("Always"),
        "egress is a native sidecar",
    )?;
    let token =
        annotation(&stored, &format!("{P}/egress-auth-token")).ok_or("no token annotation")?;
    check(token.len() == 32, "token is 32 characters")?;
    let env_token = egress
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "OPENSANDBOX_EGRESS_TOKEN")
        .and_then(|e| e.value.as_deref());
    check(
        env_token == Some(token),
        "sidecar token matches the annotation",
    )?;
    let main = &spec.containers[0];
    check(
        !main
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "OPENSANDBOX_EGRESS_TOKEN"),
        "token not in the main container",
    )?;
    let drops = main
        .security_context
        .as_ref()
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.drop.clone())
        .unwrap_or_default();
    check(
        drops.contains(&"NET_ADMIN".to_owned()),
        "main drops NET_ADMIN",
    )?;
    Ok(())
}

async fn invalid_pod_is_denied(env: &Env) -> Result<()> {
    let ns = "e2e-deny";
    env.namespace(ns, true).await?;
    let mut pod = sandbox_pod("conflict", json!({format!("{P}/platform"): "linux/amd64"}));
    pod.spec.as_mut().ok_or("spec")?.affinity = Some(serde_json::from_value(json!({
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}
        ]}}
    }))?);
    match env.pods(ns).create(&PostParams::default(), &pod).await {
        Ok(_) => Err("a conflicting pod was admitted".into()),
        Err(kube::Error::Api(e)) => check(
            e.message.contains(
                "platform conflict with template nodeAffinity: required node affinity does not allow requested platform 'linux/amd64'.",
            ),
            &format!("the client sees the webhook's message (got: {})", e.message),
        ),
        Err(e) => Err(e.into()),
    }?;
    check(
        env.pods(ns).get_opt("conflict").await?.is_none(),
        "nothing stored",
    )
}

async fn untouched_pods(env: &Env) -> Result<()> {
    let ns = "e2e-untouched";
    env.namespace(ns, true).await?;
    env.pods(ns)
        .create(&PostParams::default(), &plain_pod("plain"))
        .await?;
    let stored = env.pods(ns).get("plain").await?;
    check(
        init_names(&stored).is_empty(),
        "non-sandbox pod stored unchanged",
    )?;

    // Excluded by the namespaceSelector (kube-system) ...
    env.pods("kube-system")
        .create(
            &PostParams::default(),
            &sandbox_pod("system-sandbox", json!({})),
        )
        .await?;
    let stored = env.pods("kube-system").get("system-sandbox").await?;
    check(
        init_names(&stored).is_empty(),
        "sandbox pod in kube-system stored unchanged",
    )?;
    env.pods("kube-system")
        .delete("system-sandbox", &DeleteParams::default())
        .await?;

    // ... and by the code itself: the webhook's own namespace is excluded even
    // when a selector lets the request through. A scope-labelled namespace
    // named like the home namespace would be excluded by the selector too, so
    // ask the webhook directly through a configuration without that clause.
    let home = OWN_NAMESPACE;
    env.namespace(home, true).await?;
    let mut cfg = webhook_configuration("sandbox-webhook-e2e-home", &[env.main_entry()]);
    for w in cfg.webhooks.iter_mut().flatten() {
        w.namespace_selector = Some(serde_json::from_value(
            json!({"matchLabels": {SCOPE_LABEL: "true"}}),
        )?);
        w.name = "home.sandbox-webhook.opensandbox.io".into();
    }
    let api: Api<MutatingWebhookConfiguration> = Api::all(env.client.clone());
    let _ = api
        .delete("sandbox-webhook-e2e-home", &DeleteParams::default())
        .await;
    api.create(&PostParams::default(), &cfg).await?;
    let before = metric_sum(
        &env.webhook.metrics()?,
        "sandbox_webhook_admission_skips_total",
        &["excluded-namespace"],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pp = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let p = env
            .pods(home)
            .create(&pp, &sandbox_pod("home", json!({})))
            .await?;
        check(
            init_names(&p).is_empty(),
            "sandbox pod in the webhook's namespace is not mutated",
        )?;
        let after = metric_sum(
            &env.webhook.metrics()?,
            "sandbox_webhook_admission_skips_total",
            &["excluded-namespace"],
        );
        if after > before {
            break;
        }
        if Instant::now() > deadline {
            api.delete("sandbox-webhook-e2e-home", &DeleteParams::default())
                .await?;
            return Err("the webhook never saw the home-namespace pod".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    api.delete("sandbox-webhook-e2e-home", &DeleteParams::default())
        .await?;
    Ok(())
}

async fn dry_run_stores_nothing(env: &Env) -> Result<()> {
    let ns = "e2e-dryrun";
    env.namespace(ns, true).await?;
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let returned = env
        .pods(ns)
        .create(&pp, &sandbox_pod("dry", json!({})))
        .await?;
    check(
        has_init(&returned, "execd-installer"),
        "dry-run response is mutated",
    )?;
    check(
        env.pods(ns).get_opt("dry").await?.is_none(),
        "dry-run stored nothing",
    )
}

async fn reinvocation_keeps_one_of_each(env: &Env) -> Result<()> {
    let ns = "e2e-reinvoke";
    env.namespace(ns, true).await?;
    // A second mutating webhook after ours: the same binary under another
    // prefix. It adds its own manual-cleanup label, which makes the apiserver
    // call ours again (reinvocationPolicy: IfNeeded).
    let second_cfg = env.work.join("second.yaml");
    std::fs::write(&second_cfg, "prefix: second.e2e.io\n")?;
    let second = Webhook::start(&env.certs, &second_cfg, env.work.join("second-webhook.log"))?;
    let name = "sandbox-webhook-e2e-reinvoke";
    env.register(
        name,
        &[
            env.main_entry(),
            WebhookEntry {
                name: "second.e2e.io",
                url: second.url("/mutate"),
                ca: &env.ca,
                id_label: "second.e2e.io/id".into(),
            },
        ],
    )
    .await?;
    env.unregister("sandbox-webhook-e2e").await?;
    let result = async {
        env.wait_webhook_active(ns, true).await?;
        let unchanged_before = metric_sum(
            &env.webhook.metrics()?,
            "sandbox_webhook_admission_requests_total",
            &["outcome=\"unchanged\""],
        );
        let mut pod = sandbox_pod("twice", json!({format!("{P}/network-policy"): "{}"}));
        pod.metadata
            .labels
            .get_or_insert_default()
            .insert("second.e2e.io/id".into(), "x".into());
        env.pods(ns).create(&PostParams::default(), &pod).await?;
        let stored = env.pods(ns).get("twice").await?;
        let labels = stored.metadata.labels.clone().unwrap_or_default();
        check(
            labels
                .get("second.e2e.io/manual-cleanup")
                .map(String::as_str)
                == Some("true"),
            "the second webhook ran",
        )?;
        check(
            init_names(&stored) == ["execd-installer", "egress"],
            "one installer, one sidecar",
        )?;
        let spec = stored.spec.as_ref().ok_or("spec")?;
        let bins = spec
            .volumes
            .iter()
            .flatten()
            .filter(|v| v.name == "opensandbox-bin")
            .count();
        check(bins == 1, "one bin volume")?;
        let main = &spec.containers[0];
        let cmd = main.command.clone().unwrap_or_default();
        check(
            cmd.iter()
                .filter(|c| *c == "/opt/opensandbox/bootstrap.sh")
                .count()
                == 1,
            "one bootstrap.sh",
        )?;
        check(
            main.env
                .iter()
                .flatten()
                .filter(|e| e.name == "EXECD")
                .count()
                == 1,
            "one EXECD",
        )?;
        let unchanged_after = metric_sum(
            &env.webhook.metrics()?,
            "sandbox_webhook_admission_requests_total",
            &["outcome=\"unchanged\""],
        );
        check(
            unchanged_after > unchanged_before,
            "our webhook was reinvoked and answered with no patch",
        )
    }
    .await;
    env.unregister(name).await?;
    env.register("sandbox-webhook-e2e", &[env.main_entry()])
        .await?;
    env.wait_webhook_active(ns, true).await?;
    drop(second);
    result
}

async fn webhook_down_blocks_only_sandboxes(env: &mut Env) -> Result<()> {
    let ns = "e2e-down";
    env.namespace(ns, true).await?;
    env.webhook.stop();
    let refused = env
        .pods(ns)
        .create(
            &PostParams::default(),
            &sandbox_pod("while-down", json!({})),
        )
        .await;
    let plain = env
        .pods(ns)
        .create(&PostParams::default(), &plain_pod("plain-while-down"))
        .await;
    env.webhook.restart()?;
    match refused {
        Ok(_) => return Err("a sandbox pod was admitted while the webhook was down".into()),
        Err(kube::Error::Api(e)) => check(
            e.message.contains("failed calling webhook"),
            &format!(
                "refused because the webhook is unreachable (got: {})",
                e.message
            ),
        )?,
        Err(e) => return Err(e.into()),
    }
    plain.map_err(|e| format!("a non-sandbox pod was refused while the webhook was down: {e}"))?;
    env.pods(ns)
        .create(
            &PostParams::default(),
            &sandbox_pod("after-restart", json!({})),
        )
        .await?;
    let stored = env.pods(ns).get("after-restart").await?;
    check(
        has_init(&stored, "execd-installer"),
        "mutated again after restart",
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

async fn timed_creates(env: &Env, ns: &str, prefix: &str, n: usize) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let pod = sandbox_pod(
            &format!("{prefix}-{i}"),
            json!({format!("{P}/timeout"): "1h"}),
        );
        let t = Instant::now();
        env.pods(ns).create(&PostParams::default(), &pod).await?;
        out.push(t.elapsed());
    }
    out.sort();
    Ok(out)
}

async fn latency_added_by_the_webhook(env: &Env) -> Result<()> {
    const N: usize = 200;
    let ns = "e2e-latency";
    env.namespace(ns, true).await?;
    // Warm both paths first (connections, caches).
    timed_creates(env, ns, "warm-with", 20).await?;
    let with = timed_creates(env, ns, "with", N).await?;
    env.unregister("sandbox-webhook-e2e").await?;
    env.wait_webhook_active(ns, false).await?;
    timed_creates(env, ns, "warm-without", 20).await?;
    let without = timed_creates(env, ns, "without", N).await?;
    env.register("sandbox-webhook-e2e", &[env.main_entry()])
        .await?;
    env.wait_webhook_active(ns, true).await?;
    let (m1, m0) = (percentile(&with, 0.5), percentile(&without, 0.5));
    let (p1, p0) = (percentile(&with, 0.99), percentile(&without, 0.99));
    println!(
        "latency: {N} pod creates with the webhook vs {N} without: median {:.2} ms vs {:.2} ms (ratio {:.2}), p99 {:.2} ms vs {:.2} ms (ratio {:.2})",
        m1.as_secs_f64() * 1e3,
        m0.as_secs_f64() * 1e3,
        m1.as_secs_f64() / m0.as_secs_f64(),
        p1.as_secs_f64() * 1e3,
        p0.as_secs_f64() * 1e3,
        p1.as_secs_f64() / p0.as_secs_f64(),
    );
    let stored = env.pods(ns).get("with-0").await?;
    check(
        has_init(&stored, "execd-installer"),
        "the timed pods went through the webhook",
    )?;
    let stored = env.pods(ns).get("without-0").await?;
    check(
        !has_init(&stored, "execd-installer"),
        "the baseline pods did not",
    )
}

// ---------------------------------------------------------------------------

async fn setup(work: &Path, cluster: &Cluster) -> Result<Env> {
    let certs = work.join("certs");
    let status = Command::new(BIN)
        .args(["certs", "--dns", "localhost", "--ip", "127.0.0.1", "--out"])
        .arg(&certs)
        .status()?;
    check(status.success(), "sandbox-webhook certs")?;
    let ca = std::fs::read(certs.join("ca.crt"))?;
    let config = work.join("config.yaml");
    std::fs::write(&config, "{}\n")?;
    let webhook = Webhook::start(&certs, &config, work.join("webhook.log"))?;

    let kubeconfig = Kubeconfig::read_from(cluster.kubeconfig())?;
    let client_config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    let client = Client::try_from(client_config)?;
    let env = Env {
        client,
        certs,
        ca,
        work: work.to_owned(),
        webhook,
    };
    env.register("sandbox-webhook-e2e", &[env.main_entry()])
        .await?;
    env.namespace("e2e-basic", true).await?;
    env.wait_webhook_active("e2e-basic", true).await?;
    Ok(env)
}

macro_rules! scenario {
    ($results:ident, $env:expr, $f:ident) => {{
        let name = stringify!($f);
        let t = Instant::now();
        let outcome = AssertUnwindSafe($f($env)).catch_unwind().await;
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(panic) => Some(
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into()),
            ),
        };
        match &failure {
            None => println!("test {name} ... ok ({:.1}s)", t.elapsed().as_secs_f64()),
            Some(e) => println!("test {name} ... FAILED: {e}"),
        }
        $results.push((name, failure));
    }};
}

fn main() -> std::process::ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let work = std::env::temp_dir().join(format!("sandbox-webhook-e2e-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("work dir");

    println!("e2e: starting kube-apiserver and etcd (tests/e2e/cluster.sh)");
    let cluster = match Cluster::start(work.join("cluster")) {
        Ok(c) => c,
        Err(e) => {
            println!("e2e: cannot start the control plane: {e}");
            println!("0 passed, 1 failed");
            return std::process::ExitCode::FAILURE;
        }
    };
    let results = runtime.block_on(async {
        let mut results: Vec<(&str, Option<String>)> = Vec::new();
        let mut env = match setup(&work, &cluster).await {
            Ok(env) => env,
            Err(e) => {
                println!("test setup ... FAILED: {e}");
                results.push(("setup", Some(e.to_string())));
                return results;
            }
        };
        scenario!(results, &env, sandbox_pod_is_stored_mutated);
        scenario!(results, &env, network_policy_gets_native_sidecar);
        scenario!(results, &env, invalid_pod_is_denied);
        scenario!(results, &env, untouched_pods);
        scenario!(results, &env, dry_run_stores_nothing);
        scenario!(results, &env, reinvocation_keeps_one_of_each);
        scenario!(results, &mut env, webhook_down_blocks_only_sandboxes);
        scenario!(results, &env, latency_added_by_the_webhook);
        results
    });
    drop(cluster);
    let failed = results.iter().filter(|(_, f)| f.is_some()).count();
    let passed = results.len() - failed;
    if failed > 0 {
        println!("e2e: logs kept in {}", work.display());
    } else {
        let _ = std::fs::remove_dir_all(&work);
    }
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}
