//! The `<prefix>/network-policy` annotation (SPEC 4.1): parsed strictly and
//! passed to the sidecar in a normalized, compact form.

use serde::Serialize;
use serde_json::Value;

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
/// starts with the annotation key. The shape is checked by hand rather than
/// with serde derive, which would also accept objects written as arrays.
pub fn parse(raw: &str, max_rules: usize) -> Result<NetworkPolicy, String> {
    let value: Value = serde_json::from_str(raw).map_err(|e| format!("is not valid JSON: {e}"))?;
    let Some(policy) = value.as_object() else {
        return Err(
            "is not a JSON object such as {\"defaultAction\": \"deny\", \"egress\": []}".to_owned(),
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
                "has a defaultAction that is not a string; use \"allow\" or \"deny\"".to_owned(),
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
        egress.push(parse_rule(i, rule)?);
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

fn parse_rule(i: usize, rule: &Value) -> Result<RuleOut<'_>, String> {
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
