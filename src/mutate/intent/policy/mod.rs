//! The `<prefix>/network-policy` annotation (contract: policy.shape,
//! policy.normalized): parsed strictly and passed to the sidecar in a
//! normalized, compact form.
//!
//! The annotation is read in one pass into a borrowed document that accepts
//! any JSON (`doc::PolicyDoc`), and its shape is checked afterwards. That
//! keeps the seed's order of complaints (a syntax error anywhere wins over a
//! shape error) without a `serde_json::Value` per rule (docs/performance.md,
//! "Why the code is shaped this way").

mod doc;
mod target;

use serde::Serialize;
use thiserror::Error;

use crate::json::error::quoted;
use crate::mutate::quote::clip;
use doc::{Node, PolicyDoc, RuleDoc, Rules, Scalar};

use target::acceptable;
pub(crate) use target::{Address, address};

/// Why a policy is refused: the end of a sentence that starts with the
/// annotation key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PolicyError {
    #[error("is not valid JSON: {0}")]
    NotJson(String),
    #[error("is not a JSON object such as {{\"defaultAction\": \"deny\", \"egress\": []}}")]
    NotObject,
    #[error("has unknown field `{}`; only defaultAction and egress are allowed", clip(.0))]
    UnknownField(String),
    #[error("has defaultAction '{}'; use \"allow\" or \"deny\"", clip(.0))]
    DefaultAction(String),
    #[error("has a defaultAction that is not a string; use \"allow\" or \"deny\"")]
    DefaultActionNotString,
    #[error("has an egress field that is not a list of rules")]
    EgressNotList,
    #[error(
        "has {count} egress rules, more than the allowed {max}; merge rules or use wildcards and CIDRs"
    )]
    TooManyRules { count: usize, max: usize },
    #[error("has egress[{0}] that is not an object with action and target")]
    RuleNotObject(usize),
    #[error(
        "has unknown field `{}` in egress[{index}]; only action and target are allowed",
        clip(.field)
    )]
    RuleUnknownField { index: usize, field: String },
    #[error("has egress[{index}] without a string {field}")]
    RuleFieldNotString { index: usize, field: &'static str },
    #[error("has egress[{index}].action '{}'; use \"allow\" or \"deny\"", clip(.action))]
    Action { index: usize, action: String },
    #[error("has an empty egress[{0}].target; give an FQDN, *.wildcard, IP or CIDR")]
    EmptyTarget(usize),
    #[error(
        "has egress[{index}].target {}, which is not an FQDN, *.wildcard, IP or CIDR",
        quoted(&clip(.target))
    )]
    BadTarget { index: usize, target: String },
    #[error("cannot be encoded: {0}")]
    Encode(String),
}

/// A policy as the egress sidecar reads it from `OPENSANDBOX_EGRESS_RULES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// Compact JSON, keys in the order `defaultAction`, `egress`.
    pub json: String,
    /// No rules and no default action: the sidecar denies everything.
    pub deny_all_by_omission: bool,
    /// `defaultAction: allow`: what no rule names is let through.
    pub default_allow: bool,
    /// The first rule whose target looks like a URL or `host:port` (its
    /// index and target), for a warning: the sidecar matches host names.
    pub odd_target: Option<(usize, String)>,
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

/// Parses and normalizes a policy.
pub fn parse(raw: &str, max_rules: usize) -> Result<NetworkPolicy, PolicyError> {
    let doc: Node<PolicyDoc<'_>> =
        serde_json::from_str(raw).map_err(|e| PolicyError::NotJson(e.to_string()))?;
    let Node::Object(policy) = doc else {
        return Err(PolicyError::NotObject);
    };
    if let Some(unknown) = policy.unknown {
        return Err(PolicyError::UnknownField(unknown.into_owned()));
    }
    let default_action = match policy.default_action {
        None | Some(Scalar::Null) => None,
        Some(Scalar::Str(a)) => {
            Some(action(&a).ok_or_else(|| PolicyError::DefaultAction(a.into_owned()))?)
        }
        Some(Scalar::Other) => return Err(PolicyError::DefaultActionNotString),
    };
    let rules: &[Node<RuleDoc<'_>>] = match &policy.egress {
        None | Some(Rules::Null) => &[],
        Some(Rules::List(rules)) => rules,
        Some(Rules::Other) => return Err(PolicyError::EgressNotList),
    };
    if rules.len() > max_rules {
        return Err(PolicyError::TooManyRules {
            count: rules.len(),
            max: max_rules,
        });
    }
    let mut egress = Vec::with_capacity(rules.len());
    for (i, rule) in rules.iter().enumerate() {
        egress.push(check_rule(i, rule)?);
    }
    NetworkPolicy::normalized(default_action, egress)
        .map_err(|e| PolicyError::Encode(e.to_string()))
}

