//! A structure-aware input: every input decodes (with `arbitrary`) into a
//! well-formed sandbox Pod CREATE, so the fuzzer spends its time on the
//! annotation values, the policy JSON and the container, volume and
//! scheduling shapes the core decides on, not on JSON syntax (the raw target
//! covers that).

mod render;

use std::fmt::Write as _;

use arbitrary::{Arbitrary, Unstructured};
use sandbox_webhook::mutate::ANNOTATION_NAMES;
use serde_json::{Map, Value, json};

/// One generated review: the body and which of [`crate::configs`] to use.
pub struct Generated {
    pub config: usize,
    pub body: Vec<u8>,
}

/// Decodes fuzzer bytes into a review. Never fails: `arbitrary` fills what
/// runs out with defaults.
#[must_use]
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

/// An annotation key: mostly a name the webhook knows, under the prefix.
#[derive(Debug)]
enum Key {
    /// An index into [`ANNOTATION_NAMES`], the one list of the names the
    /// webhook reads: every name it knows is generated, today's and any
    /// added later, with no copy here to forget one.
    Known(usize),
    /// An unknown key under the prefix, or any key at all.
    Prefixed(String),
    Other(String),
}

impl<'a> Arbitrary<'a> for Key {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        // Five in six keys are known names, as in a real pod.
        Ok(match u.int_in_range(0..=5u8)? {
            0 if u.arbitrary()? => Key::Prefixed(u.arbitrary()?),
            0 => Key::Other(u.arbitrary()?),
            _ => Key::Known(u.choose_index(ANNOTATION_NAMES.len())?),
        })
    }
}

impl Key {
    fn name(&self, prefix: &str) -> String {
        let name = match self {
            Key::Known(i) => ANNOTATION_NAMES[*i],
            Key::Prefixed(s) => s,
            Key::Other(s) => return s.clone(),
        };
        format!("{prefix}/{name}")
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
    /// A JSON object of env vars, as `egress-env` takes.
    Env(Vec<(EnvKey, Text)>),
    /// execd's lifecycle hooks, as `lifecycle` takes.
    Lifecycle(Option<Vec<Text>>, Option<u16>, bool),
    /// The one value `execd-isolation` takes.
    Enable,
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
                        let _ = write!(out, "{v}{unit}");
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
            AnnotationValue::Env(vars) => {
                let vars: Map<String, Value> = vars
                    .iter()
                    .map(|(k, v)| (k.as_str().to_owned(), json!(v.as_str())))
                    .collect();
                Value::Object(vars).to_string()
            }
            AnnotationValue::Lifecycle(command, timeout, periodic) => {
                let command: Option<Vec<&str>> = command
                    .as_ref()
                    .map(|c| c.iter().map(Text::as_str).collect());
                let hook = json!({"command": command, "timeoutSeconds": timeout});
                if *periodic {
                    json!({"periodic": [{"name": "p", "schedule": "@every 1m", "command": command}]})
                        .to_string()
                } else {
                    json!({ "preStart": hook }).to_string()
                }
            }
            AnnotationValue::Enable => "enable".into(),
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
struct Security {
    privileged: Option<bool>,
    add: Option<Vec<Capability>>,
    drop: Option<Vec<Capability>>,
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
struct Expression {
    key: SelectorKey,
    operator: Operator,
    values: Option<Vec<Text>>,
}

/// Enums of the names the core knows, in this order, plus `Any(String)` for
/// anything else, each with `as_str`. `arbitrary` decodes by variant order,
/// so a new name goes last (the committed corpus keeps its meaning).
macro_rules! names {
    ($($name:ident { $($variant:ident => $text:expr),+ $(,)? })+) => {$(
        #[derive(Debug, Arbitrary)]
        enum $name {
            $($variant,)+
            Any(String),
        }

        impl $name {
            fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $text,)+
                    Self::Any(s) => s,
                }
            }
        }
    )+};
}

const BIN: &str = "opensandbox-bin";
const OPT: &str = "/opt/opensandbox";

names! {
    ContainerName {
        Sandbox => "sandbox",
        App => "app",
        ExecdInstaller => "execd-installer",
        Egress => "egress",
    }
    Arg {
        Bootstrap => "/opt/opensandbox/bootstrap.sh",
        Python => "python",
    }
    VolumeName {
        Bin => BIN,
        Data => "data",
    }
    MountPath {
        Opt => OPT,
        OptSlash => "/opt/opensandbox/",
        Data => "/data",
    }
    Capability {
        NetAdmin => "NET_ADMIN",
        NetRaw => "NET_RAW",
        All => "ALL",
        Lower => "net_admin",
    }
    SelectorKey {
        Os => "kubernetes.io/os",
        Arch => "kubernetes.io/arch",
    }
    Operator {
        In => "In",
        NotIn => "NotIn",
        Exists => "Exists",
        DoesNotExist => "DoesNotExist",
    }
    EnvKey {
        LogLevel => "OPENSANDBOX_EGRESS_LOG_LEVEL",
        Transparent => "OPENSANDBOX_EGRESS_MITMPROXY_TRANSPARENT",
        Rules => "OPENSANDBOX_EGRESS_RULES",
    }
}

#[expect(
    clippy::derivable_impls,
    reason = "names! declares the enum, and cannot mark its default variant"
)]
impl Default for ContainerName {
    fn default() -> Self {
        Self::Sandbox
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// Every name of `ANNOTATION_NAMES` is generated as an annotation key
    /// (xorshift bytes, so the run is the same each time).
    #[test]
    fn every_annotation_name_is_generated() {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        let mut seen = BTreeSet::new();
        for _ in 0..1_000 {
            let bytes: Vec<u8> = (0..512)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state.to_le_bytes()[0]
                })
                .collect();
            let generated = generate(&bytes);
            let prefix = &crate::configs().all[generated.config].1.prefix;
            let review: Value = serde_json::from_slice(&generated.body).unwrap();
            let annotations = &review["request"]["object"]["metadata"]["annotations"];
            for key in annotations.as_object().into_iter().flat_map(Map::keys) {
                if let Some(name) = key.strip_prefix(&format!("{prefix}/")) {
                    seen.insert(name.to_owned());
                }
            }
        }
        let missing: Vec<&str> = ANNOTATION_NAMES
            .iter()
            .filter(|n| !seen.contains(**n))
            .copied()
            .collect();
        assert!(
            missing.is_empty(),
            "fuzz/src/structured: 1,000 inputs never had the annotations {missing:?} of mutate::ANNOTATION_NAMES: generate the keys from that list (Key::Known)"
        );
    }
}
