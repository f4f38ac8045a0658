//! [`Transaction`]: several writes under one write lock of the store.

use std::{fmt, sync::Arc};

use kube::Resource;

use super::State;
use crate::ObjectKey;

/// Writes applied under one write lock; see [`Store::transaction`](super::Store::transaction).
pub(crate) struct Transaction<'a, K> {
    state: &'a mut State<K>,
    version_changed: bool,
}

impl<'a, K> Transaction<'a, K> {
    pub(super) fn new(state: &'a mut State<K>) -> Self {
        Self {
            state,
            version_changed: false,
        }
    }

    pub(super) fn version_changed(&self) -> bool {
        self.version_changed
    }

    /// Stores `obj` under `key` (which the caller has computed from it), returning what it
    /// replaced.
    pub(crate) fn insert(&mut self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        self.state.insert(key, obj)
    }

    /// As [`Store::delete_by_key`](super::Store::delete_by_key).
    pub(crate) fn delete_by_key(&mut self, key: &str) -> Option<Arc<K>> {
        self.state.delete(key)
    }

    /// As [`Store::get_by_key`](crate::ReadOnlyStore::get_by_key).
    pub(crate) fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.state.get(key).cloned()
    }

    /// Sets the store's resourceVersion (the version the cache has now reached, in every
    /// namespace it watches); those waiting for it are woken when the transaction ends. An
    /// empty version is ignored.
    pub(crate) fn set_resource_version(&mut self, resource_version: &str) {
        self.reach(None, resource_version);
    }

    /// The watch of `namespace` has reached `resource_version` (see
    /// [`Store::track_namespaces`](super::Store::track_namespaces); on a cache fed by one
    /// watch, the same as [`set_resource_version`](Self::set_resource_version)).
    pub(crate) fn set_resource_version_in(&mut self, namespace: &str, resource_version: &str) {
        self.reach(Some(namespace), resource_version);
    }

    fn reach(&mut self, namespace: Option<&str>, resource_version: &str) {
        if self.state.versions.reach(namespace, resource_version) {
            self.version_changed = true;
        }
    }
}

impl<K: Resource> Transaction<'_, K> {
    /// Adds or replaces `obj`, keyed by its own key; returns what it replaced. Fails, and
    /// changes nothing, if the object has no name. (The informer puts objects by the key it
    /// already has; the tests add them.)
    #[cfg(test)]
    pub(crate) fn add(&mut self, obj: Arc<K>) -> Result<Option<Arc<K>>, crate::KeyError> {
        let key = crate::meta_namespace_key(obj.as_ref())?;
        Ok(self.put(key, obj))
    }

    /// Stores `obj` under `key` (its key) and takes its resourceVersion.
    pub(super) fn put(&mut self, key: ObjectKey, obj: Arc<K>) -> Option<Arc<K>> {
        self.set_resource_version_of(obj.as_ref());
        self.state.insert(key, obj)
    }

    /// Takes `obj`'s resourceVersion as the store's (as its namespace's, for a cache fed
    /// by one watch per namespace), if it has one.
    pub(crate) fn set_resource_version_of(&mut self, obj: &K) {
        let meta = obj.meta();
        if let Some(rv) = meta.resource_version.as_deref() {
            self.reach(meta.namespace.as_deref(), rv);
        }
    }
}

impl<K> fmt::Debug for Transaction<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Transaction")
            .field("len", &self.state.slots.len())
            .field("resource_version", &self.state.versions.current())
            .finish()
    }
}
