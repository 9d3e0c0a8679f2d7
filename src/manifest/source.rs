//! One input as `inject`, `diagnose` and `test` read it: JSON (one object)
//! or YAML (documents split at `---` lines, each kept as written), every
//! document checked to be a Kubernetes object before anything is done with
//! it, and every error one sentence that says where and what.

use serde_json::Value;
use thiserror::Error;

/// How an input is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    Json,
    Yaml,
}

/// One document of an input.
#[derive(Debug, Clone)]
pub struct Document<'a> {
    /// The text as read, with the `---` line that opens it, if any.
    pub text: &'a str,
    /// `None` for a document that holds no object (only comments, `null`).
    pub value: Option<Value>,
}

impl Document<'_> {
    /// The `---` line that opens this document, without its line break.
    #[must_use]
    pub fn separator(&self) -> Option<&str> {
        let first = self.text.lines().next()?;
        is_separator(first).then_some(first)
    }
}

/// An input read and checked.
#[derive(Debug, Clone)]
pub struct Parsed<'a> {
    pub syntax: Syntax,
    pub documents: Vec<Document<'a>>,
}

impl Parsed<'_> {
    /// The documents that hold an object.
    pub fn objects(&self) -> impl Iterator<Item = &Value> {
        self.documents.iter().filter_map(|d| d.value.as_ref())
    }
}

/// Why an input cannot be used (the commands exit 2). `at` names the input,
/// and the document and item when there are several.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum InputError {
    #[error("{at} holds no Kubernetes object: it is empty or only comments")]
    Empty { at: String },
    #[error(
        "{at}, line {line} column {column}: a tab indents this line, and YAML is indented with spaces only; replace the tab with spaces"
    )]
    Tab {
        at: String,
        line: usize,
        column: usize,
    },
    #[error("{at} is not valid YAML: {message}")]
    Yaml { at: String, message: String },
    /// Valid YAML that holds a value no reader of this program can hold
    /// (an integer beyond 64 bits).
    #[error("{at} cannot be read: {message}")]
    Unreadable { at: String, message: String },
    #[error("{at} is not valid JSON: {message}")]
    Json { at: String, message: String },
    #[error("{at} is {what}, not a Kubernetes object (a map with apiVersion, kind and metadata)")]
    NotAnObject { at: String, what: &'static str },
    #[error("{at} has no {field}; every Kubernetes object names its apiVersion and kind")]
    Missing { at: String, field: &'static str },
}

/// Reads `text`, named `name` in errors: JSON when it starts with `{`,
/// else YAML. Every document that holds something must be a Kubernetes
/// object (items of a `List` too), and at least one must.
///
/// # Errors
/// The first document that is not valid or not an object, or an input
/// without any object.
pub fn parse<'a>(name: &str, text: &'a str) -> Result<Parsed<'a>, InputError> {
    let mut reading = read(name, text);
    let documents = reading.by_ref().collect::<Result<Vec<_>, _>>()?;
    reading.finish()?;
    Ok(Parsed {
        syntax: reading.syntax,
        documents,
    })
}

/// Reads `text` as [`parse`] does, one document at a time: each is read
/// and checked only when it is reached, so a caller that is done with a
/// document before it takes the next holds one document's values at a
/// time, however many the input has. Call [`Reading::finish`] after the
/// last, for the input that holds no object.
#[must_use]
pub fn read<'a>(name: &str, text: &'a str) -> Reading<'a> {
    let syntax = if text.trim_start().starts_with('{') {
        Syntax::Json
    } else {
        Syntax::Yaml
    };
    let pieces = match syntax {
        Syntax::Json => vec![(text, 1)],
        Syntax::Yaml => documents(text),
    };
    Reading {
        name: name.to_owned(),
        syntax,
        several: pieces.len() > 1,
        pieces: pieces.into_iter().enumerate(),
        objects: 0,
    }
}

/// The documents of one input, read as they are taken ([`read`]).
#[derive(Debug)]
pub struct Reading<'a> {
    name: String,
    pub syntax: Syntax,
    several: bool,
    pieces: std::iter::Enumerate<std::vec::IntoIter<(&'a str, usize)>>,
    objects: usize,
}

