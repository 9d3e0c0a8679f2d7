//! The `<prefix>/network-policy` annotation (SPEC 4.1): parsed strictly and
//! passed to the sidecar in a normalized, compact form.
//!
//! The annotation is read in one pass into a borrowed document that accepts
//! any JSON (`PolicyDoc`), and its shape is checked afterwards. That keeps
//! the seed's order of complaints (a syntax error anywhere wins over a shape
//! error) without building a `serde_json::Value` per rule, which was most of
//! the cost of a 1,000-rule policy.

use std::borrow::Cow;
use std::fmt;

use serde::Serialize;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::pod::Text;

/// A policy as the egress sidecar reads it from `OPENSANDBOX_EGRESS_RULES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// Compact JSON, keys in the order `defaultAction`, `egress`.
    pub json: String,
    /// No rules and no default action: the sidecar denies everything.
    pub deny_all_by_omission: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PolicyOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    default_action: Option<&'static str>,
    egress: Vec<RuleOut<'a>>,
}

#[derive(Serialize)]
struct RuleOut<'a> {
    action: &'static str,
    target: &'a str,
}

/// Parses and normalizes a policy; the error is the end of a sentence that
/// starts with the annotation key.
pub fn parse(raw: &str, max_rules: usize) -> Result<NetworkPolicy, String> {
    let doc: Node<PolicyDoc<'_>> =
        serde_json::from_str(raw).map_err(|e| format!("is not valid JSON: {e}"))?;
    let Node::Object(policy) = doc else {
        return Err(
            "is not a JSON object such as {\"defaultAction\": \"deny\", \"egress\": []}".to_owned(),
        );
    };
    if let Some(unknown) = policy.unknown {
        return Err(format!(
            "has unknown field `{unknown}`; only defaultAction and egress are allowed"
        ));
    }
    let default_action = match policy.default_action {
        None | Some(Scalar::Null) => None,
        Some(Scalar::Str(a)) => Some(
            action(&a)
                .ok_or_else(|| format!("has defaultAction '{a}'; use \"allow\" or \"deny\""))?,
        ),
        Some(Scalar::Other) => {
            return Err(
                "has a defaultAction that is not a string; use \"allow\" or \"deny\"".to_owned(),
            );
        }
    };
    let rules: &[Node<RuleDoc<'_>>] = match &policy.egress {
        None | Some(Rules::Null) => &[],
        Some(Rules::List(rules)) => rules,
        Some(Rules::Other) => {
            return Err("has an egress field that is not a list of rules".to_owned());
        }
    };
    if rules.len() > max_rules {
        return Err(format!(
            "has {} egress rules, more than the allowed {max_rules}; merge rules or use wildcards and CIDRs",
            rules.len()
        ));
    }
    let mut egress = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        egress.push(check_rule(i, rule)?);
    }
    let deny_all_by_omission = default_action.is_none() && egress.is_empty();
    let out = PolicyOut {
        default_action,
        egress,
    };
    let json = serde_json::to_string(&out).map_err(|e| format!("cannot be encoded: {e}"))?;
    Ok(NetworkPolicy {
        json,
        deny_all_by_omission,
    })
}

fn check_rule<'r>(i: usize, rule: &'r Node<RuleDoc<'_>>) -> Result<RuleOut<'r>, String> {
    let Node::Object(rule) = rule else {
        return Err(format!(
            "has egress[{i}] that is not an object with action and target"
        ));
    };
    if let Some(unknown) = &rule.unknown {
        return Err(format!(
            "has unknown field `{unknown}` in egress[{i}]; only action and target are allowed"
        ));
    }
    let text = |field: &str, value: &'r Option<Scalar<'_>>| match value {
        Some(Scalar::Str(s)) => Ok(s.as_ref()),
        _ => Err(format!("has egress[{i}] without a string {field}")),
    };
    let raw_action = text("action", &rule.action)?;
    let action = action(raw_action).ok_or_else(|| {
        format!("has egress[{i}].action '{raw_action}'; use \"allow\" or \"deny\"")
    })?;
    let target = text("target", &rule.target)?.trim();
    if target.is_empty() {
        return Err(format!(
            "has an empty egress[{i}].target; give an FQDN, *.wildcard, IP or CIDR"
        ));
    }
    Ok(RuleOut { action, target })
}

