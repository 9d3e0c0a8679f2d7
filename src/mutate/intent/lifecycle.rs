//! The `<prefix>/lifecycle` annotation (contract: intent.lifecycle,
//! execd.env-lifecycle): execd's lifecycle hooks, handed to execd as
//! `OPENSANDBOX_LIFECYCLE`. The contract fixes the transport (the object as
//! compact JSON, keys in their given order, `null` members dropped); the shape
//! is upstream OpenSandbox's `SandboxLifecycle`
//! (`server/opensandbox_server/api/schema.py`):
//!
//! ```text
//! {"preStart": {"command": [..], "timeoutSeconds": 1..300},
//!  "periodic": [{"name": .., "schedule": .., "command": [..], "timeoutSeconds": 1..300}]}
//! ```
//!
//! every field but `command` (and a periodic hook's `name` and `schedule`)
//! optional, no other field, a command's first word not blank, periodic
//! names unique. execd refuses anything else at start, which would leave
//! the sandbox without execd; refused here, it is a sentence at admission.
//! Upstream trims a periodic hook's name and schedule; the values are
//! passed on as written (contract: execd.env-lifecycle, the object as given),
//! and only checked trimmed.

use serde_json::{Map, Value};

use crate::json::error::quoted;
use crate::mutate::quote::clip;

/// The longest a hook may run, in seconds (upstream's bound).
const MAX_TIMEOUT: u64 = 300;

/// The annotation as `OPENSANDBOX_LIFECYCLE`'s value, or why it is refused:
/// the end of a sentence that starts with the annotation key.
pub(crate) fn parse(raw: &str) -> Result<String, String> {
    let Ok(Value::Object(top)) = serde_json::from_str::<Value>(raw) else {
        return Err(
            "is not a JSON object such as {\"preStart\": {\"command\": [\"sh\", \"-c\", \"...\"]}}"
                .to_owned(),
        );
    };
    let top = without_nulls(top);
    fields(&top, "", &["preStart", "periodic"])?;
    if let Some(hook) = top.get("preStart") {
        check_hook(hook, "preStart", &["command", "timeoutSeconds"])?;
    }
    if let Some(periodic) = top.get("periodic") {
        let Value::Array(hooks) = periodic else {
            return Err("has periodic that is not a list of hooks".to_owned());
        };
        let mut names: Vec<&str> = Vec::with_capacity(hooks.len());
        for (i, hook) in hooks.iter().enumerate() {
            let at = format!("periodic[{i}]");
            check_hook(
                hook,
                &at,
                &["name", "schedule", "command", "timeoutSeconds"],
            )?;
            for field in ["name", "schedule"] {
                if hook
                    .get(field)
                    .and_then(Value::as_str)
                    .is_none_or(|s| s.trim().is_empty())
                {
                    return Err(format!(
                        "has {at} without a {field}; give a non-empty string"
                    ));
                }
            }
            let name = hook["name"].as_str().unwrap_or_default().trim();
            if let Some(first) = names.iter().position(|n| *n == name) {
                return Err(format!(
                    "has {at}.name {}, which periodic[{first}] has already; periodic hook names must be unique",
                    quoted(&clip(name))
                ));
            }
            names.push(name);
        }
    }
    serde_json::to_string(&Value::Object(top)).map_err(|e| format!("cannot be encoded: {e}"))
}

/// `value` without its `null` members, at every depth (a list keeps its
/// items: only object members are "members").
fn without_nulls(map: Map<String, Value>) -> Map<String, Value> {
    map.into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k, drop_nulls(v)))
        .collect()
}

fn drop_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(without_nulls(map)),
        Value::Array(items) => Value::Array(items.into_iter().map(drop_nulls).collect()),
        other => other,
    }
}

/// Only `known` fields in the object `at`.
fn fields(map: &Map<String, Value>, at: &str, known: &[&str]) -> Result<(), String> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) => Err(format!(
            "has unknown field {} in {}; only {} are allowed",
            quoted(&clip(unknown)),
            if at.is_empty() { "the object" } else { at },
            known.join(", ")
        )),
    }
}

