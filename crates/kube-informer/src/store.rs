//! The cache: a thread-safe map of key → `Arc<K>` with secondary indexes kept in step.
//!
//! [`Store`] (alias [`Indexer`]) is what listers and controllers read and what the informer
//! writes. It is a cheap-to-clone handle; every clone sees the same cache.
//!
//! # Guarantees
//! - **Readers never block each other** (a read-write lock) and **never see a half-applied
//!   write**: an add, update or delete changes the map and every index under one write lock;
//!   [`Store::replace`] builds the whole new cache and its indexes *outside* the lock and swaps
//!   it in, so the write lock is held for a pointer swap, not for a relist.
//! - **Objects are shared, never copied**: the store hands out `Arc<K>`. Nothing can mutate a
//!   cached object through such a reference, so client-go's cache-mutation detector
//!   (`KUBE_CACHE_MUTATION_DETECTOR`) has no reason to exist here.
//! - **One copy of each key string**: the map and every index bucket share the same
//!   [`ObjectKey`] allocation.

use std::{fmt, sync::Arc};

use kube::Resource;
use parking_lot::RwLock;

use crate::{
    FastMap, KeyError, ObjectKey,
    fifo::KnownObjects,
    index::{IndexError, Indexers, Indices, Slot},
    meta_namespace_key,
};

/// A thread-safe, indexed cache of `Arc<K>` by [`ObjectKey`].
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::core::ObjectMeta;
/// use kube_informer::{Indexers, Store, NAMESPACE_INDEX};
///
/// let store = Store::new(Indexers::new().namespace());
/// let cm = |ns: &str, name: &str| Arc::new(ConfigMap {
///     metadata: ObjectMeta { namespace: Some(ns.into()), name: Some(name.into()), ..Default::default() },
///     ..Default::default()
/// });
/// store.add(cm("default", "a"))?;
/// store.add(cm("default", "b"))?;
/// store.add(cm("kube-system", "c"))?;
///
/// assert_eq!(store.len(), 3);
/// assert!(store.get_by_key("default/a").is_some());
/// assert_eq!(store.by_index(NAMESPACE_INDEX, "default")?.len(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[doc(alias = "ThreadSafeStore")]
pub struct Store<K> {
    state: Arc<RwLock<State<K>>>,
}

/// client-go's name for a store with indexes. In kube-informer every [`Store`] can carry
/// indexes, so the two are one type.
pub type Indexer<K> = Store<K>;

struct State<K> {
    /// The objects, each with its key, at stable slots.
    slab: Slab<K>,
    /// Key → slot. Shares each key's allocation with the slab.
    slots: FastMap<ObjectKey, Slot>,
    indices: Indices<K>,
    /// Bumped whenever index functions are added, so a `replace` that built its indexes with
    /// an older set of functions can tell.
    indexers_generation: u64,
    resource_version: String,
}

impl<K> State<K> {
    fn insert(&mut self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        if let Some(&slot) = self.slots.get(key.as_str()) {
            // Keep the key allocation the store already has: one copy of each key string.
            let entry = &mut self.slab.entries[slot as usize];
            let old = std::mem::replace(&mut entry.as_mut().expect("occupied").1, obj);
            let new = &entry.as_ref().expect("occupied").1;
            self.indices
                .update(slot, Some(old.as_ref()), Some(new.as_ref()));
            return Some(old);
        }
        let slot = self.slab.insert(key.clone(), obj);
        self.slots.insert(key, slot);
        let new = &self.slab.get(slot).1;
        self.indices.update(slot, None, Some(new.as_ref()));
        None
    }

    fn delete(&mut self, key: &str) -> Option<Arc<K>> {
        let slot = self.slots.remove(key)?;
        let (_, old) = self.slab.remove(slot);
        self.indices.update(slot, Some(old.as_ref()), None);
        Some(old)
    }

    fn get(&self, key: &str) -> Option<&Arc<K>> {
        self.slots.get(key).map(|&slot| &self.slab.get(slot).1)
    }

