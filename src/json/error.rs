//! JSON that could not be read, said in JSON's words: the path of the value
//! that broke (`request.object.metadata`) and what was expected there
//! (`expected an object, got an array`), never the name of the Rust type
//! that was reading it.
//!
//! Reading with the path tracked costs more than plain reading, so callers
//! read plainly first and come here only once that failed: the same reader
//! on the same text fails the same way, now with its path.

use std::fmt::{self, Write as _};

use serde::Deserialize;
use serde_json::error::Category;
use serde_path_to_error::Segment;

/// Where a JSON document broke and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonError {
    /// Dotted, with `[i]` for list items and `["k"]` for keys that are not
    /// plain names; empty for the document itself.
    pub path: String,
    /// What was expected there and what was found, or the syntax error.
    pub problem: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.problem)
        } else {
            write!(f, "{}: {}", self.path, self.problem)
        }
    }
}

impl std::error::Error for JsonError {}

/// Reads `text` as `T`, tracking the path, with `root` as the path of the
/// document itself (`request.object` for a pod inside a review, empty for
/// a whole body).
///
/// # Errors
/// The path and problem of the first value that could not be read.
pub fn from_str<'de, T: Deserialize<'de>>(text: &'de str, root: &str) -> Result<T, JsonError> {
    let mut de = serde_json::Deserializer::from_str(text);
    match serde_path_to_error::deserialize(&mut de) {
        Err(e) => Err(describe(root, e.path().iter(), e.inner())),
        Ok(value) => match de.end() {
            Ok(()) => Ok(value),
            Err(e) => Err(describe(root, [], &e)),
        },
    }
}

/// [`from_str`] for a document already parsed, such as YAML read as JSON.
///
/// # Errors
/// The path and problem of the first value that could not be read.
pub fn from_value<'de, T: Deserialize<'de>>(
    value: &'de serde_json::Value,
    root: &str,
) -> Result<T, JsonError> {
    serde_path_to_error::deserialize(value).map_err(|e| describe(root, e.path().iter(), e.inner()))
}

fn describe<'s>(
    root: &str,
    at: impl IntoIterator<Item = &'s Segment>,
    error: &serde_json::Error,
) -> JsonError {
    let mut path = root.to_owned();
    for segment in at {
        push_segment(&mut path, segment);
    }
    let full = error.to_string();
    let message = match error.line() {
        0 => full.as_str(),
        line => full
            .strip_suffix(&format!(" at line {line} column {}", error.column()))
            .unwrap_or(&full),
    };
    let problem = match error.classify() {
        Category::Data => data_problem(message, &mut path),
        Category::Syntax | Category::Eof => format!(
            "{message} (line {}, column {})",
            error.line(),
            error.column()
        ),
        Category::Io => message.to_owned(),
    };
    JsonError { path, problem }
}

/// `.name` for a plain name, `["key"]` for any other key (annotation and
/// label keys hold dots and slashes), `[i]` for a list item.
fn push_segment(path: &mut String, segment: &Segment) {
    match segment {
        Segment::Seq { index } => {
            // Writing to a String cannot fail.
            let _ = write!(path, "[{index}]");
        }
        Segment::Map { key } | Segment::Enum { variant: key } => push_key(path, key),
        // Between entries, before the next key was read: the error is
        // about the object itself.
        Segment::Unknown => {}
    }
}

fn push_key(path: &mut String, key: &str) {
    let plain = key.starts_with(|c: char| c.is_ascii_alphabetic())
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        let _ = write!(path, "[{}]", quoted(&clip(key)));
    }
}

/// serde's wording of a type or value error in JSON's words. A missing or
/// repeated field moves into the path, as the value that is wrong.
fn data_problem(message: &str, path: &mut String) -> String {
    let invalid = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "));
    if let Some((found, expected)) = invalid.and_then(|rest| rest.rsplit_once(", expected ")) {
        return format!(
            "expected {}, got {}",
            expected_value(expected),
            found_value(found)
        );
    }
    // A list where an object was expected (serde reads a struct from one).
    if let Some((_, expected)) = message
        .strip_prefix("invalid length ")
        .and_then(|rest| rest.split_once(", expected "))
    {
        let expected = expected.split(" with ").next().unwrap_or(expected);
        return format!("expected {}, got an array", expected_value(expected));
    }
    if let Some(field) = field_named(message, "missing field ") {
        push_key(path, field);
        return "is required but missing".to_owned();
    }
    if let Some(field) = field_named(message, "duplicate field ") {
        push_key(path, field);
        return "is given more than once".to_owned();
    }
    message.to_owned()
}

