//! The leader's cache of sandbox pods: per pod its identity, the version
//! its writes are conditioned on, its [`PodFacts`] and the loop's own
//! bookkeeping (`W`), and nothing else; the index of pods by controller
//! owner; the strings many pods repeat, held once.
//!
//! The watch's pods are digested as they arrive, so no decoded object is
//! kept, and a relist updates the entries in place (a generation mark says
//! which ones it saw) instead of building a second cache beside the first:
//! the peak during a relist is the cache itself.
//!
//! Memory per pod is held by `tests/controller_memory/main.rs`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use smallvec::SmallVec;

use crate::config::Config;
use crate::lifecycle::{Owner, PodFacts, SandboxPod, Uid, Version};

/// A pod's namespace and name; cloning it copies two pointers.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodKey {
    pub namespace: Arc<str>,
    pub name: Arc<str>,
}

impl std::fmt::Display for PodKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One cached pod.
pub struct Cached<W> {
    pub uid: Uid,
    /// The version the cache has, which a delete is conditioned on.
    pub resource_version: Option<Version>,
    pub facts: PodFacts,
    /// The loop's bookkeeping for this pod; reset when the name comes back
    /// with another UID.
    pub work: W,
    /// The relist that last saw the pod.
    generation: u32,
}

/// The pods of one controller owner, and the owner itself, shared by them.
/// Most owners have one pod, held inline.
struct Group {
    owner: Arc<Owner>,
    pods: SmallVec<[PodKey; 1]>,
}

pub struct Cache<W> {
    /// Boxed: the table holds every slot it has room for, used or not (up
    /// to twice the pods just after it grows), so its slots stay small.
    pods: HashMap<PodKey, Box<Cached<W>>>,
    owners: HashMap<Uid, Group>,
    strings: HashSet<Arc<str>>,
    generation: u32,
    /// Pods removed, for the sweep of the strings.
    removals: u32,
}

/// The shared strings are swept after this many removals.
const SWEEP_EVERY: u32 = 4096;

/// The key of `pod`.
#[must_use]
pub fn key_of(pod: &SandboxPod) -> Option<PodKey> {
    Some(PodKey {
        namespace: Arc::from(pod.namespace()),
        name: Arc::from(pod.metadata.name.as_deref()?),
    })
}

impl<W> Default for Cache<W> {
    fn default() -> Self {
        Cache {
            pods: HashMap::new(),
            owners: HashMap::new(),
            strings: HashSet::new(),
            generation: 0,
            removals: 0,
        }
    }
}

/// What [`Cache::apply`] did.
pub struct Applied<W> {
    pub key: PodKey,
    /// The bookkeeping of the pod the name held before, when that was
    /// another pod (another UID): its timers are the caller's to cancel.
    pub replaced: Option<W>,
    /// The facts the name had before, if it was cached.
    pub previous: Option<PodFacts>,
}

impl<W: Default> Cache<W> {
    /// Stores the pod's facts, replacing what the cache had for its name.
    /// `None` for an object without a name or UID, which the apiserver
    /// never sends.
    pub fn apply(
        &mut self,
        pod: &SandboxPod,
        config: &Config,
        condition_type: &str,
    ) -> Option<Applied<W>> {
        let meta = &pod.metadata;
        let (name, uid) = (meta.name.as_deref()?, Uid::new(meta.uid.as_deref()?));
        let strings = &mut self.strings;
        let mut facts = PodFacts::read(pod, config, condition_type, &mut |s| intern(strings, s));
        let key = PodKey {
            namespace: Arc::clone(&facts.namespace),
            name: Arc::from(name),
        };
        // Every pod of one owner shares the first one's `Owner`.
        if let Some(owner) = &mut facts.owner
            && let Some(group) = self.owners.get(&owner.uid)
            && group.owner == *owner
        {
            *owner = Arc::clone(&group.owner);
        }
        let owner = facts.owner.clone();
        let generation = self.generation;
        let resource_version = meta.resource_version.as_deref().map(Version::new);
        let (old_owner, replaced, previous) = if let Some(cached) = self.pods.get_mut(&key) {
            let old_owner = cached.facts.owner.as_ref().map(|o| o.uid.clone());
            let replaced = (cached.uid != uid).then(|| std::mem::take(&mut cached.work));
            cached.uid = uid;
            cached.resource_version = resource_version;
            let previous = std::mem::replace(&mut cached.facts, facts);
            cached.generation = generation;
            (old_owner, replaced, Some(previous))
        } else {
            let cached = Box::new(Cached {
                uid,
                resource_version,
                facts,
                work: W::default(),
                generation,
            });
            self.pods.insert(key.clone(), cached);
            (None, None, None)
        };
        if old_owner.as_ref() != owner.as_ref().map(|o| &o.uid) {
            if let Some(old) = old_owner {
                self.leave(&old, &key);
            }
            if let Some(owner) = owner {
                self.owners
                    .entry(owner.uid.clone())
                    .or_insert_with(|| Group {
                        owner: Arc::clone(&owner),
                        pods: SmallVec::new(),
                    })
                    .pods
                    .push(key.clone());
            }
        }
        Some(Applied {
            key,
            replaced,
            previous,
        })
    }
}

