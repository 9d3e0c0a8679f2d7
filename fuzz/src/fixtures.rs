//! The golden fixtures as `AdmissionReview` bodies: each `*.review.json` as
//! it is, each `*.pod.yaml` wrapped in a Pod CREATE, and each mutated pod
//! of an `*.expected.yaml` wrapped the same way (the webhook's own output,
//! which must be admitted again unchanged). The seed corpus is made from
//! these, and the replay times them all, including those too large to be
//! fuzzing seeds.

use std::path::Path;

use serde_json::Value;

/// `(name, body)` for every fixture in `dir`, in name order.
///
/// # Errors
///
/// A fixture that cannot be read or parsed, as a sentence naming its file.
pub fn reviews(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let read = || std::fs::read_to_string(&path).map_err(|e| format!("{name}: {e}"));
        let review = if let Some(stem) = name.strip_suffix(".review.json") {
            let review: Value =
                serde_json::from_str(&read()?).map_err(|e| format!("{name}: {e}"))?;
            Some((format!("fixture-{stem}"), review))
        } else if let Some(stem) = name.strip_suffix(".pod.yaml") {
            Some((
                format!("fixture-{stem}"),
                wrap(stem, &yaml(&read()?, name)?),
            ))
        } else if let Some(stem) = name.strip_suffix(".expected.yaml") {
            let expected = yaml(&read()?, name)?;
            (expected["outcome"] == "mutated").then(|| {
                (
                    format!("fixture-{stem}.injected"),
                    wrap(stem, &expected["pod"]),
                )
            })
        } else {
            None
        };
        out.extend(review.map(|(n, r)| (n, r.to_string().into_bytes())));
    }
    Ok(out)
}

fn yaml(text: &str, name: &str) -> Result<Value, String> {
    serde_yaml_ng::from_str(text).map_err(|e| format!("{name}: {e}"))
}

/// A Pod CREATE of a fixture pod, in the pod's namespace.
fn wrap(stem: &str, pod: &Value) -> Value {
    let namespace = pod["metadata"]["namespace"]
        .as_str()
        .unwrap_or("sandboxes")
        .to_owned();
    crate::pod_create(&format!("seed-{stem}"), Some(&namespace), pod)
}
