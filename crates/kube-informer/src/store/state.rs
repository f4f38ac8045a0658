//! The store's state behind its lock: objects in a slab at stable slots, the key map, and
//! the indexes, kept in step by every write.

use std::sync::Arc;

use crate::{
    FastMap, ObjectKey,
    index::{IndexFailure, Indexers, Indices, Slot},
};

/// Index failures kept for [`Store::take_index_failures`](super::Store::take_index_failures)
/// when nobody takes them; older ones are dropped beyond this.
const KEPT_FAILURES: usize = 256;

pub(super) struct State<K> {
    /// The objects, each with its key, at stable slots.
    pub(super) slab: Slab<K>,
    /// Key → slot. Shares each key's allocation with the slab.
    pub(super) slots: FastMap<ObjectKey, Slot>,
    pub(super) indices: Indices<K>,
    /// Bumped whenever index functions are added, so a `replace` that built its indexes with
    /// an older set of functions can tell.
    pub(super) indexers_generation: u64,
    pub(super) versions: super::version::Versions,
    /// Index functions that panicked, not yet taken.
    pub(super) failures: Vec<IndexFailure>,
}

impl<K> State<K> {
    pub(super) fn insert(&mut self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        if let Some(&slot) = self.slots.get(key.as_str()) {
            // Keep the key allocation the store already has: one copy of each key string.
            let entry = &mut self.slab.entries[slot as usize];
            let (_, stored) = entry.as_mut().expect("the key map names occupied slots");
            let old = std::mem::replace(stored, obj);
            let failed = self
                .indices
                .update(slot, Some(old.as_ref()), Some(stored.as_ref()));
            self.record(failed, &key);
            return Some(old);
        }
        let slot = self.slab.insert(key.clone(), obj);
        self.slots.insert(key.clone(), slot);
        let new = &self.slab.get(slot).1;
        let failed = self.indices.update(slot, None, Some(new.as_ref()));
        self.record(failed, &key);
        None
    }

    pub(super) fn delete(&mut self, key: &str) -> Option<Arc<K>> {
        let slot = self.slots.remove(key)?;
        let (key, old) = self.slab.remove(slot);
        let failed = self.indices.update(slot, Some(old.as_ref()), None);
        self.record(failed, &key);
        Some(old)
    }

    pub(super) fn get(&self, key: &str) -> Option<&Arc<K>> {
        self.slots.get(key).map(|&slot| &self.slab.get(slot).1)
    }

    /// Every `(slot, object)`, for building indexes.
    pub(super) fn objects(&self) -> impl Iterator<Item = (Slot, &K)> + Clone {
        self.slab.iter().map(|(slot, _, obj)| (slot, obj.as_ref()))
    }

    /// Keeps the failures of index functions on `key`'s object.
    fn record(&mut self, failed: Vec<(Arc<str>, String)>, key: &ObjectKey) {
        for (index, message) in failed {
            self.keep(IndexFailure::new(index, key.clone(), message));
        }
    }

    /// Keeps failures found while building indexes over the slab.
    pub(super) fn record_built(&mut self, failed: Vec<(Arc<str>, Slot, String)>) {
        for (index, slot, message) in failed {
            let key = self.slab.get(slot).0.clone();
            self.keep(IndexFailure::new(index, key, message));
        }
    }

    fn keep(&mut self, failure: IndexFailure) {
        tracing::error!(
            index = %failure.index,
            object = %failure.key,
            "index function panicked; the object is in no bucket of that index: {}",
            failure.message
        );
        if self.failures.len() >= KEPT_FAILURES {
            self.failures.remove(0);
        }
        self.failures.push(failure);
    }

    /// A state holding `keyed` (later duplicates win), indexed by `indexers`.
    pub(super) fn build(keyed: Vec<(ObjectKey, Arc<K>)>, indexers: Indexers<K>) -> Self {
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
            indices: Indices::build(Indexers::new(), std::iter::empty()).0,
            indexers_generation: 0,
            versions: Default::default(),
            failures: Vec::new(),
        };
        state.rebuild_indices(indexers);
        state
    }

    /// Builds the indexes of `indexers` over every object, replacing the current ones.
    pub(super) fn rebuild_indices(&mut self, indexers: Indexers<K>) {
        let (indices, failed) = Indices::build(indexers, self.objects());
        self.indices = indices;
        self.record_built(failed);
    }
}

/// Objects at stable positions, so index buckets can name them by a `u32`.
pub(super) struct Slab<K> {
    pub(super) entries: Vec<Option<(ObjectKey, Arc<K>)>>,
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

    pub(super) fn get(&self, slot: Slot) -> &(ObjectKey, Arc<K>) {
        self.entries[slot as usize]
            .as_ref()
            .expect("the key map and the indexes only name occupied slots")
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (Slot, &ObjectKey, &Arc<K>)> + Clone {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(slot, e)| e.as_ref().map(|(k, o)| (slot as Slot, k, o)))
    }
}
