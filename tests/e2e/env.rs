//! What every scenario gets: a client, the shared webhook process, and a
//! [`Scope`] of its own: namespaces labelled with the scenario's name and a
//! `MutatingWebhookConfiguration`, named after the scenario, that selects only
//! those namespaces (and, for the pre-flight, a `ValidatingWebhookConfiguration`
//! likewise). No scenario sees another's configuration, so none
//! depends on which ran before it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::Result;
use crate::processes::{OWN_NAMESPACE, Webhook};
use common::P;
use common::pods::SandboxPod;
pub use common::processes::check;

/// Namespaces and webhook configurations of a scenario carry this label,
/// with the scenario's name as the value.
pub const SCOPE_LABEL: &str = "sandbox-webhook-e2e/scenario";
/// Never selected, as in the chart.
const EXCLUDED: [&str; 4] = [
    "kube-system",
    "kube-public",
    "kube-node-lease",
    OWN_NAMESPACE,
];

pub struct Env {
    pub client: Client,
    pub certs: PathBuf,
    pub ca: Vec<u8>,
    /// The webhook configuration file every webhook process starts with.
    pub config: PathBuf,
    pub work: PathBuf,
    /// The webhook most scenarios call; no scenario stops it.
    pub webhook: Webhook,
    /// The apiserver's audit log (`cluster.env` `AUDIT_LOG`).
    pub audit_log: PathBuf,
}

/// One webhook of a `MutatingWebhookConfiguration`.
pub struct WebhookEntry<'a> {
    pub name: &'a str,
    pub url: String,
    pub ca: &'a [u8],
    /// The label key whose existence selects pods.
    pub id_label: String,
}

impl Env {
    pub fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }

    fn configurations(&self) -> Api<MutatingWebhookConfiguration> {
        Api::all(self.client.clone())
    }

    /// A webhook process of the scenario's own (one it may stop), named
    /// `name` in the work directory: its log `<name>-webhook.log`, and with
    /// `config`, its configuration file `<name>-config.yaml` (else the
    /// shared one).
    pub fn own_webhook(&self, name: &str, config: Option<&str>) -> Result<Webhook> {
        let file = match config {
            Some(yaml) => {
                let file = self.work.join(format!("{name}-config.yaml"));
                std::fs::write(&file, yaml)?;
                file
            }
            None => self.config.clone(),
        };
        let log = self.work.join(format!("{name}-webhook.log"));
        Webhook::start(&self.certs, &file, log)
    }

    /// A webhook process of the scenario's own that answers every review
    /// with the JSON patch `patch` (`serve --fixed-patch`): another
    /// mutating webhook, as a cluster may run after this one.
    pub fn patching_webhook(&self, name: &str, patch: &serde_json::Value) -> Result<Webhook> {
        let file = self.work.join(format!("{name}-patch.json"));
        std::fs::write(&file, patch.to_string())?;
        let log = self.work.join(format!("{name}-webhook.log"));
        let extra = ["--fixed-patch".to_owned(), file.display().to_string()];
        Webhook::start_with(&self.certs, &self.config, log, &extra)
    }

    /// The shared webhook, selecting `<P>/id` pods.
    pub fn main_entry(&self) -> WebhookEntry<'_> {
        self.entry(&self.webhook)
    }

    /// Another webhook process, selecting `<P>/id` pods.
    pub fn entry<'a>(&'a self, webhook: &Webhook) -> WebhookEntry<'a> {
        WebhookEntry {
            name: "pods.sandbox-webhook.opensandbox.io",
            url: webhook.url("/mutate"),
            ca: &self.ca,
            id_label: format!("{P}/id"),
        }
    }

    /// The usual start of a scenario: its namespace `e2e-<id>` and its
    /// configuration calling the shared webhook, active.
    pub async fn scope(&self, id: &str) -> Result<Scope<'_>> {
        let scope = Scope::new(self, id);
        let ns = scope.namespace("", &[]).await?;
        scope.register(&[self.main_entry()]).await?;
        scope.wait_active(&ns, true).await?;
        Ok(scope)
    }

    /// Deletes every webhook configuration of scenario `id`, mutating and
    /// validating.
    pub async fn clean_up(&self, id: &str) -> Result<()> {
        let selector = format!("{SCOPE_LABEL}={}", label_value(id));
        let params = ListParams::default().labels(&selector);
        self.configurations()
            .delete_collection(&DeleteParams::default(), &params)
            .await?;
        Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .delete_collection(&DeleteParams::default(), &params)
            .await?;
        Ok(())
    }
}

/// A scenario name as a label value and a DNS-1123 name part.
fn label_value(id: &str) -> String {
    id.replace('_', "-")
}

