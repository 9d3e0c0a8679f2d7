//! One sandbox-pod builder: a pod labelled `<P>/id` whose main container
//! `sandbox` runs `sleep 3600` from `busybox:1.36`, plus what a test adds;
//! and readers of a pod as the apiserver stored it (its containers, env,
//! owner, token), with the checks every e2e suite makes of an injected one.

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec, SecurityContext};
use serde_json::{Map, Value, json};

use crate::P;
use crate::processes::{Result, check};

#[derive(Clone, Debug)]
pub struct SandboxPod {
    name: String,
    namespace: Option<String>,
    labels: Map<String, Value>,
    annotations: Map<String, Value>,
    main: Map<String, Value>,
    spec: Map<String, Value>,
}

impl SandboxPod {
    pub fn new(name: &str) -> Self {
        let mut labels = Map::new();
        labels.insert(format!("{P}/id"), json!(name));
        let mut main = Map::new();
        main.insert("name".into(), json!("sandbox"));
        main.insert("image".into(), json!("busybox:1.36"));
        main.insert("command".into(), json!(["sleep", "3600"]));
        SandboxPod {
            name: name.to_owned(),
            namespace: None,
            labels,
            annotations: Map::new(),
            main,
            spec: Map::new(),
        }
    }

    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// Annotation `<P>/<key>`.
    pub fn annotation(self, key: &str, value: &str) -> Self {
        self.raw_annotation(&format!("{P}/{key}"), value)
    }

    /// Annotation with a full key.
    pub fn raw_annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_owned(), json!(value));
        self
    }

    /// Label with a full key.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), json!(value));
        self
    }

    /// Without the `<P>/id` label: a pod the webhook must not touch.
    pub fn not_a_sandbox(mut self) -> Self {
        self.labels.remove(&format!("{P}/id"));
        self.main.insert("name".into(), json!("app"));
        self
    }

    pub fn image(self, image: &str) -> Self {
        self.main_field("image", json!(image))
    }

    pub fn command(self, command: &[&str]) -> Self {
        self.main_field("command", json!(command))
    }

    /// A field of the main container (`securityContext`, `env`, ...).
    pub fn main_field(mut self, key: &str, value: Value) -> Self {
        self.main.insert(key.to_owned(), value);
        self
    }

    /// A field of the pod spec (`affinity`, `securityContext`, ...).
    pub fn spec_field(mut self, key: &str, value: Value) -> Self {
        self.spec.insert(key.to_owned(), value);
        self
    }

    pub fn json(&self) -> Value {
        let mut metadata = Map::new();
        metadata.insert("name".into(), json!(self.name));
        if let Some(ns) = &self.namespace {
            metadata.insert("namespace".into(), json!(ns));
        }
        metadata.insert("labels".into(), Value::Object(self.labels.clone()));
        metadata.insert(
            "annotations".into(),
            Value::Object(self.annotations.clone()),
        );
        let mut spec = self.spec.clone();
        spec.insert("containers".into(), json!([self.main]));
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    }

    /// The typed pod, for a Kubernetes client.
    pub fn pod(&self) -> Pod {
        serde_json::from_value(self.json()).expect("the builder writes a valid Pod")
    }
}

/// The value of annotation `key` on a pod as stored.
pub fn annotation<'a>(p: &'a Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The names of `pods`, in order.
pub fn pod_names(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect()
}

/// The names of a pod's init containers, in order.
pub fn init_names(p: &Pod) -> Vec<&str> {
    p.spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .map(|c| c.name.as_str())
        .collect()
}

/// An error `{what}: init containers {names:?}` unless pod `p`'s init
/// containers are `want`, in order.
pub fn check_init_containers(p: &Pod, want: &[&str], what: &str) -> Result<()> {
    let names = init_names(p);
    check(names == want, format!("{what}: init containers {names:?}"))
}

/// An error `{what}: init containers {names:?}` unless pod `p` has none:
/// the webhook left it as written.
pub fn check_not_injected(p: &Pod, what: &str) -> Result<()> {
    check_init_containers(p, &[], what)
}

/// How many of a pod spec's volumes are named `name`.
pub fn volumes_named(spec: &PodSpec, name: &str) -> usize {
    spec.volumes
        .iter()
        .flatten()
        .filter(|v| v.name == name)
        .count()
}

