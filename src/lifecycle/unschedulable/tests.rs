//! Every branch of the four seed functions, and the stripped reading.

use serde_json::{Value, json};

use super::*;

/// kube-scheduler's real text for a pod whose nodeSelector no node matches.
const SCHEDULER_MESSAGE: &str = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
/// Its text for a capacity shortage.
const CAPACITY_MESSAGE: &str = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.";

/// `has_platform_constraints_in_pod_spec`.
fn has_platform_constraints_in_pod_spec(pod_spec: &Value) -> bool {
    analyze_platform_constraints_in_pod_spec(pod_spec).0
}

/// `analyze_platform_constraints_in_pod_spec`: (has platform constraints,
/// has other selector/affinity constraints).
fn analyze_platform_constraints_in_pod_spec(pod_spec: &Value) -> (bool, bool) {
    let Some(spec) = pod_spec.as_object() else {
        return (false, false);
    };
    analyze_fields(spec.get("nodeSelector"), spec.get("affinity"))
}

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

fn unsched(reason: &str, message: &str, platform: bool, other: bool) -> bool {
    is_platform_unschedulable(Some(&s(reason)), Some(&s(message)), platform, other)
}

#[test]
fn reason_spellings() {
    for yes in [
        "Unschedulable",
        "unschedulable",
        "FailedScheduling",
        "failedscheduling",
        "  FailedScheduling\n",
        "\u{1c}Unschedulable\u{1f}",
        "PodUnschedulable",
        "SchedulerUnschedulableXYZ",
    ] {
        assert!(is_unschedulable_reason(Some(&s(yes))), "{yes:?}");
    }
    for no in [
        "",
        "Failed Scheduling",
        "SchedulerError",
        "Pending",
        "Scheduled",
    ] {
        assert!(!is_unschedulable_reason(Some(&s(no))), "{no:?}");
    }
}

#[test]
fn non_string_reasons_are_no() {
    assert!(!is_unschedulable_reason(None));
    for v in [
        json!(null),
        json!(1),
        json!(true),
        json!(["Unschedulable"]),
        json!({"a": 1}),
    ] {
        assert!(!is_unschedulable_reason(Some(&v)), "{v}");
    }
}

#[test]
fn python_strip_includes_ascii_separators() {
    assert_eq!(py_strip("\u{1c}\u{1d} a \u{1e}\u{1f}\u{a0}"), "a");
    assert_eq!(py_strip("\t\n\u{b}\u{c}\r a\u{3000}"), "a");
    assert_eq!(py_strip("\u{1b}a"), "\u{1b}a");
}

/// `kubernetes.io/os` and `kubernetes.io/arch` in the nodeSelector are
/// platform constraints; any other key is another constraint.
/// contract: controller.platform-constraints
#[test]
fn node_selector_keys() {
    let a = analyze_platform_constraints_in_pod_spec;
    assert_eq!(a(&json!({})), (false, false));
    assert_eq!(
        a(&json!({"nodeSelector": {"kubernetes.io/os": "linux"}})),
        (true, false)
    );
    assert_eq!(
        a(&json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}})),
        (true, false)
    );
    assert_eq!(a(&json!({"nodeSelector": {"disk": "ssd"}})), (false, true));
    assert_eq!(
        a(&json!({"nodeSelector": {"kubernetes.io/arch": "arm64", "disk": "ssd"}})),
        (true, true)
    );
    // Not the seed's keys: the beta labels and prefixes are other constraints.
    assert_eq!(
        a(&json!({"nodeSelector": {"beta.kubernetes.io/arch": "x"}})),
        (false, true)
    );
    for bad in [
        json!(null),
        json!("kubernetes.io/os"),
        json!(["kubernetes.io/os"]),
    ] {
        assert_eq!(a(&json!({"nodeSelector": bad})), (false, false));
    }
}

