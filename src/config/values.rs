//! Reading one YAML value of the configuration file strictly: the helpers
//! every section's reader (`read`) shares. Each mistake becomes a
//! [`ConfigError`] naming its field in plain words.

use serde_yaml_ng::{Mapping, Value};

use super::rules;
use super::schema::ConfigError;

pub(super) type Result<T> = std::result::Result<T, ConfigError>;

pub(super) fn invalid(field: &str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.to_owned(),
        message: message.into(),
    }
}

/// What a value is, for "got ..." in messages.
pub(super) fn describe(value: &Value) -> String {
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
pub(super) fn wrong(field: &str, what: &str, got: &Value) -> ConfigError {
    invalid(field, format!("must be {what}; got {}", describe(got)))
}

pub(super) fn child(path: &str, key: &str) -> String {
    // Keys with dots (nvidia.com/gpu) are bracketed so the path stays readable.
    match (path.is_empty(), key.contains('.')) {
        (true, _) => key.to_owned(),
        (false, false) => format!("{path}.{key}"),
        (false, true) => format!("{path}[\"{key}\"]"),
    }
}

/// The mistakes found so far. Reading goes on after each one, so that
/// `config validate` names them all at once, in file order.
pub(super) type Errors = Vec<ConfigError>;

/// `result`'s value, or `None` with its error kept.
pub(super) fn keep<T>(errors: &mut Errors, result: Result<T>) -> Option<T> {
    result.map_err(|e| errors.push(e)).ok()
}

/// `result`'s value stored in `target`, or `target` left as it is with the
/// error kept.
pub(super) fn set<T>(errors: &mut Errors, target: &mut T, result: Result<T>) {
    if let Some(value) = keep(errors, result) {
        *target = value;
    }
}

/// The `known` keys of a mapping, each a string, in file order; any other
/// key (and a value that is no mapping) is a mistake kept in `errors`.
pub(super) fn mapping<'a>(
    value: &'a Value,
    path: &str,
    known: &[&str],
    errors: &mut Errors,
) -> Vec<(&'a str, &'a Value)> {
    let Value::Mapping(map) = value else {
        let what = if path.is_empty() {
            "the file"
        } else {
            "this field"
        };
        errors.push(invalid(
            path,
            format!(
                "{what} must be a mapping with the keys {}; got {}",
                known.join(", "),
                describe(value)
            ),
        ));
        return Vec::new();
    };
    let mut out = Vec::with_capacity(map.len());
    for (key, v) in entries(map, path, errors) {
        if known.contains(&key) {
            out.push((key, v));
        } else {
            errors.push(invalid(
                &child(path, key),
                format!("unknown field; the fields here are {}", known.join(", ")),
            ));
        }
    }
    out
}

/// The entries of `map` whose keys are text; any other key is a mistake.
pub(super) fn entries<'a>(
    map: &'a Mapping,
    path: &str,
    errors: &mut Errors,
) -> Vec<(&'a str, &'a Value)> {
    let mut out = Vec::with_capacity(map.len());
    for (k, v) in map {
        match k {
            Value::String(key) => out.push((key.as_str(), v)),
            other => errors.push(invalid(
                path,
                format!("keys must be text; got {}", describe(other)),
            )),
        }
    }
    out
}

pub(super) fn string<'a>(value: &'a Value, path: &str, what: &str) -> Result<&'a str> {
    match value {
        Value::String(s) => Ok(s),
        other => Err(wrong(path, what, other)),
    }
}

/// A string that `rule` accepts; `what` names the kind of value for
/// "must be ...", and `rule`'s message is kept as it is.
pub(super) fn checked<'a>(value: &'a Value, path: &str, what: &str, rule: Rule) -> Result<&'a str> {
    let s = string(value, path, what)?;
    rule(s).map_err(|m| invalid(path, m))?;
    Ok(s)
}

/// One of the `rules` checks: `Err` holds the message for the field.
pub(super) type Rule = fn(&str) -> std::result::Result<(), String>;

/// A list of strings that `rule` accepts, possibly empty; `list` and `item`
/// name what the list and each entry must be. Each mistake is kept in
/// `errors` and its entry left out, so the rest are still read.
pub(super) fn checked_list(
    value: &Value,
    path: &str,
    (list, item): (&str, &str),
    rule: Rule,
    errors: &mut Errors,
) -> Vec<String> {
    let Value::Sequence(items) = value else {
        errors.push(wrong(path, list, value));
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, entry) in items.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if let Some(s) = keep(errors, checked(entry, &field, item, rule)) {
            out.push(s.to_owned());
        }
    }
    out
}

pub(super) fn boolean(value: &Value, path: &str) -> Result<bool> {
    match value {
        Value::Bool(b) => Ok(*b),
        other => Err(wrong(path, "true or false", other)),
    }
}

pub(super) fn whole_number(value: &Value, path: &str, min: u64, max: u64) -> Result<u64> {
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
