//! One sandbox-pod builder: a pod labelled `<P>/id` whose main container
//! `sandbox` runs `sleep 3600` from `busybox:1.36`, plus what a test adds.

use serde_json::{Map, Value, json};

use crate::P;

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
    pub fn pod(&self) -> k8s_openapi::api::core::v1::Pod {
        serde_json::from_value(self.json()).expect("the builder writes a valid Pod")
    }
}

/// The value of annotation `key` on a pod as stored.
pub fn annotation<'a>(p: &'a k8s_openapi::api::core::v1::Pod, key: &str) -> Option<&'a str> {
    p.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// The names of a pod's init containers, in order.
pub fn init_names(p: &k8s_openapi::api::core::v1::Pod) -> Vec<&str> {
    p.spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .map(|c| c.name.as_str())
        .collect()
}

/// How many of a pod spec's volumes are named `name`.
pub fn volumes_named(spec: &k8s_openapi::api::core::v1::PodSpec, name: &str) -> usize {
    spec.volumes
        .iter()
        .flatten()
        .filter(|v| v.name == name)
        .count()
}

/// Whether container `c` sets env var `name`.
pub fn has_env(c: &k8s_openapi::api::core::v1::Container, name: &str) -> bool {
    c.env.iter().flatten().any(|e| e.name == name)
}

/// Whether container `c` mounts a volume at `path`.
pub fn mounts_at(c: &k8s_openapi::api::core::v1::Container, path: &str) -> bool {
    c.volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path == path)
}
