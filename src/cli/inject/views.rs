//! What `inject -o` prints besides the manifests: the JSON patch, a unified
//! diff (coloured or not), and the conversions to YAML or JSON. Kept apart
//! from the reading of manifests, which only hands over before and after.

use std::fmt::Write as _;
use std::io::IsTerminal;

use serde_json::{Value, json};

/// The `-o` of `inject`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum InjectOutput {
    /// The manifests, each in its input's format.
    #[default]
    Manifest,
    /// Every object as YAML (JSON inputs converted).
    Yaml,
    /// Every object as JSON: the object itself, or a List of several.
    Json,
    /// The JSON patch of the one object of the input (a Pod: the patch the
    /// webhook would send; `[]` when nothing changes).
    Patch,
    /// A unified diff of each input file and what `-o manifest` writes for
    /// it (`patch -p1` applies it); exit 1 when there are changes.
    Diff,
}

/// The `--color` of `inject -o diff`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    /// When standard output is a terminal and `NO_COLOR` is not set.
    #[default]
    Auto,
    Always,
    Never,
}

impl Color {
    fn enabled(self) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
            }
        }
    }
}

/// Operations as pretty JSON, one line break at the end.
///
/// # Errors
/// Operations that cannot be encoded (a bug).
pub fn patch_text(ops: &json_patch::Patch) -> Result<String, String> {
    serde_json::to_string_pretty(ops)
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// A unified diff (3 lines of context) of two texts, with `name` in the
/// headers (`a/NAME`, `b/NAME`, for `patch -p1`); empty when they are the
/// same.
pub fn text_diff(old: &str, new: &str, name: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{name}"), &format!("b/{name}"))
        .to_string()
}

/// `diff` in colour when `color` says so: headers bold, hunk lines cyan,
/// removals red, additions green (as `git diff` and `kubectl diff` show
/// them).
pub fn colored(diff: &str, color: Color) -> String {
    if diff.is_empty() || !color.enabled() {
        return diff.to_owned();
    }
    let mut out = String::with_capacity(diff.len() + diff.len() / 4);
    for line in diff.split_inclusive('\n') {
        let (body, end) = line.strip_suffix('\n').map_or((line, ""), |b| (b, "\n"));
        let code = if body.starts_with("--- ") || body.starts_with("+++ ") {
            "1"
        } else if body.starts_with("@@") {
            "36"
        } else if body.starts_with('-') {
            "31"
        } else if body.starts_with('+') {
            "32"
        } else {
            out.push_str(line);
            continue;
        };
        let _ = write!(out, "\x1b[{code}m{body}\x1b[0m{end}");
    }
    out
}

/// The objects as one JSON document: the object itself, or a `List` of
/// several (the items of a `List` among them taken in), as `kubectl get -o
/// json` prints them.
///
/// # Errors
/// An object that cannot be encoded (a bug).
pub fn json_text(objects: Vec<Value>) -> Result<String, String> {
    let one = match <[Value; 1]>::try_from(objects) {
        Ok([one]) => one,
        Err(objects) => {
            let mut items = Vec::with_capacity(objects.len());
            for mut object in objects {
                match object.get_mut("items").map(Value::take) {
                    Some(Value::Array(inner)) if object["kind"] == "List" => items.extend(inner),
                    Some(other) => {
                        object["items"] = other;
                        items.push(object);
                    }
                    None => items.push(object),
                }
            }
            json!({"apiVersion": "v1", "kind": "List", "items": items})
        }
    };
    serde_json::to_string_pretty(&one)
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// A JSON patch that turns `before` into `after`: what changed, key by key
/// and item by item, an unchanged head and tail of a list left out.
///
/// # Errors
/// Operations that do not decode as a JSON patch (a bug).
pub fn json_diff(before: &Value, after: &Value) -> Result<json_patch::Patch, String> {
    let mut ops = Vec::new();
    diff_at(&mut String::new(), before, after, &mut ops);
    serde_json::from_value(Value::Array(ops)).map_err(|e| e.to_string())
}

fn diff_at(path: &mut String, a: &Value, b: &Value, ops: &mut Vec<Value>) {
    if a == b {
        return;
    }
    let len = path.len();
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().filter(|k| !b.contains_key(*k)) {
                push_segment(path, key);
                ops.push(json!({"op": "remove", "path": path.as_str()}));
                path.truncate(len);
            }
            for (key, value) in b {
                push_segment(path, key);
                match a.get(key) {
                    Some(old) => diff_at(path, old, value, ops),
                    None => ops.push(json!({"op": "add", "path": path.as_str(), "value": value})),
                }
                path.truncate(len);
            }
        }
        (Value::Array(a), Value::Array(b)) => diff_items(path, a, b, ops),
        _ => ops.push(json!({"op": "replace", "path": path.as_str(), "value": b})),
    }
}