impl<W> Cache<W> {
    #[must_use]
    pub fn get(&self, key: &PodKey) -> Option<&Cached<W>> {
        self.pods.get(key).map(|c| &**c)
    }

    pub fn get_mut(&mut self, key: &PodKey) -> Option<&mut Cached<W>> {
        self.pods.get_mut(key).map(|c| &mut **c)
    }

    /// Forgets the pod; what the cache had for it.
    pub fn remove(&mut self, key: &PodKey) -> Option<Box<Cached<W>>> {
        let cached = self.pods.remove(key)?;
        if let Some(owner) = &cached.facts.owner {
            self.leave(&owner.uid.clone(), key);
        }
        self.removals = self.removals.wrapping_add(1);
        if self.removals.is_multiple_of(SWEEP_EVERY) {
            self.sweep();
        }
        Some(cached)
    }

    /// Drops the shared strings no one holds any more (namespaces gone,
    /// owner kinds no longer seen), so they cannot pile up, and gives back
    /// the room of tables far larger than what they hold.
    pub fn sweep(&mut self) {
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.strings.shrink_to_fit();
        if self.pods.capacity() > 4 * self.pods.len().max(1024) {
            self.pods.shrink_to_fit();
            self.owners.shrink_to_fit();
        }
    }

    fn leave(&mut self, owner: &Uid, key: &PodKey) {
        if let Some(group) = self.owners.get_mut(owner) {
            group.pods.retain(|k| k != key);
            if group.pods.is_empty() {
                self.owners.remove(owner);
            }
        }
    }

    /// The other cached pods of the owner with this UID.
    pub fn siblings<'a>(
        &'a self,
        owner: &Uid,
        key: &'a PodKey,
    ) -> impl Iterator<Item = &'a PodKey> {
        self.owners
            .get(owner)
            .into_iter()
            .flat_map(|g| &g.pods)
            .filter(move |k| *k != key)
    }

    /// A relist begins: the pods it does not bring again are gone.
    pub fn begin_relist(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// The relist is complete: forgets the pods it did not bring (deleted
    /// while the watch was down) and gives back what it had for them (then
    /// [`Cache::sweep`]).
    pub fn end_relist(&mut self) -> Vec<(PodKey, Box<Cached<W>>)> {
        let generation = self.generation;
        let gone: Vec<PodKey> = self
            .pods
            .iter()
            .filter(|(_, c)| c.generation != generation)
            .map(|(k, _)| k.clone())
            .collect();
        gone.into_iter()
            .filter_map(|key| self.remove(&key).map(|c| (key, c)))
            .collect()
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.pods.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pods.is_empty()
    }

    /// Every cached pod.
    pub fn iter(&self) -> impl Iterator<Item = (&PodKey, &Cached<W>)> {
        self.pods.iter().map(|(k, c)| (k, &**c))
    }
}

