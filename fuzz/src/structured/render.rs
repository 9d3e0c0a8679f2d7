//! Each generated part as the JSON of a Pod CREATE review.

use serde_json::{Map, Value, json};

use super::{
    Arg, BIN, Capability, Container, EnvName, Expression, InitContainer, Input, LabelKey, Mount,
    Namespace, OPT, Text, Volume,
};

impl Input {
    pub(super) fn review(&self, prefix: &str) -> Value {
        let mut labels = Map::new();
        labels.insert(format!("{prefix}/id"), json!("fuzz"));
        for (k, v) in &self.labels {
            let key = match k {
                LabelKey::Id => format!("{prefix}/id"),
                LabelKey::ManualCleanup => format!("{prefix}/manual-cleanup"),
                LabelKey::Other(s) => s.clone(),
            };
            labels.insert(key, json!(v.as_str()));
        }
        let annotations: Map<String, Value> = self
            .annotations
            .iter()
            .map(|(k, v)| (k.name(prefix), v.to_json()))
            .collect();

        let mut containers: Vec<Value> = self.containers.iter().map(Container::to_json).collect();
        if self.main_last {
            containers.push(self.main.to_json());
        } else {
            containers.insert(0, self.main.to_json());
        }
        let mut spec = Map::new();
        spec.insert("containers".into(), Value::Array(containers));
        if let Some(init) = &self.init_containers {
            let init = init.iter().map(InitContainer::to_json).collect();
            spec.insert("initContainers".into(), Value::Array(init));
        }
        if let Some(volumes) = &self.volumes {
            let volumes = volumes.iter().map(Volume::to_json).collect();
            spec.insert("volumes".into(), Value::Array(volumes));
        }
        if let Some(selector) = &self.node_selector {
            let selector: Map<String, Value> = selector
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), json!(v.as_str())))
                .collect();
            spec.insert("nodeSelector".into(), Value::Object(selector));
        }
        if let Some(terms) = &self.affinity {
            let terms: Vec<Value> = terms
                .iter()
                .map(|t| json!({"matchExpressions": t.iter().map(Expression::to_json).collect::<Vec<_>>()}))
                .collect();
            spec.insert(
                "affinity".into(),
                json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}),
            );
        }
        if let Some(h) = self.host_network {
            spec.insert("hostNetwork".into(), json!(h));
        }

        let namespace = match &self.namespace {
            Namespace::Sandboxes => Some("sandboxes"),
            Namespace::Excluded => Some("excluded"),
            Namespace::KubeSystem => Some("kube-system"),
            Namespace::Own => Some(crate::OWN_NAMESPACE),
            Namespace::None => None,
            Namespace::Other(s) => Some(s.as_str()),
        };
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "fuzz", "labels": labels, "annotations": annotations},
            "spec": spec,
        });
        crate::pod_create("00000000-0000-0000-0000-00000000f022", namespace, &pod)
    }
}

impl Container {
    fn to_json(&self) -> Value {
        let name = self.name.as_str();
        let mut c = json!({"name": name, "image": "python:3.12-slim"});
        if let Some(command) = &self.command {
            let command: Vec<&str> = command.iter().map(Arg::as_str).collect();
            c["command"] = json!(command);
        }
        if let Some(env) = &self.env {
            let env: Vec<Value> = env
                .iter()
                .map(|e| match e {
                    EnvName::Execd => json!({"name": "EXECD", "value": "/x"}),
                    EnvName::Transparent => {
                        json!({"name": "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT", "value": "true"})
                    }
                    EnvName::Rules => json!({"name": "OPENSANDBOX_EGRESS_RULES", "value": "{}"}),
                    EnvName::Any(s) => json!({"name": s}),
                })
                .collect();
            c["env"] = json!(env);
        }
        if let Some(mounts) = &self.mounts {
            let mounts: Vec<Value> = mounts.iter().map(Mount::to_json).collect();
            c["volumeMounts"] = json!(mounts);
        }
        if let Some(s) = &self.security {
            let mut sc = Map::new();
            if let Some(p) = s.privileged {
                sc.insert("privileged".into(), json!(p));
            }
            let mut caps = Map::new();
            for (field, list) in [("add", &s.add), ("drop", &s.drop)] {
                if let Some(list) = list {
                    let list: Vec<&str> = list.iter().map(Capability::as_str).collect();
                    caps.insert(field.into(), json!(list));
                }
            }
            if !caps.is_empty() {
                sc.insert("capabilities".into(), Value::Object(caps));
            }
            c["securityContext"] = Value::Object(sc);
        }
        c
    }
}

impl Mount {
    fn to_json(&self) -> Value {
        let path = self.path.as_str();
        json!({"name": self.volume.as_str(), "mountPath": path})
    }
}

impl InitContainer {
    fn to_json(&self) -> Value {
        match self {
            InitContainer::Plain(c) => c.to_json(),
            InitContainer::Installer => json!({
                "name": "execd-installer",
                "image": "opensandbox/execd:v1.0.18",
                "volumeMounts": [{"name": BIN, "mountPath": OPT}],
            }),
            InitContainer::NativeEgress(native) => {
                let mut c = json!({
                    "name": "egress",
                    "image": "opensandbox/egress:v1.1.0",
                    "env": [{"name": "OPENSANDBOX_EGRESS_RULES", "value": "{}"}],
                });
                if *native {
                    c["restartPolicy"] = json!("Always");
                }
                c
            }
        }
    }
}

impl Volume {
    fn to_json(&self) -> Value {
        if self.empty_dir {
            json!({"name": self.name.as_str(), "emptyDir": {}})
        } else {
            json!({"name": self.name.as_str(), "hostPath": {"path": "/tmp"}})
        }
    }
}

impl Expression {
    fn to_json(&self) -> Value {
        let operator = self.operator.as_str();
        let mut e = json!({"key": self.key.as_str(), "operator": operator});
        if let Some(values) = &self.values {
            let values: Vec<&str> = values.iter().map(Text::as_str).collect();
            e["values"] = json!(values);
        }
        e
    }
}
