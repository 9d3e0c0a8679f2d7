//! JSON patch operations against the raw request object.
//!
//! Pointers are built from tokens, so `/` and `~` in annotation keys are
//! escaped (`~1`, `~0`). A parent that does not exist is added whole instead of
//! adding into it (an `add` into a missing object fails).

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde_json::{Map, Value};

#[derive(Debug, Default)]
pub struct PatchBuilder {
    ops: Vec<PatchOperation>,
}

impl PatchBuilder {
    pub fn add<T: AsRef<str>>(&mut self, tokens: &[T], value: Value) {
        let path = PointerBuf::from_tokens(tokens.iter().map(AsRef::as_ref));
        self.ops
            .push(PatchOperation::Add(AddOperation { path, value }));
    }

    /// Adds `entries` into the map at `parent`, creating the map when the pod
    /// has none. `add` on an existing key replaces its value.
    pub fn add_entries(&mut self, parent: &[&str], exists: bool, entries: Vec<(String, Value)>) {
        if entries.is_empty() {
            return;
        }
        if exists {
            for (key, value) in entries {
                let mut tokens: Vec<&str> = parent.to_vec();
                tokens.push(&key);
                self.add(&tokens, value);
            }
        } else {
            let map: Map<String, Value> = entries.into_iter().collect();
            self.add(parent, Value::Object(map));
        }
    }

    /// Appends `items` to the list at `parent`, creating it when missing.
    pub fn append<T: AsRef<str>>(&mut self, parent: &[T], exists: bool, items: Vec<Value>) {
        if items.is_empty() {
            return;
        }
        if exists {
            let mut tokens: Vec<&str> = parent.iter().map(AsRef::as_ref).collect();
            tokens.push("-");
            for item in items {
                self.add(&tokens, item);
            }
        } else {
            self.add(parent, Value::Array(items));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    pub fn into_ops(self) -> Vec<PatchOperation> {
        self.ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_annotation_keys() {
        let mut p = PatchBuilder::default();
        p.add_entries(
            &["metadata", "annotations"],
            true,
            vec![("opensandbox.io/expires-at".into(), json!("x"))],
        );
        let ops = serde_json::to_value(p.into_ops()).unwrap();
        assert_eq!(
            ops,
            json!([{"op": "add", "path": "/metadata/annotations/opensandbox.io~1expires-at", "value": "x"}])
        );
    }

    #[test]
    fn creates_missing_parents_whole() {
        let mut p = PatchBuilder::default();
        p.add_entries(
            &["metadata", "annotations"],
            false,
            vec![("a/b".into(), json!("1"))],
        );
        p.append(&["spec", "volumes"], false, vec![json!({"name": "v"})]);
        p.append(
            &["spec", "initContainers"],
            true,
            vec![json!({"name": "c"})],
        );
        let ops = serde_json::to_value(p.into_ops()).unwrap();
        assert_eq!(
            ops,
            json!([
                {"op": "add", "path": "/metadata/annotations", "value": {"a/b": "1"}},
                {"op": "add", "path": "/spec/volumes", "value": [{"name": "v"}]},
                {"op": "add", "path": "/spec/initContainers/-", "value": {"name": "c"}}
            ])
        );
    }
}
