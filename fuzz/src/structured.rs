//! A structure-aware input: every input decodes (with `arbitrary`) into a
//! well-formed sandbox Pod CREATE, so the fuzzer spends its time on the
//! annotation values, the policy JSON and the container, volume and
//! scheduling shapes the core decides on, not on JSON syntax (the raw target
//! covers that).

use arbitrary::{Arbitrary, Unstructured};
use serde_json::{Map, Value, json};

/// One generated review: the body and which of [`crate::configs`] to use.
pub struct Generated {
    pub config: usize,
    pub body: Vec<u8>,
}

/// Decodes fuzzer bytes into a review. Never fails: `arbitrary` fills what
/// runs out with defaults.
pub fn generate(data: &[u8]) -> Generated {
    let input = Input::arbitrary_take_rest(Unstructured::new(data)).unwrap_or_default();
    let configs = crate::configs();
    let config = usize::from(input.config) % configs.all.len();
    let prefix = configs.all[config].1.prefix.clone();
    Generated {
        config,
        body: input.review(&prefix).to_string().into_bytes(),
    }
}

#[derive(Debug, Default, Arbitrary)]
struct Input {
    config: u8,
    namespace: Namespace,
    labels: Vec<(LabelKey, Text)>,
    annotations: Vec<(Key, AnnotationValue)>,
    main: Container,
    containers: Vec<Container>,
    init_containers: Option<Vec<InitContainer>>,
    volumes: Option<Vec<Volume>>,
    node_selector: Option<Vec<(SelectorKey, Text)>>,
    affinity: Option<Vec<Vec<Expression>>>,
    host_network: Option<bool>,
    /// The main container first, or after the others.
    main_last: bool,
}

#[derive(Debug, Default, Arbitrary)]
enum Namespace {
    #[default]
    Sandboxes,
    /// Excluded by the prefix configuration only.
    Excluded,
    KubeSystem,
    Own,
    /// No request namespace: the pod's own, else `default`.
    None,
    Other(String),
}

/// A string, mostly one the core knows, sometimes anything.
#[derive(Debug, Arbitrary)]
enum Text {
    Linux,
    Windows,
    Amd64,
    Arm64,
    True,
    Empty,
    Any(String),
}