/// The shared copy of `s`, made the first time it is seen.
fn intern(strings: &mut HashSet<Arc<str>>, s: &str) -> Arc<str> {
    if let Some(shared) = strings.get(s) {
        return Arc::clone(shared);
    }
    let shared: Arc<str> = Arc::from(s);
    strings.insert(Arc::clone(&shared));
    shared
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, namespace: &str, owner: Option<&str>) -> SandboxPod {
        let refs = owner.map(|uid| {
            json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid, "controller": true},
                   {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "not-a-controller"}])
        });
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"),
                         "resourceVersion": "7", "ownerReferences": refs}
        }))
        .unwrap()
    }

    fn apply(cache: &mut Cache<()>, pod: &SandboxPod) -> PodKey {
        let config = Config::default();
        cache.apply(pod, &config, "ct").unwrap().key
    }

    fn siblings(cache: &Cache<()>, owner: &str, key: &PodKey) -> Vec<String> {
        let mut names: Vec<String> = cache
            .siblings(&Uid::new(owner), key)
            .map(|k| k.name.to_string())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn siblings_follow_the_controller_owner() {
        let mut cache = Cache::default();
        let a = apply(&mut cache, &pod("a", "ns", Some("j1")));
        let b = apply(&mut cache, &pod("b", "ns", Some("j1")));
        let c = apply(&mut cache, &pod("c", "ns", Some("j2")));
        let d = apply(&mut cache, &pod("d", "ns", None));
        assert_eq!(siblings(&cache, "j1", &a), ["b"]);
        assert!(siblings(&cache, "j2", &c).is_empty());
        // One owner, shared by its pods.
        let owner = |k: &PodKey| cache.get(k).unwrap().facts.owner.clone().unwrap();
        assert!(Arc::ptr_eq(&owner(&a), &owner(&b)));
        // A pod that changes owner moves; one removed is forgotten.
        apply(&mut cache, &pod("b", "ns", Some("j2")));
        assert!(siblings(&cache, "j1", &a).is_empty());
        assert_eq!(siblings(&cache, "j2", &c), ["b"]);
        assert!(cache.remove(&b).is_some());
        assert!(cache.remove(&d).is_some());
        assert!(cache.remove(&d).is_none());
        assert!(siblings(&cache, "j2", &c).is_empty() && cache.owners.len() == 2);
        // The same name in another namespace is another pod.
        let other = apply(&mut cache, &pod("a", "elsewhere", Some("j1")));
        assert_ne!(other, a);
        assert_eq!(siblings(&cache, "j1", &a), ["a"]);
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn a_relist_keeps_what_it_brings_and_strings_in_use() {
        let mut cache = Cache::default();
        apply(&mut cache, &pod("a", "one", Some("j1")));
        apply(&mut cache, &pod("b", "two", Some("j1")));
        // Both namespaces and the owner's apiVersion and kind, once each.
        assert_eq!(cache.strings.len(), 4);
        let first = cache.get(&key_of(&pod("a", "one", None)).unwrap()).unwrap();
        assert!(first.facts.namespace.as_ptr() == cache.strings.get("one").unwrap().as_ptr());
        cache.begin_relist();
        apply(&mut cache, &pod("a", "one", Some("j1")));
        let gone = cache.end_relist();
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].0.to_string(), "two/b");
        assert_eq!(cache.len(), 1);
        drop(gone);
        cache.sweep();
        assert!(
            !cache.strings.contains("two"),
            "no pod is in `two` any more"
        );
        assert_eq!(cache.owners.len(), 1);
    }

    #[test]
    fn a_pod_without_name_or_uid_is_not_cached() {
        let mut cache: Cache<()> = Cache::default();
        let config = Config::default();
        let unnamed: SandboxPod =
            serde_json::from_value(json!({"metadata": {"uid": "u"}})).unwrap();
        let no_uid: SandboxPod =
            serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
        assert!(cache.apply(&unnamed, &config, "ct").is_none());
        assert!(cache.apply(&no_uid, &config, "ct").is_none());
        assert!(cache.is_empty());
    }
}
