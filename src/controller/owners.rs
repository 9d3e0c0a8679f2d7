//! Which cached pods share a controller owner, so that an owner is deleted
//! only once none of its sandbox pods is removed before its own expiry
//! (deleting the owner makes the garbage collector delete them all).

use std::collections::{HashMap, HashSet};

use kube::runtime::reflector::ObjectRef;

use crate::lifecycle::SandboxPod;

type Key = ObjectRef<SandboxPod>;

/// Pods by the UID of their controller owner.
#[derive(Default)]
pub(super) struct Owners {
    pods: HashMap<String, HashSet<Key>>,
    owner_of: HashMap<Key, String>,
}

/// The UID of the pod's controller owner.
pub(super) fn controller_uid(pod: &SandboxPod) -> Option<&str> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

impl Owners {
    /// Records `pod` under its controller owner (or under none).
    pub fn insert(&mut self, key: &Key, pod: &SandboxPod) {
        let owner = controller_uid(pod);
        if self.owner_of.get(key).map(String::as_str) == owner {
            return;
        }
        self.remove(key);
        if let Some(owner) = owner {
            self.pods
                .entry(owner.to_owned())
                .or_default()
                .insert(key.clone());
            self.owner_of.insert(key.clone(), owner.to_owned());
        }
    }

    /// Forgets `key`; the UID of the owner it had, if any.
    pub fn remove(&mut self, key: &Key) -> Option<String> {
        let owner = self.owner_of.remove(key)?;
        if let Some(pods) = self.pods.get_mut(&owner) {
            pods.remove(key);
            if pods.is_empty() {
                self.pods.remove(&owner);
            }
        }
        Some(owner)
    }

    /// The other pods of `owner`.
    pub fn siblings<'a>(&'a self, owner: &str, key: &'a Key) -> impl Iterator<Item = &'a Key> {
        self.pods
            .get(owner)
            .into_iter()
            .flatten()
            .filter(move |k| *k != key)
    }

    /// Keeps only the pods `keep` says are still there (after a relist).
    pub fn retain(&mut self, mut keep: impl FnMut(&Key) -> bool) {
        let gone: Vec<Key> = self.owner_of.keys().filter(|k| !keep(k)).cloned().collect();
        for key in &gone {
            self.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, owner: Option<&str>) -> (Key, SandboxPod) {
        let refs = owner.map(|uid| {
            json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid, "controller": true},
                   {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "not-a-controller"}])
        });
        let pod: SandboxPod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": refs}
        }))
        .unwrap();
        (ObjectRef::from_obj(&pod), pod)
    }

    #[test]
    fn siblings_follow_the_controller_owner() {
        let mut owners = Owners::default();
        let (a, pa) = pod("a", Some("j1"));
        let (b, pb) = pod("b", Some("j1"));
        let (c, pc) = pod("c", Some("j2"));
        let (d, pd) = pod("d", None);
        for (k, p) in [(&a, &pa), (&b, &pb), (&c, &pc), (&d, &pd)] {
            owners.insert(k, p);
        }
        let of = |owners: &Owners, key: &Key, owner: &str| -> Vec<String> {
            owners
                .siblings(owner, key)
                .map(|k| k.name.clone())
                .collect()
        };
        assert_eq!(of(&owners, &a, "j1"), ["b"]);
        assert!(of(&owners, &c, "j2").is_empty());
        // A pod that changes owner moves; one removed is forgotten.
        let (_, moved) = pod("b", Some("j2"));
        owners.insert(&b, &moved);
        assert!(of(&owners, &a, "j1").is_empty());
        assert_eq!(of(&owners, &c, "j2"), ["b"]);
        assert_eq!(owners.remove(&b).as_deref(), Some("j2"));
        assert_eq!(owners.remove(&d), None);
        owners.retain(|k| k.name != "c");
        assert!(!owners.pods.contains_key("j2") && owners.owner_of.len() == 1);
    }
}