impl Text {
    fn as_str(&self) -> &str {
        match self {
            Text::Linux => "linux",
            Text::Windows => "windows",
            Text::Amd64 => "amd64",
            Text::Arm64 => "arm64",
            Text::True => "true",
            Text::Empty => "",
            Text::Any(s) => s,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum LabelKey {
    Id,
    ManualCleanup,
    Other(String),
}

#[derive(Debug, Arbitrary)]
enum Key {
    Inject,
    Platform,
    Timeout,
    ExpiresAt,
    NetworkPolicy,
    EgressMode,
    CredentialProxy,
    Entrypoint,
    MainContainer,
    EgressAuthToken,
    /// An unknown key under the prefix, or any key at all.
    Prefixed(String),
    Other(String),
}

impl Key {
    fn name(&self, prefix: &str) -> String {
        let known = match self {
            Key::Inject => "inject",
            Key::Platform => "platform",
            Key::Timeout => "timeout",
            Key::ExpiresAt => "expires-at",
            Key::NetworkPolicy => "network-policy",
            Key::EgressMode => "egress-mode",
            Key::CredentialProxy => "credential-proxy",
            Key::Entrypoint => "entrypoint",
            Key::MainContainer => "main-container",
            Key::EgressAuthToken => "egress-auth-token",
            Key::Prefixed(s) => s,
            Key::Other(s) => return s.clone(),
        };
        format!("{prefix}/{known}")
    }
}

#[derive(Debug, Arbitrary)]
enum AnnotationValue {
    Any(String),
    Bool(bool, bool),
    Platform(Text, Text),
    Seconds(u64),
    Duration(Option<u16>, Option<u16>, Option<u16>),
    /// Seconds from the fixed clock, as RFC 3339.
    Time(i64),
    Policy(Policy),
    Entrypoint(Vec<String>),
    /// Not a string: the API would refuse it, the webhook must not panic.
    NotString(Option<i32>),
}

impl AnnotationValue {
    fn to_json(&self) -> Value {
        let text = match self {
            AnnotationValue::Any(s) => s.clone(),
            AnnotationValue::Bool(v, upper) => match (v, upper) {
                (true, false) => "true".into(),
                (true, true) => "TRUE".into(),
                (false, false) => "false".into(),
                (false, true) => "False".into(),
            },
            AnnotationValue::Platform(os, arch) => format!("{}/{}", os.as_str(), arch.as_str()),
            AnnotationValue::Seconds(s) => s.to_string(),
            AnnotationValue::Duration(h, m, s) => {
                let mut out = String::new();
                for (v, unit) in [(h, 'h'), (m, 'm'), (s, 's')] {
                    if let Some(v) = v {
                        out.push_str(&format!("{v}{unit}"));
                    }
                }
                out
            }
            AnnotationValue::Time(offset) => {
                let at = crate::now().timestamp().saturating_add(*offset);
                chrono::DateTime::from_timestamp(at, 0)
                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                    .unwrap_or_default()
            }
            AnnotationValue::Policy(p) => p.to_json().to_string(),
            AnnotationValue::Entrypoint(args) => json!(args).to_string(),
            AnnotationValue::NotString(v) => return json!(v),
        };
        Value::String(text)
    }
}

#[derive(Debug, Arbitrary)]
struct Policy {
    default_action: Option<Action>,
    egress: Option<Vec<Rule>>,
    unknown_field: bool,
}

#[derive(Debug, Arbitrary)]
struct Rule {
    action: Action,
    target: Target,
}

#[derive(Debug, Arbitrary)]
enum Action {
    Allow,
    Deny,
    Padded,
    Any(String),
}

#[derive(Debug, Arbitrary)]
enum Target {
    Fqdn,
    Wildcard,
    Ip,
    Cidr,
    Url,
    Blank,
    Any(String),
}

impl Policy {
    fn to_json(&self) -> Value {
        let mut out = Map::new();
        if let Some(a) = &self.default_action {
            out.insert("defaultAction".into(), a.to_json());
        }
        if let Some(rules) = &self.egress {
            let rules = rules
                .iter()
                .map(|r| json!({"action": r.action.to_json(), "target": r.target.as_str()}))
                .collect();
            out.insert("egress".into(), Value::Array(rules));
        }
        if self.unknown_field {
            out.insert("rules".into(), json!([]));
        }
        Value::Object(out)
    }
}

impl Action {
    fn to_json(&self) -> Value {
        Value::String(match self {
            Action::Allow => "allow".into(),
            Action::Deny => "deny".into(),
            Action::Padded => " ALLOW ".into(),
            Action::Any(s) => s.clone(),
        })
    }
}

impl Target {
    fn as_str(&self) -> &str {
        match self {
            Target::Fqdn => "pypi.org",
            Target::Wildcard => "*.github.com",
            Target::Ip => "10.0.0.1",
            Target::Cidr => "10.0.0.0/8",
            Target::Url => "https://example.com:443/x",
            Target::Blank => "  ",
            Target::Any(s) => s,
        }
    }
}

#[derive(Debug, Default, Arbitrary)]
struct Container {
    name: ContainerName,
    command: Option<Vec<Arg>>,
    env: Option<Vec<EnvName>>,
    mounts: Option<Vec<Mount>>,
    security: Option<Security>,
}

#[derive(Debug, Default, Arbitrary)]
enum ContainerName {
    #[default]
    Sandbox,
    App,
    ExecdInstaller,
    Egress,
    Any(String),
}

#[derive(Debug, Arbitrary)]
enum Arg {
    Bootstrap,
    Python,
    Any(String),
}

#[derive(Debug, Arbitrary)]
enum EnvName {
    Execd,
    Transparent,
    Rules,
    Any(String),
}

#[derive(Debug, Arbitrary)]
struct Mount {
    volume: VolumeName,
    path: MountPath,
}

#[derive(Debug, Arbitrary)]
enum VolumeName {
    Bin,
    Data,
    Any(String),
}

#[derive(Debug, Arbitrary)]
enum MountPath {
    Opt,
    OptSlash,
    Data,
    Any(String),
}

#[derive(Debug, Arbitrary)]
struct Security {
    privileged: Option<bool>,
    add: Option<Vec<Capability>>,
    drop: Option<Vec<Capability>>,
}

#[derive(Debug, Arbitrary)]
enum Capability {
    NetAdmin,
    NetRaw,
    All,
    Lower,
    Any(String),
}

/// An init container, possibly shaped like one the webhook (or an
/// OpenSandbox pool template) already injected.
#[derive(Debug, Arbitrary)]
enum InitContainer {
    Plain(Container),
    Installer,
    NativeEgress(bool),
}

#[derive(Debug, Arbitrary)]
struct Volume {
    name: VolumeName,
    empty_dir: bool,
}

#[derive(Debug, Arbitrary)]
enum SelectorKey {
    Os,
    Arch,
    Any(String),
}

#[derive(Debug, Arbitrary)]
struct Expression {
    key: SelectorKey,
    operator: Operator,
    values: Option<Vec<Text>>,
}

#[derive(Debug, Arbitrary)]
enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
    Any(String),
}

const BIN: &str = "opensandbox-bin";
const OPT: &str = "/opt/opensandbox";

impl Input {
    fn review(&self, prefix: &str) -> Value {
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
        let mut request = json!({
            "uid": "00000000-0000-0000-0000-00000000f022",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "object": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "fuzz", "labels": labels, "annotations": annotations},
                "spec": spec,
            },
        });
        if let Some(ns) = namespace {
            request["namespace"] = json!(ns);
        }
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
    }
}

