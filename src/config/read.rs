//! The strict reader: YAML is parsed into a generic tree and every field is
//! read by hand, so that each mistake gets a message in plain words naming its
//! field, and YAML's loose scalars never slip through. (Deserializing straight
//! into the structs reads `prefix: null` as the text "null" and `image: 123`
//! as "123", and its errors speak of Rust types.)

use serde_yaml_ng::Value;

use super::controller::{ControllerConfig, ControllerExpiry, OwnerAction, check_owner_action};
use super::keys::Keys;
use super::quantity::Quantity;
use super::rules;
use super::schema::{
    Config, ConfigError, EgressConfig, EgressMode, ExecdConfig, ExpiryConfig, MAX_MAX_RULES,
    MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS, PodConfig,
};
use super::upstream;
use super::values::{
    Errors, Result, boolean, checked, checked_list, child, entries, invalid, keep, mapping, set,
    string, whole_number, wrong,
};

/// The configuration in `root`, or every mistake in it: one
/// [`ConfigError::Invalid`], or several in a [`ConfigError::Several`].
pub(super) fn config(root: &Value) -> Result<Config> {
    let mut errors = Errors::new();
    let mut config = Config::default();
    let known = [
        "prefix",
        "revision",
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
                let prefix = checked(
                    value,
                    key,
                    "a DNS subdomain such as opensandbox.io",
                    rules::dns_subdomain,
                );
                set(&mut errors, &mut config.prefix, prefix.map(str::to_owned));
            }
            // null is the default release.
            "revision" if value.is_null() => config.revision = None,
            "revision" => {
                let revision = checked(value, key, "a DNS label such as canary", rules::revision);
                set(
                    &mut errors,
                    &mut config.revision,
                    revision.map(|r| Some(r.to_owned())),
                );
            }
            "excludedNamespaces" => {
                config.excluded_namespaces = checked_list(
                    value,
                    key,
                    ("a list of namespace names", "a namespace name"),
                    rules::dns_label,
                    &mut errors,
                );
            }
            "execd" => config.execd = execd(value, key, &mut errors),
            "egress" => config.egress = egress(value, key, &mut errors),
            "pod" => config.pod = pod(value, key, &mut errors),
            "expiry" => config.expiry = expiry(value, key, &mut errors),
            _ => config.controller = controller(value, key, &mut errors),
        }
    }
    config.keys = Keys::new(&config.prefix);
    config.record = config.make_record();
    if errors.len() > 1 {
        return Err(ConfigError::Several(errors));
    }
    errors.pop().map_or(Ok(config), Err)
}

fn image(value: &Value, path: &str) -> Result<String> {
    let what = "an image reference such as opensandbox/execd:v1.0.18";
    checked(value, path, what, rules::image).map(str::to_owned)
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
            "image" => set(errors, &mut execd.image, image(v, &field)),
            "runAsInit" => set(errors, &mut execd.run_as_init, boolean(v, &field)),
            "allowIsolation" => set(errors, &mut execd.allow_isolation, boolean(v, &field)),
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
        "upstreamProxy",
    ];
    for (key, v) in mapping(value, path, &known, errors) {
        let field = child(path, key);
        match key {
            // null is the documented off switch for egress injection.
            "image" if v.is_null() => egress.image = None,
            "image" => set(errors, &mut egress.image, image(v, &field).map(Some)),
            "mode" => {
                let mode = string(v, &field, "dns or dns+nft").and_then(|m| match m {
                    "dns" => Ok(EgressMode::Dns),
                    "dns+nft" => Ok(EgressMode::DnsNft),
                    other => Err(invalid(
                        &field,
                        format!("must be dns or dns+nft; got '{}'", rules::shorten(other)),
                    )),
                });
                set(errors, &mut egress.mode, mode);
            }
            "disableIPv6" => set(errors, &mut egress.disable_ipv6, boolean(v, &field)),
            "nativeSidecar" => set(errors, &mut egress.native_sidecar, boolean(v, &field)),
            "maxRules" => {
                let n = whole_number(v, &field, 1, MAX_MAX_RULES as u64)
                    .and_then(|n| usize::try_from(n).map_err(|_| invalid(&field, "is too large")));
                set(errors, &mut egress.max_rules, n);
            }
            // null is the default: no OTLP export.
            "otlpEndpoint" if v.is_null() => egress.otlp_endpoint = None,
            "otlpEndpoint" => {
                let url = checked(
                    v,
                    &field,
                    "an http:// or https:// URL such as http://otel-collector:4318",
                    rules::otlp_endpoint,
                );
                let url = url.map(|u| Some(u.to_owned()));
                set(errors, &mut egress.otlp_endpoint, url);
            }
            "incompatibleRuntimeClasses" => {
                egress.incompatible_runtime_classes = checked_list(
                    v,
                    &field,
                    (
                        "a list of runtime class names such as [gvisor]",
                        "a runtime class name such as gvisor",
                    ),
                    rules::runtime_class,
                    errors,
                );
            }
            // null is the default: egress leaves directly.
            "upstreamProxy" if v.is_null() => egress.upstream_proxy = None,
            "upstreamProxy" => egress.upstream_proxy = upstream::read(v, &field, errors),
            _ => egress.resources = resources(v, &field, errors),
        }
    }
    // The sidecar chains only connections its transparent MITM proxy
    // handles, which `dns` mode does not set up: it refuses to start.
    if egress.upstream_proxy.is_some() && egress.mode != EgressMode::DnsNft {
        errors.push(invalid(
            &child(path, "upstreamProxy"),
            "needs egress.mode dns+nft: the sidecar chains only the connections its transparent proxy intercepts, which mode dns does not set up",
        ));
    }
    egress
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