/// The service-account token volumes the apiserver's `ServiceAccount`
/// admission adds to a pod that mounts its token (`kube-api-access-*`).
pub fn token_volumes(spec: &PodSpec) -> Vec<&str> {
    spec.volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .filter(|v| v.starts_with("kube-api-access-"))
        .collect()
}

/// Whether container `c` sets env var `name`.
pub fn has_env(c: &Container, name: &str) -> bool {
    c.env.iter().flatten().any(|e| e.name == name)
}

/// Whether container `c` mounts a volume at `path`.
pub fn mounts_at(c: &Container, path: &str) -> bool {
    c.volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path == path)
}

/// The pod's container named `name`, init or not.
pub fn container<'p>(p: &'p Pod, name: &str) -> Option<&'p Container> {
    let spec = p.spec.as_ref()?;
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .find(|c| c.name == name)
}

/// The status of the pod's container named `name`, init or not.
pub fn container_status<'p>(p: &'p Pod, name: &str) -> Option<&'p ContainerStatus> {
    let status = p.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|c| c.name == name)
}

/// The pod's first (main) container.
pub fn first_container(p: &Pod) -> Option<&Container> {
    p.spec.as_ref()?.containers.first()
}

/// The value of env var `name` of container `c`.
pub fn env_value<'c>(c: &'c Container, name: &str) -> Option<&'c str> {
    c.env
        .iter()
        .flatten()
        .find(|e| e.name == name)?
        .value
        .as_deref()
}

/// The capabilities a container's security context drops.
pub fn dropped_capabilities(security_context: Option<&SecurityContext>) -> Vec<String> {
    security_context
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.drop.clone())
        .unwrap_or_default()
}

/// The controller owner of `p`, as `(kind, name)`.
pub fn controller_owner(p: &Pod) -> Option<(&str, &str)> {
    p.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| (r.kind.as_str(), r.name.as_str()))
}

/// When the apiserver created `p`, in seconds since the epoch.
pub fn created_second(p: &Pod) -> Option<i64> {
    p.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
}

/// Checks the pod's init containers are the webhook's: the installer, and
/// the egress sidecar after it `with_policy`. Its main container `sandbox`.
pub fn injected_main(p: &Pod, with_policy: bool) -> Result<&Container> {
    let want: &[&str] = if with_policy {
        &["execd-installer", "egress"]
    } else {
        &["execd-installer"]
    };
    let inits = init_names(p);
    check(
        inits == want,
        format!("{}: init containers {inits:?}, expected {want:?}", name(p)),
    )?;
    container(p, "sandbox").ok_or_else(|| format!("{}: no container sandbox", name(p)).into())
}

/// The injected pod carries no API token: `automountServiceAccountToken:
/// false`, no token volume, no container that mounts one.
/// (contract: execd.service-account-token)
pub fn check_no_token(p: &Pod) -> Result<()> {
    let name = name(p);
    let spec = p.spec.as_ref().ok_or("a pod without a spec")?;
    check(
        spec.automount_service_account_token == Some(false),
        format!(
            "{name}: automountServiceAccountToken is {:?}, expected false",
            spec.automount_service_account_token
        ),
    )?;
    let token_volumes = token_volumes(spec);
    check(
        token_volumes.is_empty(),
        format!("{name}: service-account token volumes {token_volumes:?}"),
    )?;
    let mounting: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .filter(|c| mounts_at(c, "/var/run/secrets/kubernetes.io/serviceaccount"))
        .map(|c| c.name.as_str())
        .collect();
    check(
        mounting.is_empty(),
        format!("{name}: containers {mounting:?} mount a service-account token"),
    )
}

/// The pod's name, for messages.
fn name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or("?")
}

/// The kubectl arguments that ask execd for its ping from inside pod
/// `ns/pod`: `wget` (with `flags`) of `127.0.0.1:44772/ping` in
/// `container`.
pub fn execd_ping<'a>(
    ns: &'a str,
    pod: &'a str,
    container: &'a str,
    flags: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec!["exec", "-n", ns, pod, "-c", container, "--", "wget", "-qO-"];
    args.extend_from_slice(flags);
    args.push("http://127.0.0.1:44772/ping");
    args
}

/// `Err` unless `answer` (of [`execd_ping`]) is execd's pong.
pub fn check_pong(answer: &str) -> Result<()> {
    check(
        answer.contains("\"status\":\"pong\""),
        format!("execd answered {answer:?}"),
    )
}
