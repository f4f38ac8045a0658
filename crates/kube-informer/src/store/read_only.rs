//! [`ReadOnlyStore`]: the cache as readers get it.

use std::{fmt, sync::Arc};

use super::{Inner, Store};
use crate::{IndexError, ObjectKey};

/// A read-only handle on a [`Store`]: every read, no write (a [`Store`] is one of these
/// plus the writes: it dereferences to it, so every read below works on both). An
/// informer hands these out
/// ([`SharedIndexInformer::store`](crate::informer::SharedIndexInformer::store)), so the cache
/// is written only by the informer, from the API server's events.
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::core::ObjectMeta;
/// use kube_informer::{ReadOnlyStore, Store};
///
/// let store: Store<ConfigMap> = Store::default();
/// let reader: ReadOnlyStore<ConfigMap> = store.read_only();
/// store.add(Arc::new(ConfigMap {
///     metadata: ObjectMeta { name: Some("a".into()), ..Default::default() },
///     ..Default::default()
/// }))?;
/// assert!(reader.get_by_key("a").is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// It has no writes:
///
/// ```compile_fail
/// # use std::sync::Arc;
/// # use k8s_openapi::api::core::v1::ConfigMap;
/// # use kube_informer::{ReadOnlyStore, Store};
/// let reader: ReadOnlyStore<ConfigMap> = Store::default().read_only();
/// reader.add(Arc::new(ConfigMap::default())); // no such method
/// ```
pub struct ReadOnlyStore<K> {
    pub(super) inner: Arc<Inner<K>>,
}

impl<K> ReadOnlyStore<K> {
    /// The object stored under `key`.
    #[doc(alias = "GetByKey")]
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.inner.state.read().get(key).cloned()
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.inner.state.read().slots.contains_key(key)
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        let state = self.inner.state.read();
        let mut out = Vec::with_capacity(state.slots.len());
        out.extend(state.slab.iter().map(|(_, _, obj)| obj.clone()));
        out
    }

    /// Every key, in no particular order.
    #[doc(alias = "ListKeys")]
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        let state = self.inner.state.read();
        state.slab.iter().map(|(_, key, _)| key.clone()).collect()
    }

    /// Every `(key, object)` pair, taken at one instant.
    pub fn entries(&self) -> Vec<(ObjectKey, Arc<K>)> {
        let state = self.inner.state.read();
        let entries = state.slab.iter();
        entries.map(|(_, k, o)| (k.clone(), o.clone())).collect()
    }

    /// Every object and the cache's resourceVersion, taken at one instant (what a
    /// snapshot writes: the objects are at least as new as the version).
    pub(crate) fn objects_at_version(&self) -> (Vec<Arc<K>>, String) {
        let state = self.inner.state.read();
        let objects = state.slab.iter().map(|(_, _, obj)| obj.clone()).collect();
        (objects, state.versions.current().to_owned())
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.inner.state.read().slots.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.state.read().slots.is_empty()
    }

    /// The objects whose index function `index_name` produced `value`.
    #[doc(alias = "ByIndex")]
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        let state = self.inner.state.read();
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
        let state = self.inner.state.read();
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
        self.inner.state.read().indices.values(index_name)
    }

    /// The names of the registered index functions.
    #[doc(alias = "GetIndexers")]
    pub fn indexer_names(&self) -> Vec<String> {
        let state = self.inner.state.read();
        let names = state.indices.indexers().names();
        names.map(str::to_owned).collect()
    }

    /// The values the index function `index_name` gives for `obj` (which need not be
    /// cached); a panicking function gives none.
    #[cfg(feature = "client-go-caches")]
    pub(crate) fn index_values(
        &self,
        index_name: &str,
        obj: &K,
    ) -> Result<Vec<String>, IndexError> {
        self.inner.state.read().indices.values_of(index_name, obj)
    }
}

impl<K> From<Store<K>> for ReadOnlyStore<K> {
    fn from(store: Store<K>) -> Self {
        store.reader
    }
}

impl<K> Clone for ReadOnlyStore<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K> fmt::Debug for ReadOnlyStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.inner.state.read();
        f.debug_struct("ReadOnlyStore")
            .field("len", &state.slots.len())
            .field("indexers", state.indices.indexers())
            .field("resource_version", &state.versions.current())
            .finish()
    }
}
