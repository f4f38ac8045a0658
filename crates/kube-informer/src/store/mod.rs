//! The cache: a thread-safe map of key → `Arc<K>` with secondary indexes kept in step.
//!
//! [`Store`] (client-go's `Indexer`) is what the informer writes; [`ReadOnlyStore`] is what it
//! hands to readers (listers, controllers), so no reader can write the cache behind the
//! informer's back. Both are cheap-to-clone handles on the same cache.
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
//! - **User code cannot corrupt it**: an index function that panics is caught; the object is
//!   kept, in no bucket of that index, and the failure is logged and kept for
//!   [`Store::take_index_failures`] (the informer reports it to its error handler).
//! - **A resourceVersion that follows the writes**: [`Store::resource_version`](crate::ReadOnlyStore::resource_version) is the
//!   version of the newest write (an object's own, a relist's, a bookmark's), as client-go
//!   1.36's `LastStoreSyncResourceVersion`; [`Store::wait_for_resource_version`](crate::ReadOnlyStore::wait_for_resource_version) waits until
//!   the cache has reached a version, so code can read its own writes. A cache fed by one
//!   watch per namespace keeps each namespace's version and reports their minimum, never
//!   a version one namespace has not reached (the table below).
//!
//! # The cache's resourceVersion, per informer shape
//!
//! Versions of different watches are not one sequence (namespace a at 100 says nothing of
//! namespace b at 95), so a cache fed by one watch per namespace keeps each namespace's
//! version ([`Store::track_namespaces`]; the informer does this for an
//! `InformerSpec` over several namespaces) and reports their **minimum**.
//!
//! | informer | what moves [`Store::resource_version`](crate::ReadOnlyStore::resource_version) | its value | [`Store::wait_for_resource_version`](crate::ReadOnlyStore::wait_for_resource_version) | [`Store::wait_for_resource_version_in`](crate::ReadOnlyStore::wait_for_resource_version_in) |
//! |---|---|---|---|---|
//! | cluster-wide, or one namespace; `RealFifo` (the default) | each applied event; a LIST's version or a streaming list's closing bookmark, once the relist is applied; each bookmark | the newest applied | returns once the cache holds every change up to the version | the same as the cache's, for any namespace |
//! | the same with `DeltaFifo` | relists and bookmarks only (its events are merged per key, so one event's version says nothing of the others queued before it) | the last relist's or bookmark's | correct; waits for the next bookmark (about one a minute on kube-apiserver) | as the cache's |
//! | several namespaces (one watch each), either queue | per namespace, as above; a relist of one namespace moves that namespace only | the minimum over the namespaces, empty until every namespace has synced | returns once **every** namespace's watch reached the version | that namespace's own version; [`VersionError::NotWatched`] for a namespace not watched |
//! | a version that is not comparable ([KEP-5504](crate::resource_version): a server with opaque versions) | kept as given | as given | refuses at once with [`VersionError::NotComparable`], also when one of several namespaces has it | the same |
//!
//! An empty version (before the first sync) satisfies no wait. Wrap waits in a timeout: a
//! version no watch ever reaches (a write outside the informer's selectors, on a server
//! without bookmarks) is waited for until the next event.

mod read_only;
mod state;
#[cfg(test)]
mod tests;
mod transaction;
mod version;

use std::{fmt, sync::Arc};

use kube::Resource;
use parking_lot::RwLock;
use tokio::sync::Notify;

pub use self::read_only::ReadOnlyStore;
use self::state::State;
pub(crate) use self::transaction::Transaction;
use crate::{
    KeyError, ObjectKey,
    fifo::KnownObjects,
    index::{IndexError, IndexFailure, Indexers},
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
/// client-go's `Indexer` too: every store can carry indexes, so the two are one type.
#[doc(alias = "ThreadSafeStore", alias = "Indexer")]
pub struct Store<K> {
    reader: ReadOnlyStore<K>,
}

/// Every read of a [`ReadOnlyStore`] works on a `Store` too: a store is its read-only
/// handle plus the writes.
impl<K> std::ops::Deref for Store<K> {
    type Target = ReadOnlyStore<K>;

    fn deref(&self) -> &ReadOnlyStore<K> {
        &self.reader
    }
}

struct Inner<K> {
    state: RwLock<State<K>>,
    /// Woken whenever the resourceVersion changes.
    version_changed: Notify,
}

/// Why [`Store::wait_for_resource_version`](crate::ReadOnlyStore::wait_for_resource_version) could not wait.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VersionError {
    /// A resourceVersion that is not comparable (not a well-formed number by KEP-5504's
    /// rules: see [`resource_version`](crate::resource_version)) cannot be compared with the
    /// cache's.
    #[error(
        "resourceVersion {0:?} is not comparable; only the API server's numeric versions (KEP-5504) can be compared"
    )]
    NotComparable(String),
    /// The cache does not watch this namespace.
    #[error("the cache does not watch the namespace {0:?}")]
    NotWatched(String),
}

impl<K> Clone for Store<K> {
    fn clone(&self) -> Self {
        Self {
            reader: self.reader.clone(),
        }
    }
}