/// The lifecycle controller's section; each owner entry is checked with
/// [`check_owner_action`].
fn controller(value: &Value, path: &str, errors: &mut Errors) -> ControllerConfig {
    let mut controller = ControllerConfig::default();
    for (key, v) in mapping(value, path, &["expiry", "platform"], errors) {
        let field = child(path, key);
        if key == "expiry" {
            controller.expiry = controller_expiry(v, &field, errors);
        } else {
            for (key, v) in mapping(v, &field, &["deleteUnschedulable"], errors) {
                let b = boolean(v, &child(&field, key));
                set(errors, &mut controller.platform.delete_unschedulable, b);
            }
        }
    }
    controller
}

/// `controller.expiry`: `ownerActions`, or the deprecated
/// `deleteOwnerKinds` (each entry `delete`), never both.
fn controller_expiry(value: &Value, path: &str, errors: &mut Errors) -> ControllerExpiry {
    let mut expiry = ControllerExpiry::default();
    let fields = mapping(value, path, &["ownerActions", "deleteOwnerKinds"], errors);
    if fields.len() == 2 {
        errors.push(invalid(
            &child(path, "deleteOwnerKinds"),
            "is deprecated and replaced by ownerActions; set only ownerActions (delete for each of these kinds)",
        ));
        return expiry;
    }
    for (key, v) in fields {
        let field = child(path, key);
        expiry.owner_actions.clear();
        if key == "deleteOwnerKinds" {
            expiry.deprecated_delete_owner_kinds = true;
            let Value::Sequence(items) = v else {
                errors.push(wrong(&field, "a list of Kind.group such as Job.batch", v));
                continue;
            };
            for (i, item) in items.iter().enumerate() {
                let at = format!("{field}[{i}]");
                let kind = string(item, &at, "Kind.group such as Job.batch").and_then(|kind| {
                    check_owner_action(kind, OwnerAction::Delete).map_err(|m| invalid(&at, m))?;
                    Ok(kind)
                });
                if let Some(kind) = keep(errors, kind) {
                    expiry
                        .owner_actions
                        .insert(kind.to_owned(), OwnerAction::Delete);
                }
            }
            continue;
        }
        let Value::Mapping(map) = v else {
            errors.push(wrong(
                &field,
                "a mapping of Kind.group to shutdown, suspend or delete, such as {Job.batch: delete}",
                v,
            ));
            continue;
        };
        for (kind, action) in entries(map, &field, errors) {
            let at = child(&field, kind);
            let read = string(action, &at, "shutdown, suspend or delete").and_then(|text| {
                let action = OwnerAction::parse(text)
                    .ok_or_else(|| wrong(&at, "shutdown, suspend or delete", action))?;
                check_owner_action(kind, action).map_err(|m| invalid(&at, m))?;
                Ok(action)
            });
            if let Some(action) = keep(errors, read) {
                expiry.owner_actions.insert(kind.to_owned(), action);
            }
        }
    }
    expiry
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
