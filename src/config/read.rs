//! The strict reader: YAML is parsed into a generic tree and every field is
//! read by hand, so that each mistake gets a message in plain words naming its
//! field, and YAML's loose scalars never slip through. (Deserializing straight
//! into the structs reads `prefix: null` as the text "null" and `image: 123`
//! as "123", and its errors speak of Rust types.)

use serde_yaml_ng::Value;

use super::controller::ControllerConfig;
use super::keys::Keys;
use super::quantity::Quantity;
use super::rules;
use super::schema::{
    Config, ConfigError, EgressConfig, EgressMode, ExecdConfig, ExpiryConfig, MAX_MAX_RULES,
    MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS, PodConfig,
};
use super::values::{
    Errors, Result, boolean, child, entries, invalid, keep, mapping, string, whole_number, wrong,
};

/// The configuration in `root`, or every mistake in it: one
/// [`ConfigError::Invalid`], or several in a [`ConfigError::Several`].
pub(super) fn config(root: &Value) -> Result<Config> {
    let mut errors = Errors::new();
    let mut config = Config::default();
    let known = [
        "prefix",
        "excludedNamespaces",
        "execd",
        "egress",
        "pod",
        "expiry",
        "controller",
    ];
    for (key, value) in mapping(root, "", &known, &mut errors) {
        match key {
            "prefix" => {
                let prefix =
                    string(value, key, "a DNS subdomain such as opensandbox.io").and_then(|p| {
                        rules::dns_subdomain(p)
                            .map(|()| p)
                            .map_err(|m| invalid(key, m))
                    });
                if let Some(prefix) = keep(&mut errors, prefix) {
                    prefix.clone_into(&mut config.prefix);
                }
            }
            "excludedNamespaces" => {
                config.excluded_namespaces = namespaces(value, key, &mut errors);
            }
            "execd" => config.execd = execd(value, key, &mut errors),
            "egress" => config.egress = egress(value, key, &mut errors),
            "pod" => config.pod = pod(value, key, &mut errors),
            "expiry" => config.expiry = expiry(value, key, &mut errors),
            _ => config.controller = controller(value, key, &mut errors),
        }
    }
    config.keys = Keys::new(&config.prefix);
    if errors.len() > 1 {
        return Err(ConfigError::Several(errors));
    }
    errors.pop().map_or(Ok(config), Err)
}

fn namespaces(value: &Value, path: &str, errors: &mut Errors) -> Vec<String> {
    let Value::Sequence(items) = value else {
        errors.push(wrong(path, "a list of namespace names", value));
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("{path}[{i}]");
        let ns = string(item, &field, "a namespace name").and_then(|ns| {
            rules::dns_label(ns)
                .map(|()| ns)
                .map_err(|m| invalid(&field, m))
        });
        if let Some(ns) = keep(errors, ns) {
            out.push(ns.to_owned());
        }
    }
    out
}

fn image(value: &Value, path: &str) -> Result<String> {
    let image = string(
        value,
        path,
        "an image reference such as opensandbox/execd:v1.0.18",
    )?;
    rules::image(image).map_err(|m| invalid(path, m))?;
    Ok(image.to_owned())
}

fn execd(value: &Value, path: &str, errors: &mut Errors) -> ExecdConfig {
    let mut execd = ExecdConfig::default();
    let known = ["image", "resources", "runAsInit", "allowIsolation"];
    for (key, v) in mapping(value, path, &known, errors) {
        let field = child(path, key);
        match key {
            "image" if v.is_null() => errors.push(invalid(
                &field,
                "must be an image reference; it cannot be null (execd is always injected)",
            )),
            "image" => {
                if let Some(image) = keep(errors, image(v, &field)) {
                    execd.image = image;
                }
            }
            "runAsInit" => {
                if let Some(b) = keep(errors, boolean(v, &field)) {
                    execd.run_as_init = b;
                }
            }
            "allowIsolation" => {
                if let Some(b) = keep(errors, boolean(v, &field)) {
                    execd.allow_isolation = b;
                }
            }
            _ => execd.resources = resources(v, &field, errors),
        }
    }
    execd
}

