//! What `inject -o` prints besides the mutated manifest: the JSON patch, or
//! a unified diff of the object before and after. Kept apart from the
//! reading of manifests, which only hands over the before and after.

use serde_json::Value;

use crate::mutate::Patch;

/// The `-o` of `inject`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum InjectOutput {
    /// The mutated manifest, in the input's format.
    #[default]
    Manifest,
    /// The JSON patch the webhook would send (`[]` when nothing changes).
    Patch,
    /// A unified diff of the manifest before and after the patch (of the
    /// whole stream, for several documents, a List or a workload).
    Diff,
}

/// The operations of `patch` as pretty JSON, one line at the end.
///
/// # Errors
/// A patch that is not a JSON patch (a bug in the core).
pub fn patch_text(patch: Option<&Patch>) -> Result<String, String> {
    let ops = match patch {
        Some(p) => p.operations().map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    serde_json::to_string_pretty(&ops)
        .map(|s| s + "\n")
        .map_err(|e| e.to_string())
}

/// A unified diff (3 lines of context) of `before` and `after` rendered
/// alike, with `name` in the headers; empty when nothing changed.
///
/// # Errors
/// An object that cannot be rendered in the chosen format.
pub fn diff_text(before: &Value, after: &Value, json: bool, name: &str) -> Result<String, String> {
    let render = |v: &Value| {
        if json {
            serde_json::to_string_pretty(v)
                .map(|s| s + "\n")
                .map_err(|e| e.to_string())
        } else {
            serde_yaml_ng::to_string(v).map_err(|e| e.to_string())
        }
    };
    Ok(text_diff(&render(before)?, &render(after)?, name))
}

/// A unified diff (3 lines of context) of two texts, with `name` in the
/// headers; empty when they are the same.
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
