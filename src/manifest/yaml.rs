//! YAML output for objects `inject` changed. `serde_yaml_ng` writes YAML 1.2,
//! where `2026-01-01T01:00:00Z` or `0755` are plain strings; YAML 1.1
//! readers (`PyYAML`, older `yq`, Ansible) read them as a timestamp or a
//! number. So every string that is not plainly a word is written as a JSON
//! string, which is also a valid YAML double-quoted scalar: what comes back
//! is a string in every reader.

use std::fmt::Write;

use serde_json::Value;

/// The document as block YAML, ending in a newline.
#[must_use]
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => map(&mut out, m, 0),
        Value::Array(a) if !a.is_empty() => seq(&mut out, a, 0),
        other => {
            scalar(&mut out, other);
            out.push('\n');
        }
    }
    out
}

fn indent(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

fn map(out: &mut String, m: &serde_json::Map<String, Value>, depth: usize) {
    for (i, (k, v)) in m.iter().enumerate() {
        // The first key of a map inside a sequence item follows its `- `.
        if i > 0 {
            indent(out, depth);
        }
        string(out, k);
        out.push(':');
        nested(out, v, depth);
    }
}

fn seq(out: &mut String, a: &[Value], depth: usize) {
    for (i, v) in a.iter().enumerate() {
        if i > 0 {
            indent(out, depth);
        }
        out.push_str("- ");
        match v {
            Value::Object(m) if !m.is_empty() => map(out, m, depth + 2),
            Value::Array(inner) if !inner.is_empty() => seq(out, inner, depth + 2),
            other => {
                scalar(out, other);
                out.push('\n');
            }
        }
    }
}

/// After `key:`: a scalar on the same line, a collection on the next ones.
fn nested(out: &mut String, v: &Value, depth: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            indent(out, depth + 2);
            map(out, m, depth + 2);
        }
        // Sequences under a key sit at the key's indentation, as kubectl
        // writes them.
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            indent(out, depth);
            seq(out, a, depth);
        }
        other => {
            out.push(' ');
            scalar(out, other);
            out.push('\n');
        }
    }
}

fn scalar(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => string(out, s),
        Value::Object(_) => out.push_str("{}"),
        Value::Array(_) => out.push_str("[]"),
    }
}

fn string(out: &mut String, s: &str) {
    if is_plain(s) {
        out.push_str(s);
    } else {
        // serde_json escapes exactly what a YAML double-quoted scalar needs.
        out.push_str(&Value::String(s.to_owned()).to_string());
    }
}

/// A string every YAML reader reads back as that same string: it starts
/// with a letter or `/` (a path), holds only letters, digits, `-_./` and
/// colons that a character other than a space follows (an image such as
/// `python:3.12`: only digits first make YAML 1.1 read `1:20` as a number),
/// and is none of the YAML 1.1 booleans and nulls. Anything else (digits
/// first, so numbers, dates and times; `#`, spaces, `: `) is quoted.
fn is_plain(s: &str) -> bool {
    const WORDS: [&str; 12] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf", "~",
    ];
    let bytes = s.as_bytes();
    bytes
        .first()
        .is_some_and(|c| c.is_ascii_alphabetic() || *c == b'/')
        && bytes.iter().enumerate().all(|(i, &c)| {
            c.is_ascii_alphanumeric()
                || matches!(c, b'-' | b'_' | b'.' | b'/')
                || (c == b':' && bytes.get(i + 1).is_some_and(|n| !matches!(n, b' ' | b':')))
        })
        && !WORDS.iter().any(|w| w.eq_ignore_ascii_case(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ambiguous_strings_are_quoted_and_the_rest_reads_back_the_same() {
        let v = json!({
            "metadata": {"name": "demo", "annotations": {
                "opensandbox.io/expires-at": "2026-01-01T01:00:00Z",
                "mode": "0755", "yes": "no", "flag": "true", "empty": "", "time": "1:20",
                "image": "python:3.12", "path": "/opt/x", "colon": "a:", "url": "a://b",
                "text": "two words: a # b\nline two"
            }},
            "spec": {"containers": [{"name": "c", "command": ["sleep", "3600"], "ports": [{"containerPort": 80}]}],
                     "volumes": [], "nodeSelector": {}, "n": null, "f": 1.5, "b": false}
        });
        let text = to_string(&v);
        assert!(
            text.contains("opensandbox.io/expires-at: \"2026-01-01T01:00:00Z\"\n"),
            "{text}"
        );
        assert!(
            text.contains("mode: \"0755\"\n") && text.contains("\"yes\": \"no\"\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  containers:\n  - name: c\n    command:\n    - sleep\n    - \"3600\"\n"
            ),
            "{text}"
        );
        for line in [
            "    time: \"1:20\"\n",
            "    image: python:3.12\n",
            "    path: /opt/x\n",
            "    colon: \"a:\"\n",
            "    url: a://b\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
        let back: Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(back, v, "{text}");
    }
}