    /// Every `(slot, object)`, for building indexes.
    fn objects(&self) -> impl Iterator<Item = (Slot, &K)> + Clone {
        self.slab.iter().map(|(slot, _, obj)| (slot, obj.as_ref()))
    }

    /// A state holding `keyed` (later duplicates win), indexed by `indexers`.
    fn build(keyed: Vec<(ObjectKey, Arc<K>)>, indexers: Indexers<K>) -> Self {
        let mut slab = Slab::with_capacity(keyed.len());
        let mut slots = FastMap::with_capacity_and_hasher(keyed.len(), Default::default());
        for (key, obj) in keyed {
            match slots.get(key.as_str()) {
                Some(&slot) => slab.entries[slot as usize] = Some((key, obj)),
                None => {
                    let slot = slab.insert(key.clone(), obj);
                    slots.insert(key, slot);
                }
            }
        }
        let mut state = Self {
            slab,
            slots,
            indices: Indices::build(Indexers::new(), std::iter::empty()),
            indexers_generation: 0,
            resource_version: String::new(),
        };
        state.indices = Indices::build(indexers, state.objects());
        state
    }
}

/// Writes applied under one write lock; see [`Store::transaction`].
pub struct Transaction<'a, K> {
    state: &'a mut State<K>,
}

impl<K> Transaction<'_, K> {
    /// As [`Store::insert`].
    pub fn insert(&mut self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        self.state.insert(key, obj)
    }

    /// As [`Store::delete_by_key`].
    pub fn delete_by_key(&mut self, key: &str) -> Option<Arc<K>> {
        self.state.delete(key)
    }

    /// As [`Store::get_by_key`].
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.state.get(key).cloned()
    }
}

impl<K> fmt::Debug for Transaction<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction")
            .field("len", &self.state.slots.len())
            .finish()
    }
}

/// Objects at stable positions, so index buckets can name them by a `u32`.
struct Slab<K> {
    entries: Vec<Option<(ObjectKey, Arc<K>)>>,
    free: Vec<Slot>,
}

impl<K> Slab<K> {
    fn with_capacity(n: usize) -> Self {
        Self {
            entries: Vec::with_capacity(n),
            free: Vec::new(),
        }
    }

    fn insert(&mut self, key: ObjectKey, obj: Arc<K>) -> Slot {
        match self.free.pop() {
            Some(slot) => {
                self.entries[slot as usize] = Some((key, obj));
                slot
            }
            None => {
                let slot = Slot::try_from(self.entries.len())
                    .expect("a store holds at most u32::MAX objects");
                self.entries.push(Some((key, obj)));
                slot
            }
        }
    }

    fn remove(&mut self, slot: Slot) -> (ObjectKey, Arc<K>) {
        let entry = self.entries[slot as usize].take();
        self.free.push(slot);
        entry.expect("the key map only names occupied slots")
    }

    fn get(&self, slot: Slot) -> &(ObjectKey, Arc<K>) {
        self.entries[slot as usize]
            .as_ref()
            .expect("the key map and the indexes only name occupied slots")
    }

    fn iter(&self) -> impl Iterator<Item = (Slot, &ObjectKey, &Arc<K>)> + Clone {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(slot, e)| e.as_ref().map(|(k, o)| (slot as Slot, k, o)))
    }
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
        }
    }
}

impl<K> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state.read();
        f.debug_struct("Store")
            .field("len", &state.slots.len())
            .field("indexers", state.indices.indexers())
            .field("resource_version", &state.resource_version)
            .finish()
    }
}

impl<K> Default for Store<K> {
    fn default() -> Self {
        Self::new(Indexers::new())
    }
}

impl<K> Store<K> {
    /// An empty store maintaining the given indexes.
    pub fn new(indexers: Indexers<K>) -> Self {
        Self {
            state: Arc::new(RwLock::new(State::build(Vec::new(), indexers))),
        }
    }

