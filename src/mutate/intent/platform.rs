//! The requested platform becomes a nodeSelector (contract: platform.merge).
//!
//! A port of the `OpenSandbox` seed's `apply_platform_node_selector`,
//! `ensure_platform_compatible_with_affinity` and
//! `node_selector_term_satisfiable`, with the pod's own spec as the template.
//! The seed works on untyped dicts and tolerates any shape; these functions
//! mirror its decisions and messages exactly, including its quirks (an
//! all-non-object term list is unsatisfiable; `Exists`, `Gt` and `Lt` never
//! rule a term out; non-list `values` count as empty). The affinity is read
//! from its JSON text by `affinity::allows`.

use serde_json::value::RawValue;
use thiserror::Error;

use smallvec::{SmallVec, smallvec};

use crate::mutate::quote::clip;
use crate::mutate::read::affinity;
use crate::mutate::read::pod::NodeSelector;

pub(crate) const OS_KEY: &str = "kubernetes.io/os";
pub(crate) const ARCH_KEY: &str = "kubernetes.io/arch";

const SUPPORTED_OS: [&str; 2] = ["linux", "windows"];
const SUPPORTED_ARCH: [&str; 2] = ["amd64", "arm64"];

/// Why a platform annotation cannot be honoured. Every message but `Shape`'s
/// is the seed's, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PlatformError {
    /// Not of the `<os>/<arch>` form at all; the end of a sentence that
    /// starts with the annotation key.
    #[error("is '{}'; use <os>/<arch> such as linux/amd64", clip(.0))]
    Shape(String),
    #[error(
        "Unsupported platform.{field} '{}'. Supported values: [{}].",
        clip(.value),
        quoted_list(.supported)
    )]
    Unsupported {
        field: &'static str,
        value: String,
        supported: &'static [&'static str],
    },
    #[error(
        "platform conflict with template nodeSelector: '{key}' is '{}', request expects '{expected}'.",
        clip(.existing)
    )]
    SelectorConflict {
        key: &'static str,
        existing: String,
        expected: &'static str,
    },
    #[error(
        "platform conflict with template nodeAffinity: required node affinity does not allow requested {requested}."
    )]
    AffinityConflict { requested: String },
}

/// Python's `str()` of a list of strings: `['linux', 'windows']`.
fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    Linux,
    Windows,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: Os,
    pub os_name: &'static str,
    pub arch: &'static str,
}

impl Platform {
    /// `<os>/<arch>`, trimmed and lower-cased; os is checked before arch.
    pub fn parse(value: &str) -> Result<Platform, PlatformError> {
        // Compared without case, so that a valid value is read without
        // allocating; a refused part is named lower-cased.
        let mut parts = value.trim().split('/');
        let (Some(os), Some(arch), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(PlatformError::Shape(value.to_owned()));
        };
        let (os, arch) = (os.trim(), arch.trim());
        let unsupported = |field, value: &str, supported| PlatformError::Unsupported {
            field,
            value: value.to_ascii_lowercase(),
            supported,
        };
        let os_name = SUPPORTED_OS
            .iter()
            .find(|s| s.eq_ignore_ascii_case(os))
            .ok_or_else(|| unsupported("os", os, &SUPPORTED_OS))?;
        let arch = SUPPORTED_ARCH
            .iter()
            .find(|s| s.eq_ignore_ascii_case(arch))
            .ok_or_else(|| unsupported("arch", arch, &SUPPORTED_ARCH))?;
        Ok(Platform {
            os: if *os_name == "windows" {
                Os::Windows
            } else {
                Os::Linux
            },
            os_name,
            arch,
        })
    }

    /// The node labels this platform pins, in the order they are checked.
    /// Windows pods pin only the architecture (contract: platform.windows).
    pub fn requested(&self) -> Pins {
        match self.os {
            Os::Linux => smallvec![(OS_KEY, self.os_name), (ARCH_KEY, self.arch)],
            Os::Windows => smallvec![(ARCH_KEY, self.arch)],
        }
    }

    fn describe(&self) -> String {
        match self.os {
            Os::Linux => format!("platform '{}/{}'", self.os_name, self.arch),
            Os::Windows => format!("architecture '{}'", self.arch),
        }
    }
}