/// The items of a list: those kept in order (the longest common
/// subsequence) stay, and between them, as many old items as new ones are
/// compared one by one, else the old ones are removed and the new added.
fn diff_items(path: &mut String, a: &[Value], b: &[Value], ops: &mut Vec<Value>) {
    let len = path.len();
    let kept = common_items(a, b);
    let (mut at, mut from_a, mut from_b) = (0, 0, 0);
    for &(i, j) in kept.iter().chain([&(a.len(), b.len())]) {
        let (old, new) = (&a[from_a..i], &b[from_b..j]);
        if old.len() == new.len() {
            for (x, y) in old.iter().zip(new) {
                push_segment(path, &at.to_string());
                diff_at(path, x, y, ops);
                path.truncate(len);
                at += 1;
            }
        } else {
            push_segment(path, &at.to_string());
            for _ in old {
                ops.push(json!({"op": "remove", "path": path.as_str()}));
            }
            path.truncate(len);
            for value in new {
                push_segment(path, &at.to_string());
                ops.push(json!({"op": "add", "path": path.as_str(), "value": value}));
                path.truncate(len);
                at += 1;
            }
        }
        at += 1;
        (from_a, from_b) = (i + 1, j + 1);
    }
}

/// The index pairs of the longest common subsequence of `a` and `b`. Lists
/// in manifests are short; past a million comparisons none are kept, and
/// the lists are then replaced item by item.
fn common_items(old: &[Value], new: &[Value]) -> Vec<(usize, usize)> {
    if old.len().saturating_mul(new.len()) > 1_000_000 {
        return Vec::new();
    }
    // lengths[i][j]: the LCS length of old[i..] and new[j..].
    let mut lengths = vec![vec![0u32; new.len() + 1]; old.len() + 1];
    for i in (0..old.len()).rev() {
        for j in (0..new.len()).rev() {
            lengths[i][j] = if old[i] == new[j] {
                lengths[i + 1][j + 1] + 1
            } else {
                lengths[i + 1][j].max(lengths[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < old.len() && j < new.len() {
        if old[i] == new[j] {
            pairs.push((i, j));
            (i, j) = (i + 1, j + 1);
        } else if lengths[i + 1][j] >= lengths[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

/// `/segment`, escaped as RFC 6901 asks (`~` as `~0`, `/` as `~1`).
fn push_segment(path: &mut String, segment: &str) {
    path.push('/');
    path.push_str(&segment.replace('~', "~0").replace('/', "~1"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_diff_applies_and_says_only_what_changed() {
        let before = json!({"metadata": {"a/b": "1", "gone": 1},
            "spec": {"initContainers": [{"name": "u"}], "containers": [{"name": "c", "env": []}], "x": 1}});
        let after = json!({"metadata": {"a/b": "2", "new": {"k": "v"}},
            "spec": {"initContainers": [{"name": "i"}, {"name": "u"}, {"name": "s"}],
                     "containers": [{"name": "c", "env": [{"name": "E"}]}], "x": [1]}});
        let patch = json_diff(&before, &after).unwrap();
        let mut patched = before.clone();
        json_patch::patch(&mut patched, &patch).unwrap();
        assert_eq!(patched, after);
        let text = serde_json::to_string(&patch).unwrap();
        assert!(text.contains(r#""path":"/metadata/a~1b""#), "{text}");
        assert!(
            text.contains(r#""path":"/spec/containers/0/env/0""#),
            "{text}"
        );
        assert!(!text.contains(r#""name":"u""#), "{text}");
        assert!(json_diff(&after, &after).unwrap().0.is_empty());
        // Items replaced in the middle of a list of another length.
        for (a, b) in [
            (json!([1, 2, 3, 9]), json!([1, 5, 6, 7, 9])),
            (json!([1, 2, 3]), json!([3, 2, 1])),
            (json!([]), json!([1])),
            (json!([1, 2]), json!([])),
        ] {
            let mut patched = a.clone();
            json_patch::patch(&mut patched, &json_diff(&a, &b).unwrap()).unwrap();
            assert_eq!(patched, b);
        }
    }

    #[test]
    fn colours_follow_the_line_kinds() {
        let diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n";
        assert_eq!(colored(diff, Color::Never), diff);
        assert_eq!(
            colored(diff, Color::Always),
            "\x1b[1m--- a/x\x1b[0m\n\x1b[1m+++ b/x\x1b[0m\n\x1b[36m@@ -1 +1 @@\x1b[0m\n\x1b[31m-old\x1b[0m\n\x1b[32m+new\x1b[0m\n same\n"
        );
    }
}
