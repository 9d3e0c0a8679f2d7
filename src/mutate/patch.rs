//! JSON patch operations against the raw request object, written straight
//! to their JSON text.
//!
//! Pointers are built from tokens, so `/` and `~` in annotation keys are
//! escaped (`~1`, `~0`). A parent that does not exist is added whole instead of
//! adding into it (an `add` into a missing object fails).
//!
//! Values are anything `Serialize`: the containers and volumes the webhook
//! adds are plain structs (see `execd` and `egress`), written straight into
//! one buffer; no `serde_json::Value` tree is built on the hot path
//! (docs/performance.md, "Why the code is shaped this way").

use json_patch::PatchOperation;
use serde::ser::{Serialize, SerializeMap, Serializer};
use smallvec::SmallVec;

/// A finished patch: a JSON array of operations, or nothing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Patch {
    json: Vec<u8>,
    ops: usize,
}

impl Patch {
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ops == 0
    }

    /// How many operations.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ops
    }

    /// The JSON text, `[]` when empty.
    #[must_use]
    pub fn as_json(&self) -> &[u8] {
        if self.ops == 0 { b"[]" } else { &self.json }
    }

    /// A patch read from its JSON text, for the benchmarks' fixed-patch
    /// handler (`serve --fixed-patch`).
    ///
    /// # Errors
    /// When `json` is not a JSON patch.
    pub fn from_json(json: Vec<u8>) -> Result<Self, serde_json::Error> {
        let ops = serde_json::from_slice::<Vec<PatchOperation>>(&json)?.len();
        Ok(Patch { json, ops })
    }

    /// The operations as `json_patch` types, to apply the patch.
    ///
    /// # Errors
    /// Never for a patch this crate built; the text is parsed again.
    pub fn operations(&self) -> Result<Vec<PatchOperation>, serde_json::Error> {
        serde_json::from_slice(self.as_json())
    }
}

/// A pointer's tokens, built on the stack: the deepest path the webhook
/// writes has seven.
type Tokens<'a> = SmallVec<[&'a str; 8]>;

#[derive(Debug, Default)]
pub struct PatchBuilder {
    json: Vec<u8>,
    ops: usize,
    /// The first value that could not be serialized; only a broken
    /// `Serialize` impl can cause one, and `finish` reports it.
    error: Option<String>,
}