/// Node labels a platform pins, `(key, value)`: one or two, on the stack.
pub type Pins = SmallVec<[(&'static str, &'static str); 2]>;

/// What has to change in `spec.nodeSelector`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorChange {
    /// The selector is missing or not an object: set it to these entries.
    Create(Pins),
    /// Add (or overwrite a null) entry for each of these keys.
    Set(Pins),
}

/// `apply_platform_node_selector`: conflicts with the pod's own nodeSelector,
/// then with its required node affinity, then the merge.
/// `None` when the selector already pins the platform.
pub fn plan_node_selector(
    node_selector: Option<&NodeSelector<'_>>,
    affinity: Option<&RawValue>,
    platform: &Platform,
) -> Result<Option<SelectorChange>, PlatformError> {
    let requested = platform.requested();
    // Not an object means "no selector", as in the seed.
    let selector = node_selector.filter(|s| matches!(s, NodeSelector::Map(_)));
    if let Some(selector) = selector {
        for &(key, value) in &requested {
            if let Some(existing) = selector.get(key)
                && existing != value
            {
                return Err(PlatformError::SelectorConflict {
                    key,
                    existing: existing.to_owned(),
                    expected: value,
                });
            }
        }
    }
    ensure_compatible_with_affinity(affinity, &requested, platform)?;
    Ok(match selector {
        None => Some(SelectorChange::Create(requested)),
        Some(selector) => {
            let missing: Pins = requested
                .into_iter()
                .filter(|(k, _)| selector.get(k).is_none())
                .collect();
            (!missing.is_empty()).then_some(SelectorChange::Set(missing))
        }
    })
}