impl<K> fmt::Debug for Store<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Store").field(&self.reader).finish()
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
            reader: ReadOnlyStore {
                inner: Arc::new(Inner {
                    state: RwLock::new(State::build(Vec::new(), indexers)),
                    version_changed: Notify::new(),
                }),
            },
        }
    }

    /// A read-only handle on this cache.
    pub fn read_only(&self) -> ReadOnlyStore<K> {
        self.reader.clone()
    }

    /// Removes the object stored under `key` from the map and from every index. Returns it.
    pub fn delete_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner.state.write().delete(key)
    }

    /// Applies several writes under one write lock: readers see all of them or none, and a
    /// stream of writes cannot be starved by many readers (client-go batches up to 1000 keys
    /// per lock for that reason, kubernetes/kubernetes#130767).
    ///
    /// Keep `write` short: readers wait for it.
    pub(crate) fn transaction<R>(&self, write: impl FnOnce(&mut Transaction<'_, K>) -> R) -> R {
        let mut guard = self.inner.state.write();
        let mut txn = Transaction::new(&mut guard);
        let result = write(&mut txn);
        let version_changed = txn.version_changed();
        drop(guard);
        if version_changed {
            self.inner.version_changed.notify_waiters();
        }
        result
    }

    /// Registers more index functions. Allowed at any time: when the store already holds
    /// objects, the new indexes are built over them before this returns. A name that is
    /// already registered (or given twice) is refused and nothing is added.
    #[doc(alias = "AddIndexers")]
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), IndexError> {
        let mut guard = self.inner.state.write();
        let state = &mut *guard;
        let objects = state.slab.iter().map(|(slot, _, obj)| (slot, obj.as_ref()));
        let failed = state.indices.add(indexers, objects)?;
        state.record_built(failed);
        state.indexers_generation += 1;
        Ok(())
    }

    /// The index functions that panicked since the last call (the newest 256 are kept).
    pub fn take_index_failures(&self) -> Vec<IndexFailure> {
        let mut state = self.inner.state.write();
        if state.failures.is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut state.failures)
    }

    /// Whether index functions have panicked since the last
    /// [`take_index_failures`](Self::take_index_failures) (a read lock only).
    pub(crate) fn has_index_failures(&self) -> bool {
        !self.inner.state.read().failures.is_empty()
    }
}

impl<K: Resource> Store<K> {
    /// Adds `obj` (or replaces the object with the same key).
    pub fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = meta_namespace_key(obj.as_ref())?;
        self.transaction(|txn| txn.put(key, obj));
        Ok(())
    }

    /// Updates `obj`: the same as [`Store::add`], the object under its key is replaced.
    pub fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.add(obj)
    }

    /// Removes the object with `obj`'s key, returning what was cached.
    pub fn delete(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        let key = meta_namespace_key(obj)?;
        Ok(self.transaction(|txn| {
            let old = txn.delete_by_key(key.as_str());
            txn.set_resource_version_of(obj);
            old
        }))
    }

    /// The cached object with `obj`'s key.
    pub fn get(&self, obj: &K) -> Result<Option<Arc<K>>, KeyError> {
        let key = meta_namespace_key(obj)?;
        Ok(self.get_by_key(key.as_str()))
    }

    /// Stores `obj` under `key`, replacing any object there, and moves it between index
    /// buckets as its index values changed. Returns the object it replaced.
    ///
    /// For callers that already hold the key; `key` must be the object's key, else nothing
    /// is stored and [`KeyError::Mismatch`] says so.
    pub fn insert(&self, key: ObjectKey, obj: Arc<K>) -> Result<Option<Arc<K>>, KeyError> {
        let actual = meta_namespace_key(obj.as_ref())?;
        if actual != key {
            return Err(KeyError::Mismatch {
                given: key.to_string(),
                actual: actual.to_string(),
            });
        }
        Ok(self.transaction(|txn| txn.put(key, obj)))
    }

    /// Replaces the whole content with `items` (a relist) at `resource_version`, atomically.
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
            let state = self.inner.state.read();
            (state.indices.indexers().clone(), state.indexers_generation)
        };
        let mut new = State::build(keyed, indexers);
        let mut guard = self.inner.state.write();
        if guard.indexers_generation != generation {
            // Index functions were added while we built: rebuild with the current set.
            new.rebuild_indices(guard.indices.indexers().clone());
        }
        new.indexers_generation = guard.indexers_generation;
        new.versions = guard.versions.clone();
        new.versions.reach(None, &resource_version.into());
        new.failures
            .splice(0..0, std::mem::take(&mut guard.failures));
        let old = std::mem::replace(&mut *guard, new);
        drop(guard);
        self.inner.version_changed.notify_waiters();
        // The old cache is freed here, after the lock is released.
        drop(old);
        Ok(())
    }
}

impl<K: Send + Sync> KnownObjects<K> for Store<K> {
    fn list_keys(&self) -> Vec<ObjectKey> {
        ReadOnlyStore::list_keys(self)
    }

    fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        ReadOnlyStore::get_by_key(self, key)
    }

    fn entries(&self) -> Vec<(ObjectKey, Arc<K>)> {
        ReadOnlyStore::entries(self)
    }

    fn bookmark(&self, resource_version: &str) {
        Store::bookmark(self, resource_version);
    }

    fn bookmark_in_namespace(&self, namespace: &str, resource_version: &str) {
        Store::bookmark_in_namespace(self, namespace, resource_version);
    }
}

#[cfg(test)]
impl<K> Store<K> {
    /// For tests: every index as name → value → sorted keys.
    pub(crate) fn dump_indices(
        &self,
    ) -> std::collections::BTreeMap<String, std::collections::BTreeMap<String, Vec<String>>> {
        let state = self.inner.state.read();
        let key = |slot: &crate::index::Slot| state.slab.get(*slot).0.to_string();
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
