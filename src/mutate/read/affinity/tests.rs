//! Examples of each rule, and the streaming read against the `Value`
//! reading it replaced, on generated affinities.

use super::*;

const LINUX_AMD64: [(&str, &str); 2] = [
    ("kubernetes.io/os", "linux"),
    ("kubernetes.io/arch", "amd64"),
];

fn allows_linux(affinity: &str) -> bool {
    allows(affinity, &LINUX_AMD64)
}

fn terms(terms: &str) -> String {
    format!(
        r#"{{"nodeAffinity":{{"requiredDuringSchedulingIgnoredDuringExecution":{{"nodeSelectorTerms":{terms}}}}}}}"#
    )
}

/// The seed reads a decoded object, where a repeated key means its last
/// value, and escapes are decoded.
#[test]
fn last_key_wins_and_escapes_are_read() {
    let refuse = r#"[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["windows"]}]}]"#;
    let accept =
        r#"[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["linux"]}]}]"#;
    assert!(!allows_linux(&terms(refuse)));
    assert!(allows_linux(&terms(accept)));
    let twice = format!(
        r#"{{"nodeAffinity":{{"requiredDuringSchedulingIgnoredDuringExecution":{{"nodeSelectorTerms":{refuse},"nodeSelectorTerms":{accept}}}}}}}"#
    );
    assert!(allows_linux(&twice));
    let twice = r#"[{"matchExpressions":[{"key":"kubernetes.io/os","operator":"In","values":["linux"],"operator":"NotIn"}]}]"#;
    assert!(!allows_linux(&terms(twice)));
    let escaped = r#"[{"matchExpressions":[{"values":["li\u006eux"],"key":"kubernetes.io\/os","operator":"I\u006e"}]}]"#;
    assert!(allows_linux(&terms(escaped)));
    let escaped = r#"[{"matchExpressions":[{"values":["linu\u0078x"],"key":"kubernetes.io\/os","operator":"In"}]}]"#;
    assert!(!allows_linux(&terms(escaped)));
}