/// `ensure_platform_compatible_with_affinity`: required node affinity terms
/// are OR-ed; at least one object term must be satisfiable.
fn ensure_compatible_with_affinity(
    affinity: Option<&RawValue>,
    requested: &[(&'static str, &'static str)],
    platform: &Platform,
) -> Result<(), PlatformError> {
    match affinity {
        Some(raw) if !affinity::allows(raw.get(), requested) => {
            // Described only here: the words are built for the denial alone.
            Err(PlatformError::AffinityConflict {
                requested: platform.describe(),
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use smallvec::smallvec;

    fn linux(arch: &'static str) -> Platform {
        Platform {
            os: Os::Linux,
            os_name: "linux",
            arch,
        }
    }

    fn windows(arch: &'static str) -> Platform {
        Platform {
            os: Os::Windows,
            os_name: "windows",
            arch,
        }
    }

    fn affinity(terms: &Value) -> Box<RawValue> {
        text(
            &json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}),
        )
    }

    fn text(v: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(v).unwrap()
    }

    fn expr(key: &str, op: &str, values: &Value) -> Value {
        json!({"key": key, "operator": op, "values": values})
    }

    fn raw(v: &Value) -> NodeSelector<'static> {
        serde_json::from_str(Box::leak(v.to_string().into_boxed_str())).unwrap()
    }

    /// Why `selector` refuses a linux/amd64 request.
    fn selector_conflict(selector: &Value) -> String {
        plan_node_selector(Some(&raw(selector)), None, &linux("amd64"))
            .unwrap_err()
            .to_string()
    }

    fn sat(terms: &Value, p: &Platform) -> bool {
        plan_node_selector(None, Some(&*affinity(terms)), p).is_ok()
    }

    const AFF_LINUX: &str = "platform conflict with template nodeAffinity: required node affinity does not allow requested platform 'linux/amd64'.";

    #[test]
    fn parse_normalizes_and_orders_checks() {
        assert_eq!(Platform::parse(" Linux/AMD64 ").unwrap(), linux("amd64"));
        assert_eq!(Platform::parse("windows/arm64").unwrap(), windows("arm64"));
        assert_eq!(
            Platform::parse("darwin/x86").unwrap_err().to_string(),
            "Unsupported platform.os 'darwin'. Supported values: ['linux', 'windows']."
        );
        assert_eq!(
            Platform::parse("linux/386").unwrap_err().to_string(),
            "Unsupported platform.arch '386'. Supported values: ['amd64', 'arm64']."
        );
        assert_eq!(
            Platform::parse("linux").unwrap_err(),
            PlatformError::Shape("linux".into())
        );
        assert!(matches!(
            Platform::parse("linux/amd64/v8"),
            Err(PlatformError::Shape(_))
        ));
    }

    #[test]
    fn selector_conflict_checks_os_before_arch() {
        let sel = json!({"kubernetes.io/os": "windows", "kubernetes.io/arch": "arm64"});
        assert_eq!(
            selector_conflict(&sel),
            "platform conflict with template nodeSelector: 'kubernetes.io/os' is 'windows', request expects 'linux'."
        );
        let sel = json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"});
        assert_eq!(
            selector_conflict(&sel),
            "platform conflict with template nodeSelector: 'kubernetes.io/arch' is 'arm64', request expects 'amd64'."
        );
    }

    #[test]
    fn selector_values_must_be_strings() {
        let sel = json!({ "kubernetes.io/os": "it's" });
        assert_eq!(
            selector_conflict(&sel),
            "platform conflict with template nodeSelector: 'kubernetes.io/os' is 'it's', request expects 'linux'."
        );
        for (value, shown) in [
            (json!(1), "the number 1"),
            (json!(1.5), "the number 1.5"),
            (json!(true), "true"),
            (json!(["a", 1]), "an array"),
            (json!({"k": null}), "an object"),
        ] {
            let text = json!({ "disk": "ssd", "kubernetes.io/os": value }).to_string();
            let err = crate::json::error::from_str::<NodeSelector<'_>>(&text, "spec.nodeSelector")
                .unwrap_err()
                .to_string();
            assert_eq!(
                err,
                format!(
                    "spec.nodeSelector[\"kubernetes.io/os\"]: expected a string (quote the value), got {shown}"
                ),
            );
        }
    }

    #[test]
    fn selector_merge_keeps_other_keys() {
        let sel = json!({"disk": "ssd", "kubernetes.io/os": "linux", "kubernetes.io/arch": null});
        assert_eq!(
            plan_node_selector(Some(&raw(&sel)), None, &linux("arm64")).unwrap(),
            Some(SelectorChange::Set(smallvec![(ARCH_KEY, "arm64")]))
        );
        let full = json!({"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"});
        assert_eq!(
            plan_node_selector(Some(&raw(&full)), None, &linux("arm64")).unwrap(),
            None
        );
        // Not an object: treated as empty, then replaced (seed's setdefault branch).
        assert_eq!(
            plan_node_selector(Some(&raw(&json!("x"))), None, &linux("amd64")).unwrap(),
            Some(SelectorChange::Create(smallvec![
                (OS_KEY, "linux"),
                (ARCH_KEY, "amd64")
            ]))
        );
    }

    #[test]
    fn windows_checks_and_sets_arch_only() {
        let sel = json!({"kubernetes.io/os": "linux"});
        assert_eq!(
            plan_node_selector(Some(&raw(&sel)), None, &windows("amd64")).unwrap(),
            Some(SelectorChange::Set(smallvec![(ARCH_KEY, "amd64")]))
        );
        let aff =
            affinity(&json!([{"matchExpressions": [expr(ARCH_KEY, "In", &json!(["arm64"]))]}]));
        assert_eq!(
            plan_node_selector(None, Some(&*aff), &windows("amd64"))
                .unwrap_err()
                .to_string(),
            "platform conflict with template nodeAffinity: required node affinity does not allow requested architecture 'amd64'."
        );
        // The os key is not requested for Windows, so an os expression is ignored.
        let aff = affinity(&json!([{"matchExpressions": [expr(OS_KEY, "In", &json!(["linux"]))]}]));
        assert!(plan_node_selector(None, Some(&*aff), &windows("amd64")).is_ok());
    }

    #[test]
    fn operators() {
        let p = linux("amd64");
        let one = |e: Value| json!([{"matchExpressions": [e]}]);
        assert!(sat(&one(expr(OS_KEY, "In", &json!(["linux"]))), &p));
        assert!(!sat(&one(expr(OS_KEY, "In", &json!(["windows"]))), &p));
        assert!(sat(&one(expr(ARCH_KEY, "NotIn", &json!(["arm64"]))), &p));
        assert!(!sat(&one(expr(ARCH_KEY, "NotIn", &json!(["amd64"]))), &p));
        assert!(!sat(&one(expr(OS_KEY, "DoesNotExist", &json!([]))), &p));
        assert!(sat(&one(expr(OS_KEY, "Exists", &json!([]))), &p));
        assert!(sat(&one(expr(ARCH_KEY, "Gt", &json!(["1"]))), &p));
        assert!(sat(&one(expr(ARCH_KEY, "Lt", &json!(["1"]))), &p));
        assert!(
            sat(&one(expr(OS_KEY, "in", &json!(["windows"]))), &p),
            "operators are case-sensitive"
        );
        // `values` not a list counts as empty: In fails, NotIn passes.
        assert!(!sat(&one(expr(OS_KEY, "In", &json!("linux"))), &p));
        assert!(sat(&one(expr(OS_KEY, "NotIn", &json!("linux"))), &p));
        assert!(!sat(&one(json!({"key": OS_KEY, "operator": "In"})), &p));
    }

    #[test]
    fn expressions_are_anded_terms_ored() {
        let p = linux("amd64");
        let and_fail = json!([{"matchExpressions": [
            expr(OS_KEY, "In", &json!(["linux"])),
            expr(ARCH_KEY, "In", &json!(["arm64"]))
        ]}]);
        assert_eq!(
            plan_node_selector(None, Some(&*affinity(&and_fail.clone())), &p)
                .unwrap_err()
                .to_string(),
            AFF_LINUX
        );
        let mut or_ok = and_fail.as_array().unwrap().clone();
        or_ok.push(json!({"matchExpressions": [expr(ARCH_KEY, "In", &json!(["amd64"]))]}));
        assert!(sat(&Value::Array(or_ok), &p));
    }

    #[test]
    fn empty_and_missing_shapes() {
        let p = linux("amd64");
        assert!(sat(&json!([{}]), &p), "an empty term is satisfiable");
        assert!(sat(&json!([{"matchExpressions": []}]), &p));
        assert!(sat(&json!([{"matchExpressions": "x"}]), &p));
        assert!(sat(&json!([]), &p), "an empty term list is fine");
        assert!(plan_node_selector(None, Some(&*text(&json!({}))), &p).is_ok());
        assert!(plan_node_selector(None, Some(&*text(&json!({"nodeAffinity": null}))), &p).is_ok());
        assert!(plan_node_selector(None, Some(&*text(&json!("x"))), &p).is_ok());
        let no_terms =
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}});
        assert!(plan_node_selector(None, Some(&*text(&no_terms)), &p).is_ok());
        assert!(sat(&json!("not a list"), &p));
        // Only non-object terms: nothing to satisfy, so the seed refuses.
        assert_eq!(
            plan_node_selector(None, Some(&*affinity(&json!(["x", 1]))), &p)
                .unwrap_err()
                .to_string(),
            AFF_LINUX
        );
        // Non-object expressions and non-string keys are skipped.
        assert!(sat(
            &json!([{"matchExpressions": ["x", {"key": 1, "operator": "DoesNotExist"}]}]),
            &p
        ));
    }

    #[test]
    fn other_keys_are_ignored() {
        let p = linux("amd64");
        assert!(sat(
            &json!([{"matchExpressions": [expr("disk", "In", &json!(["ssd"])), expr("zone", "DoesNotExist", &json!([]))]}]),
            &p
        ));
        assert!(sat(
            &json!([{"matchExpressions": [expr("kubernetes.io/hostname", "In", &json!([]))]}]),
            &p
        ));
    }

    #[test]
    fn selector_checked_before_affinity() {
        let sel = json!({"kubernetes.io/arch": "arm64"});
        let aff =
            affinity(&json!([{"matchExpressions": [expr(OS_KEY, "DoesNotExist", &json!([]))]}]));
        assert!(
            plan_node_selector(Some(&raw(&sel)), Some(&*aff), &linux("amd64"))
                .unwrap_err()
                .to_string()
                .contains("nodeSelector")
        );
    }
}