    /// The object stored under `key`.
    #[doc(alias = "GetByKey")]
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.state.read().get(key).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.state.read().slots.contains_key(key)
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let state = self.state.read();
        let mut out = Vec::with_capacity(state.slots.len());
        out.extend(state.slab.iter().map(|(_, _, obj)| obj.clone()));
        out
    }

    /// Every key, in no particular order.
    #[doc(alias = "ListKeys")]
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let state = self.state.read();
        state.slab.iter().map(|(_, key, _)| key.clone()).collect()
    }

    /// Every `(key, object)` pair, taken at one instant.
    pub fn entries(&self) -> Vec<(ObjectKey, Arc<K>)> {
        let state = self.state.read();
        let entries = state.slab.iter();
        entries.map(|(_, k, o)| (k.clone(), o.clone())).collect()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.state.read().slots.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.state.read().slots.is_empty()
    }

    /// The resource version given to the last [`Store::replace`] (empty before the first).
    pub fn resource_version(&self) -> String {
        self.state.read().resource_version.clone()
    }

    /// Stores `obj` under `key`, replacing any object there, and moves it between index
    /// buckets as its index values changed. Returns the object it replaced.
    ///
    /// For callers that already hold the key (the informer has it from the FIFO); `key` must
    /// be the object's key.
    pub fn insert(&self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        self.state.write().insert(key, obj)
    }

    /// Removes the object stored under `key` from the map and from every index. Returns it.
    pub fn delete_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.state.write().delete(key)
    }

    /// Applies several writes under one write lock: readers see all of them or none, and a
    /// stream of writes cannot be starved by many readers (client-go batches up to 1000 keys
    /// per lock for that reason, kubernetes/kubernetes#130767).
    ///
    /// Keep `write` short: readers wait for it.
    pub fn transaction<R>(&self, write: impl FnOnce(&mut Transaction<'_, K>) -> R) -> R {
        let mut guard = self.state.write();
        write(&mut Transaction { state: &mut guard })
    }

    /// The objects whose index function `index_name` produced `value`.
    #[doc(alias = "ByIndex")]
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let state = self.state.read();
        let Some(bucket) = state.indices.bucket(index_name, value)? else {
            return Ok(Vec::new());
        };
        Ok(bucket
            .iter()
            .map(|&slot| state.slab.get(slot).1.clone())
            .collect())
    }

    /// The keys of the objects whose index function `index_name` produced `value`.
    #[doc(alias = "IndexKeys")]
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, IndexError> {
        let state = self.state.read();
        let Some(bucket) = state.indices.bucket(index_name, value)? else {
            return Ok(Vec::new());
        };
        Ok(bucket
            .iter()
            .map(|&slot| state.slab.get(slot).0.clone())
            .collect())
    }

    /// Every value of index `index_name` that at least one cached object has.
    #[doc(alias = "ListIndexFuncValues")]
    pub fn list_index_func_values(&self, index_name: &str) -> Result<Vec<String>, IndexError> {
        self.state.read().indices.values(index_name)
    }

    /// The names of the registered index functions.
    #[doc(alias = "GetIndexers")]
    pub fn indexer_names(&self) -> Vec<String> {
        let state = self.state.read();
        state
            .indices
            .indexers()
            .names()
            .map(str::to_owned)
            .collect()
    }

    /// Registers more index functions. Allowed at any time: when the store already holds
    /// objects, the new indexes are built over them before this returns. A name that is
    /// already registered (or given twice) is refused and nothing is added.
    #[doc(alias = "AddIndexers")]
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), IndexError> {
        let mut guard = self.state.write();
        let state = &mut *guard;
        let objects = state.slab.iter().map(|(slot, _, obj)| (slot, obj.as_ref()));
        state.indices.add(indexers, objects)?;
        state.indexers_generation += 1;
        Ok(())
    }

    /// Client-go's `Resync` on a store: there is nothing to do for an in-memory cache (the
    /// FIFO's resync is the one that replays objects). Kept so the API reads the same.
    pub fn resync(&self) {}
}