fn egress(value: &Value, path: &str, errors: &mut Errors) -> EgressConfig {
    let mut egress = EgressConfig::default();
    let known = [
        "image",
        "mode",
        "disableIPv6",
        "nativeSidecar",
        "maxRules",
        "resources",
        "otlpEndpoint",
        "incompatibleRuntimeClasses",
    ];
    for (key, v) in mapping(value, path, &known, errors) {
        let field = child(path, key);
        match key {
            // null is the documented off switch for egress injection.
            "image" if v.is_null() => egress.image = None,
            "image" => {
                if let Some(image) = keep(errors, image(v, &field)) {
                    egress.image = Some(image);
                }
            }
            "mode" => {
                let mode = string(v, &field, "dns or dns+nft").and_then(|m| match m {
                    "dns" => Ok(EgressMode::Dns),
                    "dns+nft" => Ok(EgressMode::DnsNft),
                    other => Err(invalid(
                        &field,
                        format!("must be dns or dns+nft; got '{}'", rules::shorten(other)),
                    )),
                });
                if let Some(mode) = keep(errors, mode) {
                    egress.mode = mode;
                }
            }
            "disableIPv6" => {
                if let Some(b) = keep(errors, boolean(v, &field)) {
                    egress.disable_ipv6 = b;
                }
            }
            "nativeSidecar" => {
                if let Some(b) = keep(errors, boolean(v, &field)) {
                    egress.native_sidecar = b;
                }
            }
            "maxRules" => {
                let n = whole_number(v, &field, 1, MAX_MAX_RULES as u64)
                    .and_then(|n| usize::try_from(n).map_err(|_| invalid(&field, "is too large")));
                if let Some(n) = keep(errors, n) {
                    egress.max_rules = n;
                }
            }
            // null is the default: no OTLP export.
            "otlpEndpoint" if v.is_null() => egress.otlp_endpoint = None,
            "otlpEndpoint" => {
                let url = string(
                    v,
                    &field,
                    "an http:// or https:// URL such as http://otel-collector:4318",
                )
                .and_then(|u| {
                    rules::otlp_endpoint(u)
                        .map(|()| u)
                        .map_err(|m| invalid(&field, m))
                });
                if let Some(url) = keep(errors, url) {
                    egress.otlp_endpoint = Some(url.to_owned());
                }
            }
            "incompatibleRuntimeClasses" => {
                egress.incompatible_runtime_classes = runtime_classes(v, &field, errors);
            }
            _ => egress.resources = resources(v, &field, errors),
        }
    }
    egress
}

/// A list of runtime class names, possibly empty.
fn runtime_classes(value: &Value, path: &str, errors: &mut Errors) -> Vec<String> {
    let Value::Sequence(items) = value else {
        errors.push(wrong(
            path,
            "a list of runtime class names such as [gvisor]",
            value,
        ));
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("{path}[{i}]");
        let name = string(item, &field, "a runtime class name such as gvisor").and_then(|n| {
            rules::runtime_class(n)
                .map(|()| n)
                .map_err(|m| invalid(&field, m))
        });
        if let Some(name) = keep(errors, name) {
            out.push(name.to_owned());
        }
    }
    out
}

/// The `pod` section: what the webhook sets on the sandbox pod itself.
fn pod(value: &Value, path: &str, errors: &mut Errors) -> PodConfig {
    let mut pod = PodConfig::default();
    for (key, v) in mapping(value, path, &["automountServiceAccountToken"], errors) {
        let field = child(path, key);
        match v {
            Value::Null => pod.automount_service_account_token = None,
            Value::Bool(false) => pod.automount_service_account_token = Some(false),
            Value::Bool(true) => errors.push(invalid(
                &field,
                "must be false (pods without the field get false) or null (every pod is left as it is); true is the Kubernetes default, so write null to keep it",
            )),
            other => errors.push(wrong(&field, "false or null", other)),
        }
    }
    pod
}

fn expiry(value: &Value, path: &str, errors: &mut Errors) -> ExpiryConfig {
    let mut expiry = ExpiryConfig::default();
    let known = ["defaultTimeoutSeconds", "maxTimeoutSeconds"];
    for (key, v) in mapping(value, path, &known, errors) {
        let field = child(path, key);
        let seconds = match v {
            Value::Null => None,
            v => keep(
                errors,
                whole_number(v, &field, MIN_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS),
            ),
        };
        if key == "defaultTimeoutSeconds" {
            expiry.default_timeout_seconds = seconds;
        } else {
            expiry.max_timeout_seconds = seconds;
        }
    }
    if let (Some(default), Some(max)) = (expiry.default_timeout_seconds, expiry.max_timeout_seconds)
        && default > max
    {
        errors.push(invalid(
            &child(path, "defaultTimeoutSeconds"),
            format!(
                "{default} is above expiry.maxTimeoutSeconds ({max}); every pod without a timeout would be denied"
            ),
        ));
    }
    expiry
}