/// The visitor methods for booleans and numbers, all mapped to one value.
macro_rules! non_string_scalars {
    ($other:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($other())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($other())
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($other())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($other())
        }
    };
}

// --- the borrowed document ------------------------------------------------
//
// Every visitor below accepts any JSON value, so the only errors serde_json
// reports are syntax errors, exactly as when parsing into a `Value`. Values
// the checks do not look into are still parsed as a `Value` (numbers out of
// range are syntax errors there too); they are rare and off the fast path.
// Duplicate keys: the last value wins and an unknown key is reported where it
// first appeared, as with a `Value` object.

/// A JSON value that is either an object read as `T` or anything else.
enum Node<T> {
    Object(T),
    Other,
}

/// A value the checks want as a string; `null` is told apart because a
/// `null` defaultAction means "not given".
enum Scalar<'a> {
    Null,
    Str(Cow<'a, str>),
    Other,
}

enum Rules<'a> {
    Null,
    List(Vec<Node<RuleDoc<'a>>>),
    Other,
}

#[derive(Default)]
struct PolicyDoc<'a> {
    default_action: Option<Scalar<'a>>,
    egress: Option<Rules<'a>>,
    unknown: Option<Cow<'a, str>>,
}

#[derive(Default)]
struct RuleDoc<'a> {
    action: Option<Scalar<'a>>,
    target: Option<Scalar<'a>>,
    unknown: Option<Cow<'a, str>>,
}

/// Reads the fields of one object into `T`.
trait Fields<'de>: Default {
    fn field<A: MapAccess<'de>>(&mut self, key: Cow<'de, str>, map: &mut A)
    -> Result<(), A::Error>;
}

impl<'de> Fields<'de> for PolicyDoc<'de> {
    fn field<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match key.as_ref() {
            "defaultAction" => self.default_action = Some(map.next_value()?),
            "egress" => self.egress = Some(map.next_value()?),
            _ => {
                map.next_value::<Value>()?;
                self.unknown.get_or_insert(key);
            }
        }
        Ok(())
    }
}

impl<'de> Fields<'de> for RuleDoc<'de> {
    fn field<A: MapAccess<'de>>(
        &mut self,
        key: Cow<'de, str>,
        map: &mut A,
    ) -> Result<(), A::Error> {
        match key.as_ref() {
            "action" => self.action = Some(map.next_value()?),
            "target" => self.target = Some(map.next_value()?),
            _ => {
                map.next_value::<Value>()?;
                self.unknown.get_or_insert(key);
            }
        }
        Ok(())
    }
}

impl<'de, T: Fields<'de>> Deserialize<'de> for Node<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Fields<'de>> Visitor<'de> for V<T> {
            type Value = Node<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = T::default();
                while let Some(Text(key)) = map.next_key()? {
                    fields.field(key, &mut map)?;
                }
                Ok(Node::Object(fields))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<Value>()?.is_some() {}
                Ok(Node::Other)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Node::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Node::Other)
            }
            non_string_scalars!(|| Node::Other);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<'de> Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Null)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Scalar::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Scalar::Other)
            }
            non_string_scalars!(|| Scalar::Other);
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Rules<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Rules<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut rules = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                while let Some(rule) = seq.next_element()? {
                    rules.push(rule);
                }
                Ok(Rules::List(rules))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Rules::Null)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Rules::Other)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Rules::Other)
            }
            non_string_scalars!(|| Rules::Other);
        }
        d.deserialize_any(V)
    }
}