fn check_hook(hook: &Value, at: &str, known: &[&str]) -> Result<(), String> {
    let Value::Object(map) = hook else {
        return Err(format!("has {at} that is not an object with a command"));
    };
    fields(map, at, known)?;
    let command = map.get("command").and_then(Value::as_array);
    let words: Option<Vec<&str>> =
        command.and_then(|c| c.iter().map(Value::as_str).collect::<Option<Vec<&str>>>());
    match words.as_deref() {
        Some([first, ..]) if !first.trim().is_empty() => {}
        Some([_, ..]) => {
            return Err(format!("has {at}.command whose first word is blank"));
        }
        _ => {
            return Err(format!(
                "has {at}.command that is not a non-empty list of strings such as [\"sh\", \"-c\", \"...\"]"
            ));
        }
    }
    if let Some(t) = map.get("timeoutSeconds")
        && t.as_u64().is_none_or(|t| !(1..=MAX_TIMEOUT).contains(&t))
    {
        return Err(format!(
            "has {at}.timeoutSeconds {t}; use a whole number of seconds from 1 to {MAX_TIMEOUT}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passed_on_compact_in_the_given_order_without_nulls() {
        assert_eq!(
            parse(
                r#"{ "preStart" : { "timeoutSeconds": 30, "command": ["sh", "-c", "pip install x"] } }"#
            ),
            Ok(
                r#"{"preStart":{"timeoutSeconds":30,"command":["sh","-c","pip install x"]}}"#
                    .to_owned()
            )
        );
        assert_eq!(
            parse(
                r#"{"periodic": [{"schedule": "*/5 * * * *", "name": " sync ", "command": ["sync"], "timeoutSeconds": null}],
                    "preStart": null}"#
            ),
            Ok(
                r#"{"periodic":[{"schedule":"*/5 * * * *","name":" sync ","command":["sync"]}]}"#
                    .to_owned()
            )
        );
        assert_eq!(parse("{}"), Ok("{}".to_owned()));
        assert_eq!(
            parse(r#"{"periodic": []}"#),
            Ok(r#"{"periodic":[]}"#.to_owned())
        );
    }

    #[test]
    fn anything_else_is_refused_naming_it() {
        for (raw, says) in [
            ("[]", "is not a JSON object"),
            ("{", "is not a JSON object"),
            (
                r#"{"postStop": {}}"#,
                "unknown field \"postStop\" in the object",
            ),
            (
                r#"{"preStart": {"command": ["x"], "env": {}}}"#,
                "unknown field \"env\" in preStart",
            ),
            (r#"{"preStart": "sh"}"#, "preStart that is not an object"),
            (
                r#"{"preStart": {}}"#,
                "preStart.command that is not a non-empty list",
            ),
            (r#"{"preStart": {"command": []}}"#, "not a non-empty list"),
            (r#"{"preStart": {"command": [1]}}"#, "not a non-empty list"),
            (
                r#"{"preStart": {"command": ["  ", "x"]}}"#,
                "first word is blank",
            ),
            (
                r#"{"preStart": {"command": ["x"], "timeoutSeconds": 0}}"#,
                "timeoutSeconds 0",
            ),
            (
                r#"{"preStart": {"command": ["x"], "timeoutSeconds": 301}}"#,
                "from 1 to 300",
            ),
            (
                r#"{"preStart": {"command": ["x"], "timeoutSeconds": 1.5}}"#,
                "timeoutSeconds 1.5",
            ),
            (
                r#"{"preStart": {"command": ["x"], "timeoutSeconds": "30"}}"#,
                "timeoutSeconds \"30\"",
            ),
            (r#"{"periodic": {}}"#, "periodic that is not a list"),
            (
                r#"{"periodic": [{"schedule": "@hourly", "command": ["x"]}]}"#,
                "periodic[0] without a name",
            ),
            (
                r#"{"periodic": [{"name": "a", "schedule": " ", "command": ["x"]}]}"#,
                "without a schedule",
            ),
            (
                r#"{"periodic": [{"name": "a", "schedule": "@hourly", "command": ["x"]},
                                 {"name": " a", "schedule": "@daily", "command": ["y"]}]}"#,
                "periodic[1].name \"a\", which periodic[0] has already",
            ),
        ] {
            let e = parse(raw).unwrap_err();
            assert!(e.contains(says), "{raw}: {e}");
        }
    }
}