pub struct Scope<'e> {
    env: &'e Env,
    /// The label value and name part of everything this scenario creates.
    pub id: String,
    /// The scenario's first namespace.
    pub ns: String,
    /// Its `MutatingWebhookConfiguration`.
    pub configuration: String,
}

impl<'e> Scope<'e> {
    /// Names only; creates nothing.
    pub fn new(env: &'e Env, id: &str) -> Self {
        let id = label_value(id);
        Scope {
            env,
            ns: format!("e2e-{id}"),
            configuration: format!("sandbox-webhook-e2e-{id}"),
            id,
        }
    }

    pub fn pods(&self) -> Api<Pod> {
        self.env.pods(&self.ns)
    }

    /// Creates `pod` in the scenario's namespace and reads it back as the
    /// apiserver stored it.
    pub async fn admit(&self, pod: &SandboxPod) -> Result<Pod> {
        let pod = pod.pod();
        let name = pod.metadata.name.as_deref().ok_or("unnamed pod")?;
        self.pods().create(&PostParams::default(), &pod).await?;
        Ok(self.pods().get(name).await?)
    }

    /// Creates namespace `e2e-<id>` (or `e2e-<id>-<suffix>`) with the scope
    /// label and `labels`, and returns its name. An existing one is reused.
    pub async fn namespace(&self, suffix: &str, labels: &[(&str, &str)]) -> Result<String> {
        let name = if suffix.is_empty() {
            self.ns.clone()
        } else {
            format!("{}-{suffix}", self.ns)
        };
        self.named_namespace(&name, labels).await?;
        Ok(name)
    }

    /// Creates namespace `name` with the scope label and `labels`.
    pub async fn named_namespace(&self, name: &str, labels: &[(&str, &str)]) -> Result<()> {
        let mut all = serde_json::Map::new();
        all.insert(SCOPE_LABEL.into(), json!(self.id));
        for (k, v) in labels {
            all.insert((*k).into(), json!(v));
        }
        let ns: Namespace = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": all},
        }))?;
        let api: Api<Namespace> = Api::all(self.env.client.clone());
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// A configuration that selects this scope's namespaces (except the
    /// excluded ones), named `name`, labelled with the scope.
    pub fn configuration_named(
        &self,
        name: &str,
        entries: &[WebhookEntry<'_>],
    ) -> MutatingWebhookConfiguration {
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
                    // The chart's rules (contract: select.webhook-configuration).
                    "rules": [{
                        "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                        "resources": ["pods"], "scope": "Namespaced",
                    }, {
                        "apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                        "resources": ["pods", "pods/ephemeralcontainers"], "scope": "Namespaced",
                    }],
                    "objectSelector": {"matchExpressions": [{"key": e.id_label, "operator": "Exists"}]},
                    "namespaceSelector": {
                        "matchLabels": {SCOPE_LABEL: self.id},
                        "matchExpressions": [{
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": EXCLUDED,
                        }],
                    },
                })
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name, "labels": {SCOPE_LABEL: self.id}},
            "webhooks": webhooks,
        }))
        .expect("webhook configuration")
    }

    /// Creates (or replaces) `configuration`.
    pub async fn create_configuration(
        &self,
        configuration: &MutatingWebhookConfiguration,
    ) -> Result<()> {
        let api = self.env.configurations();
        let name = configuration.metadata.name.as_deref().ok_or("unnamed")?;
        let _ = api.delete(name, &DeleteParams::default()).await;
        api.create(&PostParams::default(), configuration).await?;
        Ok(())
    }

    /// Creates (or replaces) the scope's configuration with `entries`.
    pub async fn register(&self, entries: &[WebhookEntry<'_>]) -> Result<()> {
        self.create_configuration(&self.configuration_named(&self.configuration, entries))
            .await
    }

    pub async fn unregister(&self) -> Result<()> {
        self.env
            .configurations()
            .delete(&self.configuration, &DeleteParams::default())
            .await?;
        Ok(())
    }

    /// The apiserver picks up webhook configurations asynchronously: wait
    /// until a dry-run sandbox create in `ns` comes back mutated (or not).
    pub async fn wait_active(&self, ns: &str, active: bool) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let pp = common::cluster::dry_run();
        let probe = SandboxPod::new("probe").pod();
        loop {
            let last = match self.env.pods(ns).create(&pp, &probe).await {
                Ok(p) if has_init(&p, "execd-installer") == active => return Ok(()),
                Ok(_) => "the probe's mutation did not change yet".to_owned(),
                Err(e) => e.to_string(),
            };
            if Instant::now() > deadline {
                return Err(format!(
                    "{}: webhook did not become active={active} in {ns} within 30s: {last}",
                    self.configuration
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

pub fn has_init(p: &Pod, name: &str) -> bool {
    init_names(p).contains(&name)
}

pub use common::pods::{annotation, check_init_containers, check_not_injected, init_names};