impl<'a> Reading<'a> {
    /// After the last document: an input without any object is refused.
    ///
    /// # Errors
    /// [`InputError::Empty`].
    pub fn finish(&self) -> Result<(), InputError> {
        if self.objects == 0 {
            return Err(InputError::Empty {
                at: self.name.clone(),
            });
        }
        Ok(())
    }

    fn document(
        &self,
        i: usize,
        piece: &'a str,
        first_line: usize,
    ) -> Result<Document<'a>, InputError> {
        if self.syntax == Syntax::Json {
            let value: Value = serde_json::from_str(piece).map_err(|e| InputError::Json {
                at: self.name.clone(),
                message: e.to_string(),
            })?;
            check_object(&value, &self.name)?;
            return Ok(Document {
                text: piece,
                value: Some(value),
            });
        }
        let at = if self.several {
            format!("{}, document {}", self.name, i + 1)
        } else {
            self.name.clone()
        };
        let value = parse_yaml(piece, first_line, &at)?;
        if let Some(v) = &value {
            check_object(v, &at)?;
        }
        Ok(Document { text: piece, value })
    }
}

impl<'a> Iterator for Reading<'a> {
    type Item = Result<Document<'a>, InputError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (i, (piece, first_line)) = self.pieces.next()?;
        let document = self.document(i, piece, first_line);
        if let Ok(Document { value: Some(_), .. }) = &document {
            self.objects += 1;
        }
        Some(document)
    }
}

/// A `---` line: the marker alone, or followed by a space or a tab.
fn is_separator(line: &str) -> bool {
    let bare = line.trim_end();
    bare == "---" || bare.starts_with("--- ") || bare.starts_with("---\t")
}

/// YAML documents as written, each with the line (1-based) it starts on:
/// split at `---` lines, each kept whole. Pieces that are only whitespace
/// (before a leading `---`, after a trailing one) are dropped; a piece of
/// comments is kept, to be written back as it was.
fn documents(input: &str) -> Vec<(&str, usize)> {
    let mut docs = Vec::new();
    let (mut start, mut start_line, mut offset) = (0, 1, 0);
    for (n, line) in input.split_inclusive('\n').enumerate() {
        if is_separator(line) {
            docs.push((&input[start..offset], start_line));
            start = offset;
            start_line = n + 1;
        }
        offset += line.len();
    }
    docs.push((&input[start..], start_line));
    docs.retain(|(d, _)| !d.trim().is_empty());
    docs
}

/// One YAML document; `None` when it holds no object. Line numbers in
/// errors are the input's, not the document's.
fn parse_yaml(piece: &str, first_line: usize, at: &str) -> Result<Option<Value>, InputError> {
    // Deep nesting costs the parser quadratic time: refused first.
    if let Err(deep) = crate::yaml_depth::check(piece) {
        let line = first_line as u64 + deep.line - 1;
        return Err(InputError::Unreadable {
            at: at.to_owned(),
            message: crate::yaml_depth::TooDeep { line, ..deep }.to_string(),
        });
    }
    match serde_yaml_ng::from_str::<Value>(piece) {
        Ok(v) => Ok((!v.is_null()).then_some(v)),
        Err(e) => Err(yaml_error(&e, piece, first_line, at)),
    }
}

fn yaml_error(e: &serde_yaml_ng::Error, piece: &str, first_line: usize, at: &str) -> InputError {
    let message = e.to_string();
    let Some(location) = e.location() else {
        return InputError::Yaml {
            at: at.to_owned(),
            message,
        };
    };
    let line = first_line + location.line().saturating_sub(1);
    let text = piece.lines().nth(location.line().saturating_sub(1));
    // A tab in a line's indentation is what the scanner trips on, at the
    // tab or at the first character after it.
    let tab_column = text.and_then(|t| {
        let indent = t.len() - t.trim_start().len();
        t[..indent].find('\t').map(|i| i + 1)
    });
    if let Some(column) = tab_column {
        return InputError::Tab {
            at: at.to_owned(),
            line,
            column,
        };
    }
    let within = format!("line {} column {}", location.line(), location.column());
    let in_input = format!("line {line} column {}", location.column());
    // serde_json's words for an integer beyond 64 bits, after the path.
    if let Some((path, _)) = message.split_once(": JSON number out of range") {
        return InputError::Unreadable {
            at: at.to_owned(),
            message: format!(
                "{path}: the number at {in_input} is too large to read; quote it (annotation values are text)"
            ),
        };
    }
    InputError::Yaml {
        at: at.to_owned(),
        message: message.replacen(&within, &in_input, 1),
    }
}