impl<K: Resource> Store<K> {
    /// Adds `obj` (or replaces the object with the same key).
    pub fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = meta_namespace_key(obj.as_ref())?;
        self.insert(key, obj);
        Ok(())
    }

    /// Updates `obj`: the same as [`Store::add`], the object under its key is replaced.
    pub fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.add(obj)
    }

    /// Removes the object with `obj`'s key, returning what was cached.
    pub fn delete(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        let key = meta_namespace_key(obj)?;
        Ok(self.delete_by_key(key.as_str()))
    }

    /// The cached object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        let key = meta_namespace_key(obj)?;
        Ok(self.get_by_key(key.as_str()))
    }

    /// Replaces the whole content with `items` (a relist), atomically.
    ///
    /// The new map and its indexes are built before the write lock is taken, so readers keep
    /// reading the old cache until the swap and never see a mix. If any item has no key,
    /// nothing changes and the error names it. When two items share a key, the later wins.
    pub fn replace(
        &self,
        items: Vec<Arc<K>>,
        resource_version: impl Into<String>,
    ) -> Result<(), KeyError> {
        let keyed = crate::key::key_all(items)?;
        let (indexers, generation) = {
            let state = self.state.read();
            (state.indices.indexers().clone(), state.indexers_generation)
        };
        let mut new = State::build(keyed, indexers);
        let mut guard = self.state.write();
        if guard.indexers_generation != generation {
            // Index functions were added while we built: rebuild with the current set.
            new.indices = Indices::build(guard.indices.indexers().clone(), new.objects());
        }
        new.indexers_generation = guard.indexers_generation;
        new.resource_version = resource_version.into();
        let old = std::mem::replace(&mut *guard, new);
        drop(guard);
        // The old cache is freed here, after the lock is released.
        drop(old);
        Ok(())
    }
}

impl<K: Send + Sync> KnownObjects<K> for Store<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        Store::list_keys(self)
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        Store::get_by_key(self, key)
    }

    fn entries(&self) -> Vec<(ObjectKey, Arc<K>)> {
        Store::entries(self)
    }
}