fn action(value: &str) -> Option<&'static str> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("allow") {
        Some("allow")
    } else if v.eq_ignore_ascii_case("deny") {
        Some("deny")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The previous parser, through `serde_json::Value`: the borrowed one
    /// must agree with it on every input, errors included.
    fn reference(raw: &str, max_rules: usize) -> Result<NetworkPolicy, String> {
        let value: Value =
            serde_json::from_str(raw).map_err(|e| format!("is not valid JSON: {e}"))?;
        let Some(policy) = value.as_object() else {
            return Err(
                "is not a JSON object such as {\"defaultAction\": \"deny\", \"egress\": []}"
                    .to_owned(),
            );
        };
        if let Some(unknown) = policy
            .keys()
            .find(|k| !matches!(k.as_str(), "defaultAction" | "egress"))
        {
            return Err(format!(
                "has unknown field `{unknown}`; only defaultAction and egress are allowed"
            ));
        }
        let default_action = match policy.get("defaultAction") {
            None | Some(Value::Null) => None,
            Some(Value::String(a)) => Some(
                action(a)
                    .ok_or_else(|| format!("has defaultAction '{a}'; use \"allow\" or \"deny\""))?,
            ),
            Some(_) => {
                return Err(
                    "has a defaultAction that is not a string; use \"allow\" or \"deny\""
                        .to_owned(),
                );
            }
        };
        let rules: &[Value] = match policy.get("egress") {
            None | Some(Value::Null) => &[],
            Some(Value::Array(rules)) => rules,
            Some(_) => return Err("has an egress field that is not a list of rules".to_owned()),
        };
        if rules.len() > max_rules {
            return Err(format!(
                "has {} egress rules, more than the allowed {max_rules}; merge rules or use wildcards and CIDRs",
                rules.len()
            ));
        }
        let mut egress = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            egress.push(reference_rule(i, rule)?);
        }
        let deny_all_by_omission = default_action.is_none() && egress.is_empty();
        let out = PolicyOut {
            default_action,
            egress,
        };
        let json = serde_json::to_string(&out).map_err(|e| format!("cannot be encoded: {e}"))?;
        Ok(NetworkPolicy {
            json,
            deny_all_by_omission,
        })
    }

    fn reference_rule(i: usize, rule: &Value) -> Result<RuleOut<'_>, String> {
        let Some(rule) = rule.as_object() else {
            return Err(format!(
                "has egress[{i}] that is not an object with action and target"
            ));
        };
        if let Some(unknown) = rule
            .keys()
            .find(|k| !matches!(k.as_str(), "action" | "target"))
        {
            return Err(format!(
                "has unknown field `{unknown}` in egress[{i}]; only action and target are allowed"
            ));
        }
        let text = |field: &str| match rule.get(field) {
            Some(Value::String(s)) => Ok(s.as_str()),
            _ => Err(format!("has egress[{i}] without a string {field}")),
        };
        let raw_action = text("action")?;
        let action = action(raw_action).ok_or_else(|| {
            format!("has egress[{i}].action '{raw_action}'; use \"allow\" or \"deny\"")
        })?;
        let target = text("target")?.trim();
        if target.is_empty() {
            return Err(format!(
                "has an empty egress[{i}].target; give an FQDN, *.wildcard, IP or CIDR"
            ));
        }
        Ok(RuleOut { action, target })
    }

    #[test]
    fn agrees_with_the_value_parser() {
        let cases = [
            "",
            "{",
            "[]",
            "null",
            "1",
            "\"x\"",
            "{}",
            "{\"egress\":null}",
            "{\"defaultAction\":null}",
            "{\"defaultAction\":1}",
            "{\"defaultAction\":[1]}",
            "{\"defaultAction\":{\"a\":1}}",
            "{\"defaultAction\":\"ALLOW\"}",
            "{\"egress\":1e400}",
            "{\"egress\":[1e400]}",
            "{\"x\":1e400}",
            "{\"egress\":{}}",
            "{\"egress\":\"a\"}",
            "{\"egress\":true}",
            "{\"egress\":[null]}",
            "{\"egress\":[[]]}",
            "{\"egress\":[\"a\"]}",
            "{\"egress\":[{}]}",
            "{\"egress\":[{\"action\":\"allow\"}]}",
            "{\"egress\":[{\"action\":\"allow\",\"target\":1}]}",
            "{\"egress\":[{\"action\":\"allow\",\"target\":\"a\",\"x\":{\"y\":[1]}}]}",
            "{\"egress\":[{\"action\":\"allow\",\"target\":\"a\"}],\"x\":1,\"y\":2}",
            "{\"y\":1,\"x\":2,\"y\":3}",
            "{\"egress\":[{\"action\":\"allow\",\"target\":\"a\"}],\"egress\":[]}",
            "{\"defaultAction\":\"deny\",\"defaultAction\":null}",
            "{\"egress\":[{\"action\":\"deny\",\"action\":\"allow\",\"target\":\"\\u0061\"}]}",
            "{\"egr\\u0065ss\":[{\"t\\u0061rget\":\" b \",\"action\":\"allow\"}]}",
            "{\"\\u00e9\":1}",
            "{\"egress\":[{\"action\":\"allow\",\"target\":\"a\"},]}",
            "{\"egress\":[]} x",
            "{\"egress\":[{\"action\":\"allow\",\"target\":\"\\ud800\"}]}",
            "{\"egress\":[{\"action\":\"allow\",\"target\":\"a\"},{\"action\":\"nope\",\"target\":\"b\"}]}",
            "{\"egress\":[{\"action\":\"allow\",\"target\":\"a\"},{\"action\":\"allow\",\"target\":\"b\"},{\"action\":\"allow\",\"target\":\"c\"}]}",
        ];
        for case in cases {
            for max in [2, 10] {
                assert_eq!(parse(case, max), reference(case, max), "{case}");
            }
        }
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert_eq!(parse(&deep, 10), reference(&deep, 10));
    }

    proptest::proptest! {
        /// Random JSON-ish text built from the policy's own vocabulary.
        #[test]
        fn agrees_on_generated_input(parts in proptest::collection::vec(proptest::sample::select(vec![
            "{", "}", "[", "]", ",", ":", "\"egress\"", "\"defaultAction\"", "\"action\"",
            "\"target\"", "\"allow\"", "\"Deny\"", "\" \"", "null", "1", "true", "\"x\"",
            "\"a.example.com\"", "1e999", "-0", "\"\\u0041\"",
        ]), 0..40)) {
            let text = parts.concat();
            proptest::prop_assert_eq!(parse(&text, 3), reference(&text, 3), "{}", text);
        }
    }

    #[test]
    fn normalizes_order_case_and_whitespace() {
        let p = parse(
            r#"{"egress":[{"target":" example.com ","action":" ALLOW "}],"defaultAction":"Deny"}"#,
            10,
        )
        .unwrap();
        assert_eq!(
            p.json,
            r#"{"defaultAction":"deny","egress":[{"action":"allow","target":"example.com"}]}"#
        );
        assert!(!p.deny_all_by_omission);
    }

    #[test]
    fn empty_policy_is_deny_all() {
        let p = parse("{}", 10).unwrap();
        assert_eq!(p.json, r#"{"egress":[]}"#);
        assert!(p.deny_all_by_omission);
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse("{", 10).unwrap_err().contains("is not valid JSON"));
        assert!(parse("[]", 10).unwrap_err().contains("JSON object"));
        assert!(
            parse(r#"{"egress":[["allow","a"]]}"#, 10)
                .unwrap_err()
                .contains("egress[0] that is not an object")
        );
        assert!(
            parse(r#"{"egress":{}}"#, 10)
                .unwrap_err()
                .contains("not a list")
        );
        assert!(
            parse(r#"{"egress":[{"target":"a"}]}"#, 10)
                .unwrap_err()
                .contains("without a string action")
        );
        assert!(
            parse(r#"{"x":1}"#, 10)
                .unwrap_err()
                .contains("unknown field `x`")
        );
        assert!(
            parse(
                r#"{"egress":[{"action":"allow","target":"a","port":1}]}"#,
                10
            )
            .unwrap_err()
            .contains("unknown field `port`")
        );
        assert!(
            parse(r#"{"egress":[{"action":"maybe","target":"a"}]}"#, 10)
                .unwrap_err()
                .contains("egress[0].action 'maybe'")
        );
        assert!(
            parse(r#"{"egress":[{"action":"allow","target":"  "}]}"#, 10)
                .unwrap_err()
                .contains("empty egress[0].target")
        );
        assert!(
            parse(r#"{"defaultAction":"block"}"#, 10)
                .unwrap_err()
                .contains("defaultAction 'block'")
        );
        let many = format!(
            r#"{{"egress":[{}]}}"#,
            [r#"{"action":"allow","target":"a"}"#; 3].join(",")
        );
        assert!(parse(&many, 2).unwrap_err().contains("has 3 egress rules"));
        assert!(parse(&many, 3).is_ok());
    }
}