/// serde's own words for what its readers of standard types expect, as
/// JSON calls it; this crate's readers already say it so.
fn expected_value(expected: &str) -> &str {
    match expected {
        "a sequence" | "a tuple" => "an array",
        "a map" => "an object",
        "a borrowed string" | "a char" => "a string",
        "u8" | "u16" | "u32" | "u64" | "u128" | "usize" | "i8" | "i16" | "i32" | "i64" | "i128"
        | "isize" => "a whole number",
        "f32" | "f64" => "a number",
        other if is_type_name(other) => "an object",
        other if other.starts_with("enum ") || other.contains(" enum ") => {
            "one of the allowed forms"
        }
        other => other,
    }
}

/// A reader that did not say what it expects in JSON's words names its
/// Rust type instead: `struct X`, or just `ObjectMeta` (k8s-openapi's
/// readers). Every such reader here reads an object.
fn is_type_name(expected: &str) -> bool {
    let name = expected.strip_prefix("struct ").unwrap_or(expected);
    name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `name` of "<prefix>`name`".
fn field_named<'m>(message: &'m str, prefix: &str) -> Option<&'m str> {
    message
        .strip_prefix(prefix)?
        .strip_prefix('`')?
        .strip_suffix('`')
}

/// serde's name for what it found (`sequence`, ``integer `5` ``,
/// `string "x"`) as JSON calls it, long strings cut.
fn found_value(found: &str) -> String {
    let quoted = |prefix: &str| {
        found
            .strip_prefix(prefix)
            .and_then(|v| v.strip_prefix('`'))
            .and_then(|v| v.strip_suffix('`'))
    };
    match found {
        "sequence" => return "an array".to_owned(),
        "map" => return "an object".to_owned(),
        "null" | "unit value" => return "null".to_owned(),
        _ => {}
    }
    if let Some(v) = quoted("boolean ") {
        return v.to_owned();
    }
    if let Some(v) = quoted("integer ").or_else(|| quoted("floating point ")) {
        return format!("the number {v}");
    }
    if let Some(v) = found.strip_prefix("string ") {
        return format!("the string {}", clip(v));
    }
    clip(found)
}

/// Values and keys from the request quoted in an error are cut to this
/// many characters: an error must not echo a megabyte string back.
const MAX_SHOWN: usize = 64;