#[cfg(test)]
impl<K> Store<K> {
    /// For tests: every index as name → value → sorted keys.
    pub(crate) fn dump_indices(
        &self,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, Vec<String>>> {
        let state = self.state.read();
        let key = |slot: &Slot| state.slab.get(*slot).0.to_string();
        let dump = state.indices.raw().map(|(name, index)| {
            let buckets = index.iter().map(|(value, slots)| {
                let mut keys: Vec<String> = slots.iter().map(key).collect();
                keys.sort();
                (value.clone(), keys)
            });
            (name.to_owned(), buckets.collect())
        });
        dump.collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::ObjectMeta;
    use proptest::prelude::*;

    use super::*;
    use crate::NAMESPACE_INDEX;

    /// A config map whose labels drive the test indexes: `node` (one value) and `tag-*`
    /// (zero or more values).
    fn cm(ns: &str, name: &str, node: &str, tags: &[&str]) -> Arc<ConfigMap> {
        let mut labels: BTreeMap<String, String> = tags
            .iter()
            .map(|t| (format!("tag-{t}"), String::new()))
            .collect();
        labels.insert("node".into(), node.into());
        Arc::new(ConfigMap {
            metadata: ObjectMeta {
                namespace: (!ns.is_empty()).then(|| ns.into()),
                name: Some(name.into()),
                labels: Some(labels),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    fn by_node(obj: &ConfigMap) -> Vec<String> {
        let labels = obj.metadata.labels.as_ref();
        labels
            .and_then(|l| l.get("node"))
            .cloned()
            .into_iter()
            .collect()
    }

    fn by_tag(obj: &ConfigMap) -> Vec<String> {
        let labels = obj.metadata.labels.iter().flatten();
        labels
            .filter_map(|(k, _)| k.strip_prefix("tag-").map(str::to_owned))
            .collect()
    }

    fn indexers() -> Indexers<ConfigMap> {
        Indexers::new()
            .namespace()
            .index("by-node", by_node)
            .index("by-tag", by_tag)
    }

    fn keys_of(objs: Vec<Arc<ConfigMap>>) -> BTreeSet<String> {
        let key = |o: &Arc<ConfigMap>| meta_namespace_key(o.as_ref()).unwrap().to_string();
        objs.iter().map(key).collect()
    }

    #[test]
    fn add_get_update_delete() {
        let store = Store::new(indexers());
        store.add(cm("ns", "a", "n1", &[])).unwrap();
        assert_eq!(store.len(), 1);
        let got = store.get_by_key("ns/a").unwrap();
        assert_eq!(by_node(&got), ["n1"]);
        assert!(store.get(&cm("ns", "a", "other", &[])).unwrap().is_some());

        store.update(cm("ns", "a", "n2", &[])).unwrap();
        assert_eq!(by_node(&store.get_by_key("ns/a").unwrap()), ["n2"]);
        assert_eq!(store.len(), 1);

        let removed = store.delete(&cm("ns", "a", "ignored", &[])).unwrap();
        assert_eq!(by_node(&removed.unwrap()), ["n2"]);
        assert!(store.is_empty());
        assert!(store.delete_by_key("ns/a").is_none());
        assert_eq!(
            store.list_index_func_values("by-node").unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn reads_hand_out_the_stored_arc_not_a_copy() {
        let store = Store::default();
        let obj = cm("ns", "a", "n1", &[]);
        store.add(obj.clone()).unwrap();
        assert!(Arc::ptr_eq(&store.get_by_key("ns/a").unwrap(), &obj));
        assert!(Arc::ptr_eq(&store.list()[0], &obj));
    }

    #[test]
    fn an_object_moves_between_buckets_and_empty_buckets_disappear() {
        let store = Store::new(indexers());
        store.add(cm("ns", "a", "n1", &["x", "y"])).unwrap();
        store.add(cm("ns", "b", "n1", &["y"])).unwrap();
        store.update(cm("ns", "a", "n2", &["y", "z"])).unwrap();

        assert_eq!(
            keys_of(store.by_index("by-node", "n1").unwrap()),
            ["ns/b".into()].into()
        );
        assert_eq!(
            keys_of(store.by_index("by-node", "n2").unwrap()),
            ["ns/a".into()].into()
        );
        assert!(store.by_index("by-tag", "x").unwrap().is_empty());
        let mut tags = store.list_index_func_values("by-tag").unwrap();
        tags.sort();
        assert_eq!(tags, ["y", "z"], "the emptied bucket 'x' must be gone");

        store.delete_by_key("ns/b");
        assert_eq!(store.list_index_func_values("by-node").unwrap(), ["n2"]);
    }

    #[test]
    fn index_keys_share_the_stored_key_allocation() {
        let store = Store::new(indexers());
        store.add(cm("ns", "a", "n1", &["t"])).unwrap();
        // A second write computes a fresh key; the store must keep its first allocation.
        store.update(cm("ns", "a", "n2", &["t"])).unwrap();
        let map_key = store.list_keys().pop().unwrap();
        for (index, value) in [("by-node", "n2"), ("by-tag", "t"), (NAMESPACE_INDEX, "ns")] {
            let index_key = store.index_keys(index, value).unwrap().pop().unwrap();
            assert!(Arc::ptr_eq(&map_key.0, &index_key.0), "{index}");
        }
    }

    #[test]
    fn unknown_indexes_are_a_clear_error() {
        let store = Store::new(indexers());
        let err = store.by_index("nope", "v").unwrap_err();
        assert_eq!(
            err,
            IndexError::NoSuchIndex {
                name: "nope".into()
            }
        );
        assert!(err.to_string().contains("\"nope\""));
        assert!(store.index_keys("nope", "v").is_err());
        assert!(store.list_index_func_values("nope").is_err());
    }

    #[test]
    fn indexers_added_late_are_built_over_existing_objects() {
        let store = Store::new(Indexers::new().namespace());
        store.add(cm("a", "x", "n1", &[])).unwrap();
        store.add(cm("b", "y", "n1", &[])).unwrap();
        store
            .add_indexers(Indexers::new().index("by-node", by_node))
            .unwrap();
        assert_eq!(store.by_index("by-node", "n1").unwrap().len(), 2);
        // ... and kept up to date afterwards.
        store.update(cm("a", "x", "n2", &[])).unwrap();
        assert_eq!(store.by_index("by-node", "n1").unwrap().len(), 1);
        assert_eq!(store.indexer_names(), [NAMESPACE_INDEX, "by-node"]);
    }

    #[test]
    fn a_conflicting_indexer_name_is_refused_and_nothing_is_added() {
        let store = Store::new(Indexers::new().namespace());
        let err = store
            .add_indexers(Indexers::new().index("fresh", by_node).namespace())
            .unwrap_err();
        assert_eq!(
            err,
            IndexError::Conflict {
                name: NAMESPACE_INDEX.into()
            }
        );
        assert_eq!(
            store.indexer_names(),
            [NAMESPACE_INDEX],
            "'fresh' must not be half-added"
        );
    }

    #[test]
    fn replace_swaps_the_whole_content_and_rebuilds_indexes() {
        let store = Store::new(indexers());
        store.add(cm("ns", "old", "n1", &["t"])).unwrap();
        store
            .replace(
                vec![cm("ns", "new", "n2", &[]), cm("", "cluster", "n2", &[])],
                "42",
            )
            .unwrap();
        assert_eq!(
            keys_of(store.list()),
            ["cluster".into(), "ns/new".into()].into()
        );
        assert!(store.by_index("by-node", "n1").unwrap().is_empty());
        assert_eq!(store.by_index("by-node", "n2").unwrap().len(), 2);
        assert!(store.list_index_func_values("by-tag").unwrap().is_empty());
        assert_eq!(store.resource_version(), "42");
    }

    #[test]
    fn replace_with_a_nameless_item_changes_nothing() {
        let store = Store::new(indexers());
        store.add(cm("ns", "keep", "n1", &[])).unwrap();
        let nameless = Arc::new(ConfigMap::default());
        let err = store
            .replace(vec![cm("ns", "new", "n1", &[]), nameless], "2")
            .unwrap_err();
        assert!(matches!(err, KeyError::MissingName { .. }));
        assert_eq!(keys_of(store.list()), ["ns/keep".into()].into());
        assert_eq!(store.resource_version(), "");
    }

    // ---- model-based property test -------------------------------------------------

    #[derive(Debug, Clone)]
    enum Op {
        Add(Arc<ConfigMap>),
        Delete(String),
        Replace(Vec<Arc<ConfigMap>>),
    }

    fn arb_obj() -> impl Strategy<Value = Arc<ConfigMap>> {
        let ns = prop::sample::select(vec!["", "x", "y"]);
        let name = prop::sample::select(vec!["a", "b", "c", "d"]);
        let node = prop::sample::select(vec!["n1", "n2", "n3"]);
        let tags = prop::sample::subsequence(vec!["p", "q", "r"], 0..=3);
        (ns, name, node, tags).prop_map(|(ns, name, node, tags)| cm(ns, name, node, &tags))
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => arb_obj().prop_map(Op::Add),
            3 => arb_obj().prop_map(|o| Op::Delete(meta_namespace_key(o.as_ref()).unwrap().to_string())),
            1 => prop::collection::vec(arb_obj(), 0..6).prop_map(Op::Replace),
        ]
    }

    type Dump = BTreeMap<String, BTreeMap<String, Vec<String>>>;

    /// The indexes recomputed from scratch over the model, the naive way.
    fn naive_indices(model: &BTreeMap<String, Arc<ConfigMap>>) -> Dump {
        type Func = fn(&ConfigMap) -> Vec<String>;
        let funcs: [(&str, Func); 3] = [
            (NAMESPACE_INDEX, crate::namespace_index::<ConfigMap>),
            ("by-node", by_node),
            ("by-tag", by_tag),
        ];
        funcs
            .iter()
            .map(|(name, func)| {
                let mut index: BTreeMap<String, Vec<String>> = BTreeMap::new();
                for (key, obj) in model {
                    for value in func(obj) {
                        index.entry(value).or_default().push(key.clone());
                    }
                }
                index.values_mut().for_each(|keys| keys.sort());
                (name.to_string(), index)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn store_and_indexes_match_a_naive_model(ops in prop::collection::vec(arb_op(), 1..60)) {
            let store = Store::new(indexers());
            let mut model: BTreeMap<String, Arc<ConfigMap>> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Add(obj) => {
                        let key = meta_namespace_key(obj.as_ref()).unwrap().to_string();
                        store.add(obj.clone()).unwrap();
                        model.insert(key, obj);
                    }
                    Op::Delete(key) => {
                        let removed = store.delete_by_key(&key);
                        prop_assert_eq!(removed.is_some(), model.remove(&key).is_some());
                    }
                    Op::Replace(list) => {
                        store.replace(list.clone(), "1").unwrap();
                        model = list
                            .into_iter()
                            .map(|o| (meta_namespace_key(o.as_ref()).unwrap().to_string(), o))
                            .collect();
                    }
                }
                let keys: BTreeSet<String> = store.list_keys().iter().map(|k| k.to_string()).collect();
                prop_assert_eq!(&keys, &model.keys().cloned().collect::<BTreeSet<_>>());
                for (key, obj) in &model {
                    prop_assert!(Arc::ptr_eq(&store.get_by_key(key).unwrap(), obj));
                }
                prop_assert_eq!(store.dump_indices(), naive_indices(&model));
            }
        }
    }

    // ---- concurrency ---------------------------------------------------------------

    /// One writer moves objects between nodes and swaps whole generations with `replace`;
    /// readers on other threads check that every read is self-consistent: each object a
    /// bucket returns has that bucket's value, and a generation is seen whole or not at all.
    #[test]
    fn concurrent_readers_never_see_a_half_applied_write() {
        const N: usize = 200;
        let gen_index = |o: &ConfigMap| {
            by_tag(o)
                .into_iter()
                .filter(|t| t.starts_with("gen"))
                .collect()
        };
        let store = Store::new(indexers().index("gen", gen_index));
        let generation = |g: &str| {
            (0..N)
                .map(|i| cm("ns", &format!("o{i}"), "n1", &[g]))
                .collect::<Vec<_>>()
        };
        store.replace(generation("gen-a"), "1").unwrap();

        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (store, stop) = (store.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut reads = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads < 100 {
                        for node in ["n1", "n2"] {
                            for obj in store.by_index("by-node", node).unwrap() {
                                assert_eq!(by_node(&obj), [node]);
                            }
                        }
                        for g in ["gen-a", "gen-b"] {
                            let seen = store.by_index("gen", g).unwrap().len();
                            assert!(seen == 0 || seen == N, "saw {seen} of {N} objects of {g}");
                        }
                        // One read of the whole cache holds exactly one whole generation.
                        let list = store.list();
                        let a = list
                            .iter()
                            .filter(|o| by_tag(o).contains(&"gen-a".to_owned()))
                            .count();
                        assert!(
                            (a, list.len()) == (N, N) || (a, list.len()) == (0, N),
                            "one list() saw {a} gen-a objects among {}",
                            list.len()
                        );
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();

        for round in 0..200 {
            for i in (0..N).step_by(7) {
                let g = if round % 2 == 0 { "gen-a" } else { "gen-b" };
                let node = if round % 4 < 2 { "n2" } else { "n1" };
                // Move within the current generation, keeping it whole.
                if store
                    .get_by_key(&format!("ns/o{i}"))
                    .is_some_and(|o| by_tag(&o).contains(&g.to_owned()))
                {
                    store
                        .update(cm("ns", &format!("o{i}"), node, &[g]))
                        .unwrap();
                }
            }
            let next = if round % 2 == 0 { "gen-b" } else { "gen-a" };
            store.replace(generation(next), round.to_string()).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for reader in readers {
            assert!(reader.join().expect("a reader saw an inconsistent cache") >= 100);
        }
    }
}