/// The shape every Kubernetes object has: a map with a non-empty `kind`
/// and `apiVersion`; the items of a `List` likewise.
fn check_object(v: &Value, at: &str) -> Result<(), InputError> {
    let what = match v {
        Value::Object(_) => None,
        Value::Array(_) => Some("a list"),
        Value::String(_) => Some("a string"),
        Value::Number(_) => Some("a number"),
        Value::Bool(_) => Some("a boolean"),
        Value::Null => Some("null"),
    };
    if let Some(what) = what {
        return Err(InputError::NotAnObject {
            at: at.to_owned(),
            what,
        });
    }
    for field in ["apiVersion", "kind"] {
        let named = v
            .get(field)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.trim().is_empty());
        if !named {
            return Err(InputError::Missing {
                at: at.to_owned(),
                field,
            });
        }
    }
    if v.get("kind").and_then(Value::as_str) == Some("List")
        && let Some(items) = v.get("items").and_then(Value::as_array)
    {
        for (i, item) in items.iter().enumerate() {
            check_object(item, &format!("{at}, items[{i}]"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse("in.yaml", text).unwrap_err().to_string()
    }

    #[test]
    fn documents_keep_their_text_and_separators() {
        let text = "# head\n---\napiVersion: v1\nkind: A\n--- # two\napiVersion: v1\nkind: B\n";
        let parsed = parse("in.yaml", text).unwrap();
        assert_eq!(parsed.syntax, Syntax::Yaml);
        let texts: Vec<_> = parsed.documents.iter().map(|d| d.text).collect();
        assert_eq!(
            texts,
            [
                "# head\n",
                "---\napiVersion: v1\nkind: A\n",
                "--- # two\napiVersion: v1\nkind: B\n"
            ]
        );
        assert!(parsed.documents[0].value.is_none());
        assert_eq!(parsed.documents[0].separator(), None);
        assert_eq!(parsed.documents[2].separator(), Some("--- # two"));
        assert_eq!(texts.concat(), text);
    }

    #[test]
    fn what_is_not_an_object_says_so() {
        for (text, says) in [
            (
                "",
                "in.yaml holds no Kubernetes object: it is empty or only comments",
            ),
            ("# only\n---\n", "in.yaml holds no Kubernetes object"),
            ("hello\n", "in.yaml is a string, not a Kubernetes object"),
            ("- a\n- b\n", "in.yaml is a list, not a Kubernetes object"),
            ("42\n", "in.yaml is a number"),
            ("metadata: {name: x}\n", "in.yaml has no apiVersion;"),
            ("apiVersion: v1\nmetadata: {}\n", "in.yaml has no kind;"),
            (
                "apiVersion: v1\nkind: A\n---\n[1]\n",
                "in.yaml, document 2 is a list",
            ),
            (
                "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: A}, {kind: B}]\n",
                "in.yaml, items[1] has no apiVersion",
            ),
            ("{\"kind\": \"Pod\"", "in.yaml is not valid JSON: EOF"),
        ] {
            let e = error(text);
            assert!(e.starts_with(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_tab_is_named_with_the_inputs_line() {
        let e = error(
            "apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n",
        );
        assert_eq!(
            e,
            "in.yaml, document 2, line 7 column 1: a tab indents this line, and YAML is indented with spaces only; replace the tab with spaces"
        );
        let e = error("apiVersion: v1\nkind: A\nmetadata: {name: [x}\n");
        assert!(e.starts_with("in.yaml is not valid YAML: "), "{e}");
        assert!(e.contains("line 3"), "{e}");
    }
}