/// The lifecycle controller's section; its own rules (owner kind syntax) are
/// in [`ControllerConfig::validate`].
fn controller(value: &Value, path: &str, errors: &mut Errors) -> ControllerConfig {
    let mut controller = ControllerConfig::default();
    for (key, v) in mapping(value, path, &["expiry", "platform"], errors) {
        let field = child(path, key);
        if key == "expiry" {
            for (key, v) in mapping(v, &field, &["deleteOwnerKinds"], errors) {
                let field = child(&field, key);
                let Value::Sequence(items) = v else {
                    errors.push(wrong(&field, "a list of Kind.group such as Job.batch", v));
                    continue;
                };
                controller.expiry.delete_owner_kinds = items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, item)| {
                        let kind = string(
                            item,
                            &format!("{field}[{i}]"),
                            "Kind.group such as Job.batch",
                        );
                        keep(errors, kind).map(str::to_owned)
                    })
                    .collect();
            }
        } else {
            for (key, v) in mapping(v, &field, &["deleteUnschedulable"], errors) {
                if let Some(b) = keep(errors, boolean(v, &child(&field, key))) {
                    controller.platform.delete_unschedulable = b;
                }
            }
        }
    }
    if let Err((field, message)) = controller.validate() {
        errors.push(invalid(&field, message));
    }
    controller
}

/// A container's `ResourceRequirements`, checked as the apiserver checks them,
/// because they are copied into every sandbox pod: a mistake here would make
/// every sandbox create fail at the apiserver with a message that never names
/// the webhook. Quantities are stored as text, exactly as validated.
fn resources(value: &Value, path: &str, errors: &mut Errors) -> Option<serde_json::Value> {
    if value.is_null() {
        return None;
    }
    let before = errors.len();
    if let Value::Mapping(map) = value
        && map.contains_key("claims")
    {
        errors.push(invalid(
            &child(path, "claims"),
            "is not supported: a claim must name one of the pod's own resourceClaims, which differ from pod to pod",
        ));
    }
    let mut out = serde_json::Map::new();
    let mut parsed: [Vec<(&str, Quantity)>; 2] = [Vec::new(), Vec::new()];
    let known = ["limits", "requests", "claims"];
    for (key, v) in mapping(value, path, &known, errors) {
        if key == "claims" {
            continue;
        }
        let field = child(path, key);
        let Value::Mapping(map) = v else {
            errors.push(wrong(
                &field,
                "a mapping of resource names to quantities, such as {cpu: 100m, memory: 64Mi}",
                v,
            ));
            continue;
        };
        let mut list = serde_json::Map::new();
        for (name, q) in entries(map, &field, errors) {
            let at = child(&field, name);
            if let Some((text, quantity)) = keep(errors, quantity(name, q, &at)) {
                parsed[usize::from(key == "requests")].push((name, quantity));
                list.insert(name.to_owned(), serde_json::Value::String(text));
            }
        }
        out.insert(key.to_owned(), serde_json::Value::Object(list));
    }
    let [limits, requests] = &parsed;
    for (name, request) in requests {
        let at = child(&child(path, "requests"), name);
        let limit = limits.iter().find(|(n, _)| n == name).map(|(_, q)| q);
        // cpu, memory and ephemeral storage may be overcommitted; hugepages
        // and extended resources may not, so they need an equal limit.
        let overcommit = matches!(*name, "cpu" | "memory" | "ephemeral-storage");
        let problem = match limit {
            Some(limit) if request > limit => Some(format!("must not be above limits.{name}")),
            Some(limit) if !overcommit && request != limit => Some(format!(
                "must equal limits.{name}: {name} cannot be overcommitted"
            )),
            None if !overcommit => Some(format!(
                "needs limits.{name} as well: {name} cannot be overcommitted"
            )),
            _ => None,
        };
        if let Some(problem) = problem {
            errors.push(invalid(&at, problem));
        }
    }
    (errors.len() == before).then_some(serde_json::Value::Object(out))
}

/// One resource's quantity, as text and parsed.
fn quantity(name: &str, q: &Value, at: &str) -> Result<(String, Quantity)> {
    rules::resource_name(name).map_err(|m| invalid(at, m))?;
    let text = match q {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => return Err(wrong(at, "a quantity such as 500m, 2 or 256Mi", other)),
    };
    let quantity = Quantity::parse(&text).map_err(|m| invalid(at, m))?;
    if name.contains('/') && !quantity.is_integer() {
        return Err(invalid(
            at,
            format!("'{text}' is not a whole number; extended resources cannot be split"),
        ));
    }
    Ok((text, quantity))
}