impl Container {
    fn to_json(&self) -> Value {
        let name = match &self.name {
            ContainerName::Sandbox => "sandbox",
            ContainerName::App => "app",
            ContainerName::ExecdInstaller => "execd-installer",
            ContainerName::Egress => "egress",
            ContainerName::Any(s) => s,
        };
        let mut c = json!({"name": name, "image": "python:3.12-slim"});
        if let Some(command) = &self.command {
            let command: Vec<&str> = command
                .iter()
                .map(|a| match a {
                    Arg::Bootstrap => "/opt/opensandbox/bootstrap.sh",
                    Arg::Python => "python",
                    Arg::Any(s) => s,
                })
                .collect();
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
        let path = match &self.path {
            MountPath::Opt => OPT,
            MountPath::OptSlash => "/opt/opensandbox/",
            MountPath::Data => "/data",
            MountPath::Any(s) => s,
        };
        json!({"name": self.volume.as_str(), "mountPath": path})
    }
}

impl VolumeName {
    fn as_str(&self) -> &str {
        match self {
            VolumeName::Bin => BIN,
            VolumeName::Data => "data",
            VolumeName::Any(s) => s,
        }
    }
}

impl Capability {
    fn as_str(&self) -> &str {
        match self {
            Capability::NetAdmin => "NET_ADMIN",
            Capability::NetRaw => "NET_RAW",
            Capability::All => "ALL",
            Capability::Lower => "net_admin",
            Capability::Any(s) => s,
        }
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

impl SelectorKey {
    fn as_str(&self) -> &str {
        match self {
            SelectorKey::Os => "kubernetes.io/os",
            SelectorKey::Arch => "kubernetes.io/arch",
            SelectorKey::Any(s) => s,
        }
    }
}

impl Expression {
    fn to_json(&self) -> Value {
        let operator = match &self.operator {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Any(s) => s,
        };
        let mut e = json!({"key": self.key.as_str(), "operator": operator});
        if let Some(values) = &self.values {
            let values: Vec<&str> = values.iter().map(Text::as_str).collect();
            e["values"] = json!(values);
        }
        e
    }
}