/// `text` as a JSON string literal, as a person reads it in a message:
/// JSON's escapes for quotes, backslashes and control characters, and
/// `\uXXXX` for every other character that would not show as itself (line
/// and paragraph separators, bidirectional and zero-width controls,
/// combining marks), so that a quoted value is one visible line and looks
/// like what it is. Which characters those are is Rust's own judgement
/// (`char::escape_debug`); only the notation is JSON's, not Rust's
/// `\u{2028}`.
#[must_use]
pub fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            // A quote needs no escape in a JSON string.
            '\'' => out.push(c),
            c if c.escape_debug().nth(1).is_some() => {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn clip(value: &str) -> String {
    match value.char_indices().nth(MAX_SHOWN) {
        None => value.to_owned(),
        Some((end, _)) => format!("{}…", &value[..end]),
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(rename_all = "camelCase", expecting = "an object")]
    #[expect(dead_code, reason = "read only to fail")]
    struct Doc<'a> {
        #[serde(borrow)]
        uid: Cow<'a, str>,
        #[serde(default)]
        dry_run: Option<bool>,
        #[serde(default)]
        items: Vec<Item>,
        #[serde(default)]
        labels: std::collections::BTreeMap<String, String>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(expecting = "an object")]
    #[expect(dead_code, reason = "read only to fail")]
    struct Item {
        n: u8,
    }

    /// JSON's notation, never Rust's: what a JSON reader reads back as the
    /// text itself, with nothing invisible left unescaped.
    #[test]
    fn quotes_as_json_with_invisible_characters_escaped() {
        for (text, want) in [
            ("pypi.org", r#""pypi.org""#),
            ("a\u{2028}b.org", r#""a\u2028b.org""#),
            (
                "a\nb\tc\r\u{0}\u{1f}\u{7f}",
                r#""a\nb\tc\r\u0000\u001f\u007f""#,
            ),
            ("say \"hi\" \\ 'x'", r#""say \"hi\" \\ 'x'""#),
            ("\u{202e}gro.\u{200b}x", r#""\u202egro.\u200bx""#),
            ("pypí.org", r#""pypí.org""#),
            ("i\u{301}", r#""i\u0301""#),
            ("\u{e0001}", r#""\udb40\udc01""#),
        ] {
            let q = quoted(text);
            assert_eq!(q, want, "{text:?}");
            assert_eq!(serde_json::from_str::<String>(&q).unwrap(), text);
            assert!(!q.contains("\\u{"), "{q}");
        }
    }

    fn err(text: &str) -> String {
        from_str::<Doc<'_>>(text, "request")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn names_the_path_and_what_was_expected() {
        for (text, want) in [
            ("5", "request: expected an object, got the number 5"),
            ("[]", "request: expected an object, got an array"),
            ("{}", "request.uid: is required but missing"),
            (
                r#"{"uid":"a","uid":"b"}"#,
                "request.uid: is given more than once",
            ),
            (
                r#"{"uid":1}"#,
                "request.uid: expected a string, got the number 1",
            ),
            (
                r#"{"uid":"u","dryRun":"yes"}"#,
                r#"request.dryRun: expected a boolean, got the string "yes""#,
            ),
            (
                r#"{"uid":"u","items":[{"n":1},{"n":-1.5}]}"#,
                "request.items[1].n: expected a whole number, got the number -1.5",
            ),
            (
                r#"{"uid":"u","items":{}}"#,
                "request.items: expected an array, got an object",
            ),
            (
                r#"{"uid":"u","labels":{"a.b/c":null}}"#,
                r#"request.labels["a.b/c"]: expected a string, got null"#,
            ),
            (
                r#"{"uid":"u","dryRun":true"#,
                "request: EOF while parsing an object (line 1, column 24)",
            ),
            (
                r#"{"uid":"u"} x"#,
                "request: trailing characters (line 1, column 13)",
            ),
        ] {
            assert_eq!(err(text), want, "{text}");
        }
    }

    #[test]
    fn long_values_are_cut() {
        let long = format!(r#"{{"uid":"u","dryRun":"{}"}}"#, "x".repeat(10_000));
        let message = err(&long);
        assert!(message.len() < 200, "{message}");
        assert!(message.ends_with('…'), "{message}");
    }

    #[test]
    fn an_empty_root_is_the_document() {
        let e = from_str::<Doc<'_>>("true", "").unwrap_err();
        assert_eq!(e.path, "");
        assert_eq!(e.to_string(), "expected an object, got true");
    }

    /// Readers from other crates, and derived ones that do not say what
    /// they expect, name their Rust type; the answer says what JSON calls it.
    #[test]
    fn foreign_type_names_become_json_words() {
        #[derive(Debug, Deserialize)]
        #[expect(dead_code, reason = "read only to fail")]
        struct Unnamed {
            n: u8,
        }
        #[derive(Debug, Deserialize)]
        #[serde(tag = "op")]
        enum Tagged {
            Add,
        }
        let e = from_str::<Unnamed>("1", "x").unwrap_err().to_string();
        assert_eq!(e, "x: expected an object, got the number 1");
        let e = from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>(
            &serde_json::json!([]),
            "metadata",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "metadata: expected an object, got an array");
        let e = from_str::<Vec<Tagged>>("[5]", "patch")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "patch[0]: expected one of the allowed forms, got the number 5"
        );
    }
}