/// Values before the key, other fields, and values of every type.
#[test]
fn any_order_and_any_shape() {
    let t = r#"[{"x":[1,{"a":null}],"matchExpressions":[7,null,"s",{"values":[1,null,["linux"],"amd64"],"operator":"In","key":"kubernetes.io/arch","extra":{}}]}]"#;
    assert!(allows_linux(&terms(t)));
    let t = r#"[{"matchExpressions":[{"values":{"linux":1},"operator":"In","key":"kubernetes.io/os"}]}]"#;
    assert!(!allows_linux(&terms(t)));
    for shape in ["null", "1", "true", "\"x\"", "[]", "{}", "[1,[2]]"] {
        assert!(allows_linux(shape), "{shape}");
        let nested = format!(r#"{{"nodeAffinity":{shape}}}"#);
        assert!(allows_linux(&nested), "{nested}");
        assert!(allows_linux(&terms(shape)) || shape == "[1,[2]]", "{shape}");
    }
    // Only non-object terms: nothing can be satisfied.
    assert!(!allows_linux(&terms("[1,[2]]")));
    // A number beyond f64 where a value is read: counted as no affinity.
    let huge = r#"[{"matchExpressions":[{"key":1e400,"operator":"DoesNotExist"}]}]"#;
    assert!(allows_linux(&terms(huge)));
}

/// The reading this replaces, kept as the oracle: the affinity parsed
/// into a `Value` (refused text: no affinity), then walked as the seed
/// walks its dicts.
fn allows_as_a_value(affinity: &str, requested: Requested<'_>) -> bool {
    use serde_json::Value;
    let Ok(affinity) = serde_json::from_str::<Value>(affinity) else {
        return true;
    };
    let terms = [
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
    ]
    .iter()
    .try_fold(&affinity, |v, step| v.as_object()?.get(*step))
    .and_then(Value::as_object)
    .and_then(|r| r.get("nodeSelectorTerms"))
    .and_then(Value::as_array);
    let Some(terms) = terms.filter(|t| !t.is_empty()) else {
        return true;
    };
    terms.iter().filter_map(Value::as_object).any(|term| {
        let Some(exprs) = term.get("matchExpressions").and_then(Value::as_array) else {
            return true;
        };
        exprs.iter().filter_map(Value::as_object).all(|expr| {
            let key = expr.get("key").and_then(Value::as_str);
            let Some((_, value)) = requested.iter().find(|(k, _)| Some(*k) == key) else {
                return true;
            };
            let values = expr.get("values").and_then(Value::as_array);
            let listed = values.is_some_and(|v| v.iter().any(|v| v.as_str() == Some(value)));
            match expr.get("operator").and_then(Value::as_str) {
                Some("In") => listed,
                Some("NotIn") => !listed,
                Some("DoesNotExist") => false,
                _ => true,
            }
        })
    })
}

/// JSON text shaped like an affinity at each level (`keys` is the path
/// still to go; `[]` a list, `expr` an expression), or some other value
/// in its place; the key of a level may come again before or after it,
/// and leaves include text a `Value` refuses.
fn arb_json(keys: &'static [&'static str]) -> proptest::strategy::BoxedStrategy<String> {
    use proptest::prelude::*;
    use proptest::sample::select;
    let leaf = || {
        select(vec![
            "null",
            "true",
            "7",
            "1e400",
            "\"\\ud800\"",
            "\"x\"",
            "[]",
            "{}",
            "\"linux\"",
        ])
        .prop_map(str::to_owned)
    };
    let list = |item: BoxedStrategy<String>| {
        proptest::collection::vec(item, 0..4).prop_map(|items| format!("[{}]", items.join(",")))
    };
    let Some((step, rest)) = keys.split_first() else {
        return leaf().boxed();
    };
    let inner = match *step {
        "expr" => {
            let text = |options: Vec<&'static str>| prop_oneof![4 => select(options).prop_map(|t| format!("\"{t}\"")), 1 => leaf()];
            let entry = prop_oneof![
                text(vec![
                    "kubernetes.io/os",
                    "kubernetes.io/arch",
                    "kubernetes.io\\/os"
                ])
                .prop_map(|v| ("key", v)),
                text(vec!["In", "NotIn", "DoesNotExist", "Exists", "I\\u006e"])
                    .prop_map(|v| ("operator", v)),
                list(text(vec!["linux", "amd64", "arm64", "li\\u006eux"]).boxed())
                    .prop_map(|v| ("values", v)),
                leaf().prop_map(|v| ("x", v)),
            ];
            proptest::collection::vec(entry, 0..5)
                .prop_map(|e| object(&e))
                .boxed()
        }
        "[]" => list(arb_json(rest)).boxed(),
        step => {
            let other = proptest::option::of((select(vec![step, "x"]), arb_json(rest)));
            (other.clone(), arb_json(rest), other)
                .prop_map(move |(before, value, after)| {
                    let entries: Vec<_> = before
                        .into_iter()
                        .chain([(step, value)])
                        .chain(after)
                        .collect();
                    object(&entries)
                })
                .boxed()
        }
    };
    prop_oneof![9 => inner, 1 => leaf()].boxed()
}

fn object(entries: &[(&str, String)]) -> String {
    let entries: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("\"{k}\":{v}"))
        .collect();
    format!("{{{}}}", entries.join(","))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
    /// The streaming read agrees with the `Value` read on every shape.
    #[test]
    fn agrees_with_the_value_reading(affinity in arb_json(&[
        "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms", "[]", "matchExpressions", "[]", "expr",
    ])) {
        for requested in [&LINUX_AMD64[..], &LINUX_AMD64[1..]] {
            proptest::prop_assert_eq!(
                allows(&affinity, requested),
                allows_as_a_value(&affinity, requested),
                "{}", affinity
            );
        }
    }
}
