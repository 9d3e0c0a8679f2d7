//! Python's `str()` of a JSON value as Python's `json` module decodes it, so
//! messages ported from the seed quote non-string values exactly as its
//! f-strings do. Works on the JSON text itself: serde_json would turn big
//! integers and `-0` into floats before we could print them.

use super::py_printable::NON_PRINTABLE;

/// `str(json.loads(text))` for valid JSON text.
pub fn py_str(text: &str) -> String {
    let text = text.trim();
    if text.starts_with('"')
        && let Ok(s) = serde_json::from_str::<String>(text)
    {
        return s;
    }
    let mut p = Printer {
        s: text.as_bytes(),
        i: 0,
    };
    p.value()
}

struct Printer<'a> {
    s: &'a [u8],
    i: usize,
}

impl Printer<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> u8 {
        self.ws();
        self.s.get(self.i).copied().unwrap_or(b'\0')
    }

    /// `repr()` of the value at the cursor; advances past it.
    fn value(&mut self) -> String {
        match self.peek() {
            b'{' => {
                self.i += 1;
                // dict(pairs): a repeated key keeps its first position and
                // takes the last value.
                let mut entries: Vec<(String, String)> = Vec::new();
                while self.peek() != b'}' && self.i < self.s.len() {
                    let key = self.string();
                    self.peek();
                    self.i += 1; // ':'
                    let value = self.value();
                    match entries.iter_mut().find(|(k, _)| *k == key) {
                        Some(slot) => slot.1 = value,
                        None => entries.push((key, value)),
                    }
                    if self.peek() == b',' {
                        self.i += 1;
                    }
                }
                self.i += 1;
                let inner: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{}: {v}", py_str_repr(k)))
                    .collect();
                format!("{{{}}}", inner.join(", "))
            }
            b'[' => {
                self.i += 1;
                let mut items = Vec::new();
                while self.peek() != b']' && self.i < self.s.len() {
                    items.push(self.value());
                    if self.peek() == b',' {
                        self.i += 1;
                    }
                }
                self.i += 1;
                format!("[{}]", items.join(", "))
            }
            b'"' => py_str_repr(&self.string()),
            _ => {
                let start = self.i;
                while self.i < self.s.len() && !b",]} \t\r\n".contains(&self.s[self.i]) {
                    self.i += 1;
                }
                let token = std::str::from_utf8(&self.s[start..self.i]).unwrap_or_default();
                match token {
                    "true" => "True".into(),
                    "false" => "False".into(),
                    "null" => "None".into(),
                    number => py_number(number),
                }
            }
        }
    }

    /// The decoded string token at the cursor.
    fn string(&mut self) -> String {
        self.ws();
        let start = self.i;
        self.i += 1;
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    break;
                }
                _ => self.i += 1,
            }
        }
        let token = std::str::from_utf8(&self.s[start..self.i.min(self.s.len())]).unwrap_or("\"\"");
        serde_json::from_str(token).unwrap_or_default()
    }
}

/// Integers print exactly, as Python ints of any size do (JSON has no
/// leading zeros, so only `-0` needs normalizing); anything with a fraction
/// or exponent is a Python float.
fn py_number(literal: &str) -> String {
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return if digits.bytes().all(|b| b == b'0') {
            "0".into()
        } else {
            literal.into()
        };
    }
    // Out-of-range literals parse to ±inf, as in Python.
    literal
        .parse::<f64>()
        .map_or_else(|_| literal.to_owned(), py_float)
}

/// `repr(float)`: shortest round-trip digits, positional for exponents in
/// [-4, 16), scientific with a signed two-digit exponent otherwise.
fn py_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1;
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat(point.unsigned_abs() as usize), digits)
        } else if point as usize >= digits.len() {
            format!("{}{}.0", digits, "0".repeat(point as usize - digits.len()))
        } else {
            let (int, frac) = digits.split_at(point as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exp_sign}{:02}", exp.abs())
    }
}

/// `repr(str)`: single quotes unless the text has a single quote and no
/// double quote; backslash escapes for the quote, the backslash and every
/// character `str.isprintable()` rejects.
fn py_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !printable(c) => {
                let cp = c as u32;
                if cp < 0x100 {
                    out.push_str(&format!("\\x{cp:02x}"));
                } else if cp < 0x10000 {
                    out.push_str(&format!("\\u{cp:04x}"));
                } else {
                    out.push_str(&format!("\\U{cp:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

fn printable(c: char) -> bool {
    let cp = c as u32;
    let i = NON_PRINTABLE.partition_point(|&(_, end)| end < cp);
    NON_PRINTABLE.get(i).is_none_or(|&(start, _)| start > cp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_like_python() {
        for (json, python) in [
            (r#""plain""#, "plain"),
            (r#""it's""#, "it's"),
            ("1", "1"),
            ("-0", "0"),
            ("100000000000000000000", "100000000000000000000"),
            ("1.5", "1.5"),
            ("100.0", "100.0"),
            ("1e20", "1e+20"),
            ("1E-5", "1e-05"),
            ("0.9020643004116283", "0.9020643004116283"),
            ("123456789.123456789e-3", "123456.7891234568"),
            ("-0.0", "-0.0"),
            ("1e400", "inf"),
            ("true", "True"),
            ("null", "None"),
            (r#"["a", 1, [true]]"#, "['a', 1, [True]]"),
            (r#"{"k": null, "j": {}}"#, "{'k': None, 'j': {}}"),
            (r#"{"a": 1, "b": 2, "a": 3}"#, "{'a': 3, 'b': 2}"),
            (
                r#"["it's", "say \"hi\"", "both ' \""]"#,
                r#"["it's", 'say "hi"', 'both \' "']"#,
            ),
            (
                r#"["a\u200bb", "\u00ad", "😀", "\udb40\udc01", "\n", "\\"]"#,
                r"['a\u200bb', '\xad', '😀', '\U000e0001', '\n', '\\']",
            ),
        ] {
            assert_eq!(py_str(json), python, "{json}");
        }
    }
}