impl NetworkPolicy {
    /// The policy as the sidecar reads it, from checked parts.
    fn normalized(
        default_action: Option<&'static str>,
        egress: Vec<RuleOut<'_>>,
    ) -> Result<Self, serde_json::Error> {
        let odd_target = first_odd_target(&egress);
        let deny_all_by_omission = default_action.is_none() && egress.is_empty();
        let default_allow = default_action == Some("allow");
        let json = serde_json::to_string(&PolicyOut {
            default_action,
            egress,
        })?;
        Ok(NetworkPolicy {
            json,
            deny_all_by_omission,
            default_allow,
            odd_target,
        })
    }
}

fn check_rule<'r>(index: usize, rule: &'r Node<RuleDoc<'_>>) -> Result<RuleOut<'r>, PolicyError> {
    let Node::Object(rule) = rule else {
        return Err(PolicyError::RuleNotObject(index));
    };
    if let Some(unknown) = &rule.unknown {
        return Err(PolicyError::RuleUnknownField {
            index,
            field: unknown.to_string(),
        });
    }
    let text = |field, value: &'r Option<Scalar<'_>>| match value {
        Some(Scalar::Str(s)) => Ok(s.as_ref()),
        _ => Err(PolicyError::RuleFieldNotString { index, field }),
    };
    let raw_action = text("action", &rule.action)?;
    let action = action(raw_action).ok_or_else(|| PolicyError::Action {
        index,
        action: raw_action.to_owned(),
    })?;
    let target = text("target", &rule.target)?.trim();
    if target.is_empty() {
        return Err(PolicyError::EmptyTarget(index));
    }
    if !acceptable(target) {
        return Err(PolicyError::BadTarget {
            index,
            target: target.to_owned(),
        });
    }
    Ok(RuleOut { action, target })
}

fn first_odd_target(rules: &[RuleOut<'_>]) -> Option<(usize, String)> {
    rules
        .iter()
        .position(|r| address(r.target).is_some())
        .map(|i| (i, rules[i].target.to_owned()))
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
    use serde_json::Value;

    /// The error as the sentence end the denial carries.
    fn err(raw: &str, max_rules: usize) -> String {
        parse(raw, max_rules).unwrap_err().to_string()
    }

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
        NetworkPolicy::normalized(default_action, egress)
            .map_err(|e| format!("cannot be encoded: {e}"))
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
        if !acceptable(target) {
            return Err(format!(
                "has egress[{i}].target {}, which is not an FQDN, *.wildcard, IP or CIDR",
                crate::json::error::quoted(target)
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
                assert_eq!(
                    parse(case, max).map_err(|e| e.to_string()),
                    reference(case, max),
                    "{case}"
                );
            }
        }
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            parse(&deep, 10).map_err(|e| e.to_string()),
            reference(&deep, 10)
        );
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
            proptest::prop_assert_eq!(
                parse(&text, 3).map_err(|e| e.to_string()),
                reference(&text, 3),
                "{}",
                text
            );
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
        assert!(err("{", 10).contains("is not valid JSON"));
        assert!(err("[]", 10).contains("JSON object"));
        assert!(
            err(r#"{"egress":[["allow","a"]]}"#, 10).contains("egress[0] that is not an object")
        );
        assert!(err(r#"{"egress":{}}"#, 10).contains("not a list"));
        assert!(err(r#"{"egress":[{"target":"a"}]}"#, 10).contains("without a string action"));
        assert!(err(r#"{"x":1}"#, 10).contains("unknown field `x`"));
        assert!(
            err(
                r#"{"egress":[{"action":"allow","target":"a","port":1}]}"#,
                10
            )
            .contains("unknown field `port`")
        );
        assert!(
            err(r#"{"egress":[{"action":"maybe","target":"a"}]}"#, 10)
                .contains("egress[0].action 'maybe'")
        );
        assert!(
            err(r#"{"egress":[{"action":"allow","target":"  "}]}"#, 10)
                .contains("empty egress[0].target")
        );
        assert!(err(r#"{"defaultAction":"block"}"#, 10).contains("defaultAction 'block'"));
        assert_eq!(
            err(
                r#"{"egress":[{"action":"allow","target":"a.com"},{"action":"deny","target":" '; rm -rf /' "}]}"#,
                10
            ),
            r#"has egress[1].target "'; rm -rf /'", which is not an FQDN, *.wildcard, IP or CIDR"#
        );
        assert!(
            err(r#"{"egress":[{"action":"allow","target":"a\nb"}]}"#, 10)
                .contains(r#"target "a\nb", which"#)
        );
        let many = format!(
            r#"{{"egress":[{}]}}"#,
            [r#"{"action":"allow","target":"a"}"#; 3].join(",")
        );
        assert!(err(&many, 2).contains("has 3 egress rules"));
        assert!(parse(&many, 3).is_ok());
    }
}
