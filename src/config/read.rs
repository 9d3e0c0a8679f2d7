//! The strict reader: YAML is parsed into a generic tree and every field is
//! read by hand, so that each mistake gets a message in plain words naming its
//! field, and YAML's loose scalars never slip through. (Deserializing straight
//! into the structs reads `prefix: null` as the text "null" and `image: 123`
//! as "123", and its errors speak of Rust types.)

use serde_yaml_ng::{Mapping, Value};

use super::controller::ControllerConfig;
use super::quantity::Quantity;
use super::rules;
use super::schema::{
    Config, ConfigError, EgressConfig, EgressMode, ExecdConfig, ExpiryConfig, Keys, MAX_MAX_RULES,
    MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS,
};

type Result<T> = std::result::Result<T, ConfigError>;

fn invalid(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.to_owned(),
        message: message.into(),
    }
}

/// What a value is, for "got ..." in messages.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null (an empty value)".into(),
        Value::Bool(b) => format!("{b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the text '{}'", rules::shorten(s)),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(t) => format!("a value tagged {}", t.tag),
    }
}

/// "must be `what`; got ..." about `field`.
fn wrong(field: &str, what: &str, got: &Value) -> ConfigError {
    invalid(field, format!("must be {what}; got {}", describe(got)))
}

fn child(path: &str, key: &str) -> String {
    // Keys with dots (nvidia.com/gpu) are bracketed so the path stays readable.
    match (path.is_empty(), key.contains('.')) {
        (true, _) => key.to_owned(),
        (false, false) => format!("{path}.{key}"),
        (false, true) => format!("{path}[\"{key}\"]"),
    }
}

/// A mapping with only `known` keys, each a string; the result is in file
/// order, so the first mistake in the file is the one reported.
fn mapping<'a>(value: &'a Value, path: &str, known: &[&str]) -> Result<Vec<(&'a str, &'a Value)>> {
    let Value::Mapping(map) = value else {
        let what = if path.is_empty() {
            "the file"
        } else {
            "this field"
        };
        return Err(invalid(
            path,
            format!(
                "{what} must be a mapping with the keys {}; got {}",
                known.join(", "),
                describe(value)
            ),
        ));
    };
    entries(map, path)?
        .into_iter()
        .map(|(key, v)| {
            if known.contains(&key) {
                Ok((key, v))
            } else {
                Err(invalid(
                    &child(path, key),
                    format!("unknown field; the fields here are {}", known.join(", ")),
                ))
            }
        })
        .collect()
}

fn entries<'a>(map: &'a Mapping, path: &str) -> Result<Vec<(&'a str, &'a Value)>> {
    map.iter()
        .map(|(k, v)| match k {
            Value::String(key) => Ok((key.as_str(), v)),
            other => Err(invalid(
                path,
                format!("keys must be text; got {}", describe(other)),
            )),
        })
        .collect()
}

fn string<'a>(value: &'a Value, path: &str, what: &str) -> Result<&'a str> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(wrong(path, what, other)),
    }
}

fn boolean(value: &Value, path: &str) -> Result<bool> {
    match value {
        Value::Bool(b) => Ok(*b),
        other => Err(wrong(path, "true or false", other)),
    }
}