fn affinity_terms(terms: &Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

/// The same keys in an expression of any required node-affinity term;
/// an empty key is none.
/// contract: controller.platform-constraints
#[test]
fn affinity_keys() {
    let a = analyze_platform_constraints_in_pod_spec;
    let e = |key: Value| json!({"key": key, "operator": "In", "values": ["x"]});
    assert_eq!(
        a(&affinity_terms(
            &json!([{"matchExpressions": [e(json!("kubernetes.io/os"))]}])
        )),
        (true, false)
    );
    assert_eq!(
        a(&affinity_terms(
            &json!([{"matchExpressions": [e(json!("kubernetes.io/arch"))]}])
        )),
        (true, false)
    );
    assert_eq!(
        a(&affinity_terms(
            &json!([{"matchExpressions": [e(json!("zone"))]}])
        )),
        (false, true)
    );
    // Terms are all read: a key in a later term counts.
    assert_eq!(
        a(&affinity_terms(&json!([
            {"matchExpressions": [e(json!("zone"))]},
            {"matchExpressions": [e(json!("kubernetes.io/arch"))]}
        ]))),
        (true, true)
    );
    // An empty or non-string key is no constraint.
    for key in [
        json!(""),
        json!(null),
        json!(1),
        json!(["kubernetes.io/os"]),
    ] {
        assert_eq!(
            a(&affinity_terms(
                &json!([{"matchExpressions": [e(key.clone())]}])
            )),
            (false, false),
            "{key}"
        );
    }
    // matchFields are not read by the seed.
    assert_eq!(
        a(&affinity_terms(
            &json!([{"matchFields": [e(json!("metadata.name"))]}])
        )),
        (false, false)
    );
    // Selector and affinity add up.
    let mut both = affinity_terms(&json!([{"matchExpressions": [e(json!("zone"))]}]));
    both["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
    assert_eq!(a(&both), (true, true));
}

#[test]
fn odd_shapes_add_nothing() {
    let a = analyze_platform_constraints_in_pod_spec;
    let sel = json!({"kubernetes.io/os": "linux"});
    for spec in [
        json!({"nodeSelector": sel, "affinity": null}),
        json!({"nodeSelector": sel, "affinity": "x"}),
        json!({"nodeSelector": sel, "affinity": {"nodeAffinity": null}}),
        json!({"nodeSelector": sel, "affinity": {"nodeAffinity": []}}),
        json!({"nodeSelector": sel, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": 3}}}),
        json!({"nodeSelector": sel, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": {"key": "zone"}}}}}),
        json!({"nodeSelector": sel, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": ["zone", 1, null]}}}}),
        json!({"nodeSelector": sel, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": {"key": "zone"}}]}}}}),
        json!({"nodeSelector": sel, "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": ["zone", null]}]}}}}),
        json!({"nodeSelector": sel, "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [{"key": "zone"}]}}]}}}),
    ] {
        assert_eq!(a(&spec), (true, false), "{spec}");
    }
    // A spec that is not a dict has no constraints at all.
    for spec in [json!(null), json!([]), json!("spec"), json!(1)] {
        assert_eq!(a(&spec), (false, false));
        assert!(!has_platform_constraints_in_pod_spec(&spec));
    }
}

#[test]
fn has_platform_is_the_first_half() {
    assert!(has_platform_constraints_in_pod_spec(
        &json!({"nodeSelector": {"kubernetes.io/os": "linux", "disk": "ssd"}})
    ));
    assert!(!has_platform_constraints_in_pod_spec(
        &json!({"nodeSelector": {"disk": "ssd"}})
    ));
    assert!(has_platform_constraints_in_pod_spec(&affinity_terms(
        &json!([{"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "NotIn", "values": ["arm64"]}]}])
    )));
}

#[test]
fn order_of_checks() {
    let generic = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.";
    // 1. no platform constraint: never, whatever the text.
    assert!(!unsched(
        "Unschedulable",
        "kubernetes.io/os mismatch",
        false,
        false
    ));
    // 2. the reason must be an unschedulable one.
    assert!(!unsched(
        "SchedulerError",
        "kubernetes.io/os mismatch",
        true,
        false
    ));
    // 3. the message must be a string.
    for m in [
        json!(null),
        json!(1),
        json!(["kubernetes.io/os"]),
        json!({"m": "kubernetes.io/os"}),
    ] {
        assert!(
            !is_platform_unschedulable(Some(&s("Unschedulable")), Some(&m), true, false),
            "{m}"
        );
    }
    assert!(!is_platform_unschedulable(
        Some(&s("Unschedulable")),
        None,
        true,
        false
    ));
    // 4. capacity phrases win over platform keys.
    assert!(!unsched(
        "Unschedulable",
        "1 Insufficient cpu, 1 node(s) didn't match kubernetes.io/os",
        true,
        false
    ));
    // 5. a platform key in the text is enough, other constraints or not.
    assert!(unsched(
        "FailedScheduling",
        "node(s) had label kubernetes.io/os=windows",
        true,
        true
    ));
    assert!(unsched(
        "Unschedulable",
        "wrong KUBERNETES.IO/ARCH",
        true,
        true
    ));
    // 6. the generic wording counts only without other constraints.
    assert!(unsched("Unschedulable", generic, true, false));
    assert!(!unsched("Unschedulable", generic, true, true));
    // 7. anything else is not about the platform.
    assert!(!unsched(
        "Unschedulable",
        "0/1 nodes are available: 1 node(s) had untolerated taint",
        true,
        false
    ));
    assert!(!unsched("Unschedulable", "", true, false));
}

#[test]
fn each_transient_phrase() {
    for phrase in TRANSIENT_CAPACITY_INDICATORS {
        let shouted = phrase.to_uppercase();
        let message = format!("0/2 nodes are available: 2 {shouted}. kubernetes.io/os");
        assert!(
            !unsched("Unschedulable", &message, true, false),
            "{message}"
        );
    }
}

#[test]
fn each_affinity_wording() {
    for pattern in STANDARD_PATTERNS {
        let shouted = pattern.to_uppercase();
        let message = format!("0/2 nodes are available: 2 node(s) {shouted}/selector.");
        assert!(unsched("Unschedulable", &message, true, false), "{message}");
        assert!(!unsched("Unschedulable", &message, true, true), "{message}");
    }
}

#[test]
fn seed_never_fires_on_the_real_scheduler_message() {
    assert!(!unsched("Unschedulable", SCHEDULER_MESSAGE, true, false));
}

#[test]
fn stripped_reading_fires_on_it() {
    assert_eq!(
        without_preemption_postscript(SCHEDULER_MESSAGE),
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    );
    let r = s("Unschedulable");
    // (status message, platform constraints, other constraints, fires)
    let cases = [
        (Some(s(SCHEDULER_MESSAGE)), true, false, true),
        // The other rules still apply to the stripped text.
        (Some(s(SCHEDULER_MESSAGE)), true, true, false),
        (Some(s(SCHEDULER_MESSAGE)), false, false, false),
        (Some(s(CAPACITY_MESSAGE)), true, false, false),
        (Some(json!(7)), true, false, false),
        (None, true, false, false),
    ];
    for (message, platform, other, fires) in cases {
        assert_eq!(
            is_platform_unschedulable_stripped(Some(&r), message.as_ref(), platform, other),
            fires,
            "{message:?}, platform constraints {platform}, other constraints {other}"
        );
    }
}

#[test]
fn postscript_removal() {
    assert_eq!(without_preemption_postscript("a. Preemption: 0/1"), "a.");
    assert_eq!(
        without_preemption_postscript("a. PREEMPTION: x preemption: y"),
        "a."
    );
    assert_eq!(
        without_preemption_postscript("  no postscript  "),
        "no postscript"
    );
    assert_eq!(without_preemption_postscript("preemption: only"), "");
    assert_eq!(
        without_preemption_postscript("é ünïcode preemption: x"),
        "é ünïcode"
    );
    // "preemption is not helpful" without the colon is not the postscript.
    assert_eq!(
        without_preemption_postscript("x, preemption is not helpful"),
        "x, preemption is not helpful"
    );
}