impl PatchBuilder {
    pub fn add<T: AsRef<str>, V: Serialize + ?Sized>(&mut self, tokens: &[T], value: &V) {
        self.op(br#"{"op":"add","path":""#, tokens);
        self.value(value);
    }

    /// Replaces what is at `tokens`, which must exist (on a list item,
    /// `add` would insert instead).
    pub fn replace<T: AsRef<str>, V: Serialize + ?Sized>(&mut self, tokens: &[T], value: &V) {
        self.op(br#"{"op":"replace","path":""#, tokens);
        self.value(value);
    }

    /// Removes what is at `tokens`, which must exist; later items of a list
    /// move down by one for the operations that follow.
    pub fn remove<T: AsRef<str>>(&mut self, tokens: &[T]) {
        self.op(br#"{"op":"remove","path":""#, tokens);
        self.json.extend_from_slice(b"\"}");
    }

    /// An operation's start up to the end of its path.
    fn op<T: AsRef<str>>(&mut self, start: &[u8], tokens: &[T]) {
        self.begin_op();
        self.json.extend_from_slice(start);
        for token in tokens {
            self.json.push(b'/');
            push_token(&mut self.json, token.as_ref());
        }
    }

    /// An operation's value, after its path, and its end.
    fn value<V: Serialize + ?Sized>(&mut self, value: &V) {
        self.json.extend_from_slice(br#"","value":"#);
        if let Err(e) = serde_json::to_writer(&mut self.json, value) {
            self.error.get_or_insert_with(|| e.to_string());
        }
        self.json.push(b'}');
    }

    /// Adds `entries` into the map at `parent`, creating the map when the pod
    /// has none. `add` on an existing key replaces its value.
    pub fn add_entries<K: AsRef<str>, V: Serialize>(
        &mut self,
        parent: &[&str],
        exists: bool,
        entries: &[(K, V)],
    ) {
        if entries.is_empty() {
            return;
        }
        if exists {
            for (key, value) in entries {
                let mut tokens: Tokens<'_> = parent.iter().copied().collect();
                tokens.push(key.as_ref());
                self.add(&tokens, value);
            }
        } else {
            self.add(parent, &Entries(entries));
        }
    }

    /// [`PatchBuilder::add_entries`] for string values under a parent two
    /// levels deep (`metadata.annotations`), some values JSON already: the
    /// same bytes, without escaping those again or collecting a path.
    pub(crate) fn add_strings(
        &mut self,
        parent: [&str; 2],
        exists: bool,
        entries: &[(&str, Str<'_>)],
    ) {
        if entries.is_empty() {
            return;
        }
        if exists {
            for &(key, value) in entries {
                self.op(br#"{"op":"add","path":""#, &[parent[0], parent[1], key]);
                self.json.extend_from_slice(br#"","value":"#);
                self.string(value);
                self.json.push(b'}');
            }
        } else {
            self.op(br#"{"op":"add","path":""#, &parent);
            self.json.extend_from_slice(br#"","value":{"#);
            for (i, &(key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    self.json.push(b',');
                }
                self.string(Str::Text(key));
                self.json.push(b':');
                self.string(value);
            }
            self.json.extend_from_slice(b"}}");
        }
    }

    fn string(&mut self, value: Str<'_>) {
        match value {
            Str::Text(text) => {
                if let Err(e) = serde_json::to_writer(&mut self.json, text) {
                    self.error.get_or_insert_with(|| e.to_string());
                }
            }
            Str::Json(json) => self.json.extend_from_slice(json.as_bytes()),
        }
    }

    /// Appends `items` to the list at `parent`, creating it when missing.
    pub fn append<T: AsRef<str>, V: Serialize>(&mut self, parent: &[T], exists: bool, items: &[V]) {
        if items.is_empty() {
            return;
        }
        if exists {
            let mut tokens: Tokens<'_> = parent.iter().map(AsRef::as_ref).collect();
            tokens.push("-");
            for item in items {
                self.add(&tokens, item);
            }
        } else {
            self.add(parent, items);
        }
    }

    pub fn finish(mut self) -> Result<Patch, String> {
        if let Some(e) = self.error {
            return Err(e);
        }
        if self.ops > 0 {
            self.json.push(b']');
        }
        Ok(Patch {
            json: self.json,
            ops: self.ops,
        })
    }

    fn begin_op(&mut self) {
        if self.ops == 0 {
            // A sandbox patch is 1–3 KB: one allocation, no doubling.
            self.json.reserve(4096);
            self.json.push(b'[');
        } else {
            self.json.push(b',');
        }
        self.ops += 1;
    }
}

/// One reference token of a JSON pointer (RFC 6901), inside a JSON string:
/// `~` and `/` become `~0` and `~1`, then the JSON string escapes.
fn push_token(out: &mut Vec<u8>, token: &str) {
    let special = |b: &u8| matches!(b, b'~' | b'/' | b'"' | b'\\' | 0..0x20);
    let mut rest = token.as_bytes();
    // Runs of plain bytes (UTF-8 sequences included) are JSON as they are.
    while let Some(at) = rest.iter().position(special) {
        out.extend_from_slice(&rest[..at]);
        match rest[at] {
            b'~' => out.extend_from_slice(b"~0"),
            b'/' => out.extend_from_slice(b"~1"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            control => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(control >> 4)]);
                out.push(HEX[usize::from(control & 0xf)]);
            }
        }
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
}

/// A string value of [`PatchBuilder::add_strings`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Str<'a> {
    /// Text, escaped as it is written.
    Text(&'a str),
    /// A JSON string written already (quoted and escaped), as `serde_json`
    /// writes it.
    Json(&'a str),
}

/// Key/value pairs written as a JSON object, in order.
struct Entries<'a, K, V>(&'a [(K, V)]);

impl<K: AsRef<str>, V: Serialize> Serialize for Entries<'_, K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            map.serialize_entry(k.as_ref(), v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn ops(p: PatchBuilder) -> Value {
        serde_json::from_slice(p.finish().unwrap().as_json()).unwrap()
    }

    #[test]
    fn escapes_annotation_keys() {
        let mut p = PatchBuilder::default();
        p.add_entries(
            &["metadata", "annotations"],
            true,
            &[
                ("opensandbox.io/expires-at", "x"),
                ("a~b\"c\\d\u{1}\u{1f}é", "y"),
            ],
        );
        let patch = p.finish().unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(patch.as_json()).unwrap(),
            json!([
                {"op": "add", "path": "/metadata/annotations/opensandbox.io~1expires-at", "value": "x"},
                {"op": "add", "path": "/metadata/annotations/a~0b\"c\\d\u{1}\u{1f}é", "value": "y"}
            ])
        );
        // And json_patch reads the pointers back to the same keys.
        let mut doc = json!({"metadata": {"annotations": {}}});
        json_patch::patch(&mut doc, &patch.operations().unwrap()).unwrap();
        assert_eq!(doc["metadata"]["annotations"]["a~b\"c\\d\u{1}\u{1f}é"], "y");
        assert_eq!(
            doc["metadata"]["annotations"]["opensandbox.io/expires-at"],
            "x"
        );
    }

    #[test]
    fn creates_missing_parents_whole() {
        let mut p = PatchBuilder::default();
        p.add_entries(&["metadata", "annotations"], false, &[("a/b", "1")]);
        p.append(&["spec", "volumes"], false, &[json!({"name": "v"})]);
        p.append(&["spec", "initContainers"], true, &[json!({"name": "c"})]);
        assert_eq!(
            ops(p),
            json!([
                {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1"}},
                {"op": "add", "path": "/spec/volumes", "value": [{"name": "v"}]},
                {"op": "add", "path": "/spec/initContainers/-", "value": {"name": "c"}}
            ])
        );
    }

    #[test]
    fn replaces_and_removes() {
        let mut p = PatchBuilder::default();
        p.replace(&["spec", "initContainers", "1"], &json!({"name": "egress"}));
        p.remove(&["spec", "containers", "0"]);
        p.add(
            &["spec", "containers", "0", "env", "-"],
            &json!({"name": "E"}),
        );
        let patch = p.finish().unwrap();
        assert_eq!(patch.len(), 3);
        let mut doc = json!({"spec": {
            "initContainers": [{"name": "i"}, {"name": "old"}],
            "containers": [{"name": "egress"}, {"name": "main", "env": []}],
        }});
        json_patch::patch(&mut doc, &patch.operations().unwrap()).unwrap();
        assert_eq!(
            doc,
            json!({"spec": {
                "initContainers": [{"name": "i"}, {"name": "egress"}],
                "containers": [{"name": "main", "env": [{"name": "E"}]}],
            }})
        );
    }

    #[test]
    fn in_order_and_empty_is_nothing() {
        let empty = PatchBuilder::default().finish().unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty.as_json(), b"[]");
        assert!(empty.operations().unwrap().is_empty());

        let mut a = PatchBuilder::default();
        a.add(&["a"], &1);
        a.append(&["b"], false, &[2, 3]);
        a.add(&["c"], &4);
        let patch = a.finish().unwrap();
        assert_eq!(patch.len(), 3);
        assert_eq!(
            serde_json::from_slice::<Value>(patch.as_json()).unwrap(),
            json!([
                {"op": "add", "path": "/a", "value": 1},
                {"op": "add", "path": "/b", "value": [2, 3]},
                {"op": "add", "path": "/c", "value": 4}
            ])
        );
    }
}