fn whole_number(value: &Value, path: &str, min: u64, max: u64) -> Result<u64> {
    let range = format!("a whole number from {min} to {max}");
    let n = match value {
        Value::Number(n) => n.as_u64(),
        _ => None,
    };
    match n {
        Some(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(wrong(path, &range, value)),
    }
}

pub(super) fn config(root: &Value) -> Result<Config> {
    let mut config = Config::default();
    let known = [
        "prefix",
        "excludedNamespaces",
        "execd",
        "egress",
        "expiry",
        "controller",
    ];
    for (key, value) in mapping(root, "", &known)? {
        match key {
            "prefix" => {
                let prefix = string(value, key, "a DNS subdomain such as opensandbox.io")?;
                rules::dns_subdomain(prefix).map_err(|m| invalid(key, m))?;
                prefix.clone_into(&mut config.prefix);
            }
            "excludedNamespaces" => config.excluded_namespaces = namespaces(value, key)?,
            "execd" => config.execd = execd(value, key)?,
            "egress" => config.egress = egress(value, key)?,
            "expiry" => config.expiry = expiry(value, key)?,
            _ => config.controller = controller(value, key)?,
        }
    }
    config.keys = Keys::new(&config.prefix);
    Ok(config)
}

fn namespaces(value: &Value, path: &str) -> Result<Vec<String>> {
    let Value::Sequence(items) = value else {
        return Err(wrong(path, "a list of namespace names", value));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let field = format!("{path}[{i}]");
            let ns = string(item, &field, "a namespace name")?;
            rules::dns_label(ns).map_err(|m| invalid(&field, m))?;
            Ok(ns.to_owned())
        })
        .collect()
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

fn execd(value: &Value, path: &str) -> Result<ExecdConfig> {
    let mut execd = ExecdConfig::default();
    for (key, v) in mapping(value, path, &["image", "resources"])? {
        let field = child(path, key);
        match key {
            "image" if v.is_null() => {
                return Err(invalid(
                    &field,
                    "must be an image reference; it cannot be null (execd is always injected)",
                ));
            }
            "image" => execd.image = image(v, &field)?,
            _ => execd.resources = resources(v, &field)?,
        }
    }
    Ok(execd)
}

fn egress(value: &Value, path: &str) -> Result<EgressConfig> {
    let mut egress = EgressConfig::default();
    let known = [
        "image",
        "mode",
        "disableIPv6",
        "nativeSidecar",
        "maxRules",
        "resources",
    ];
    for (key, v) in mapping(value, path, &known)? {
        let field = child(path, key);
        match key {
            // null is the documented off switch for egress injection.
            "image" if v.is_null() => egress.image = None,
            "image" => egress.image = Some(image(v, &field)?),
            "mode" => {
                egress.mode = match string(v, &field, "dns or dns+nft")? {
                    "dns" => EgressMode::Dns,
                    "dns+nft" => EgressMode::DnsNft,
                    other => {
                        return Err(invalid(
                            &field,
                            format!("must be dns or dns+nft; got '{}'", rules::shorten(other)),
                        ));
                    }
                }
            }
            "disableIPv6" => egress.disable_ipv6 = boolean(v, &field)?,
            "nativeSidecar" => egress.native_sidecar = boolean(v, &field)?,
            "maxRules" => {
                let n = whole_number(v, &field, 1, MAX_MAX_RULES as u64)?;
                egress.max_rules =
                    usize::try_from(n).map_err(|_| invalid(&field, "is too large"))?;
            }
            _ => egress.resources = resources(v, &field)?,
        }
    }
    Ok(egress)
}

fn expiry(value: &Value, path: &str) -> Result<ExpiryConfig> {
    let mut expiry = ExpiryConfig::default();
    let known = ["defaultTimeoutSeconds", "maxTimeoutSeconds"];
    for (key, v) in mapping(value, path, &known)? {
        let field = child(path, key);
        let seconds = match v {
            Value::Null => None,
            v => Some(whole_number(
                v,
                &field,
                MIN_TIMEOUT_SECONDS,
                MAX_TIMEOUT_SECONDS,
            )?),
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
        return Err(invalid(
            &child(path, "defaultTimeoutSeconds"),
            format!(
                "{default} is above expiry.maxTimeoutSeconds ({max}); every pod without a timeout would be denied"
            ),
        ));
    }
    Ok(expiry)
}

/// The lifecycle controller's section; its own rules (owner kind syntax) are
/// in [`ControllerConfig::validate`].
fn controller(value: &Value, path: &str) -> Result<ControllerConfig> {
    let mut controller = ControllerConfig::default();
    for (key, v) in mapping(value, path, &["expiry", "platform"])? {
        let field = child(path, key);
        if key == "expiry" {
            for (key, v) in mapping(v, &field, &["deleteOwnerKinds"])? {
                let field = child(&field, key);
                let Value::Sequence(items) = v else {
                    return Err(wrong(&field, "a list of Kind.group such as Job.batch", v));
                };
                controller.expiry.delete_owner_kinds = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| {
                        string(
                            item,
                            &format!("{field}[{i}]"),
                            "Kind.group such as Job.batch",
                        )
                        .map(str::to_owned)
                    })
                    .collect::<Result<_>>()?;
            }
        } else {
            for (key, v) in mapping(v, &field, &["deleteUnschedulable"])? {
                controller.platform.delete_unschedulable = boolean(v, &child(&field, key))?;
            }
        }
    }
    controller
        .validate()
        .map_err(|(field, message)| invalid(&field, message))?;
    Ok(controller)
}

/// A container's `ResourceRequirements`, checked as the apiserver checks them,
/// because they are copied into every sandbox pod: a mistake here would make
/// every sandbox create fail at the apiserver with a message that never names
/// the webhook. Quantities are stored as text, exactly as validated.
fn resources(value: &Value, path: &str) -> Result<Option<serde_json::Value>> {
    if value.is_null() {
        return Ok(None);
    }
    if let Value::Mapping(map) = value
        && map.contains_key("claims")
    {
        return Err(invalid(
            &child(path, "claims"),
            "is not supported: a claim must name one of the pod's own resourceClaims, which differ from pod to pod",
        ));
    }
    let mut out = serde_json::Map::new();
    let mut parsed: [Vec<(&str, Quantity)>; 2] = [Vec::new(), Vec::new()];
    for (key, v) in mapping(value, path, &["limits", "requests"])? {
        let field = child(path, key);
        let Value::Mapping(map) = v else {
            return Err(wrong(
                &field,
                "a mapping of resource names to quantities, such as {cpu: 100m, memory: 64Mi}",
                v,
            ));
        };
        let mut list = serde_json::Map::new();
        for (name, q) in entries(map, &field)? {
            let at = child(&field, name);
            rules::resource_name(name).map_err(|m| invalid(&at, m))?;
            let text = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => {
                    return Err(wrong(&at, "a quantity such as 500m, 2 or 256Mi", other));
                }
            };
            let quantity = Quantity::parse(&text).map_err(|m| invalid(&at, m))?;
            if name.contains('/') && !quantity.is_integer() {
                return Err(invalid(
                    &at,
                    format!("'{text}' is not a whole number; extended resources cannot be split"),
                ));
            }
            parsed[usize::from(key == "requests")].push((name, quantity));
            list.insert(name.to_owned(), serde_json::Value::String(text));
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
        match limit {
            Some(limit) if request > limit => {
                return Err(invalid(&at, format!("must not be above limits.{name}")));
            }
            Some(limit) if !overcommit && request != limit => {
                return Err(invalid(
                    &at,
                    format!("must equal limits.{name}: {name} cannot be overcommitted"),
                ));
            }
            None if !overcommit => {
                return Err(invalid(
                    &at,
                    format!("needs limits.{name} as well: {name} cannot be overcommitted"),
                ));
            }
            _ => {}
        }
    }
    Ok(Some(serde_json::Value::Object(out)))
}
