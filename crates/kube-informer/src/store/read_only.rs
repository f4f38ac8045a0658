//! [`ReadOnlyStore`]: the cache as readers get it.

use std::{fmt, sync::Arc};

use super::{Store, VersionError};
use crate::{IndexError, ObjectKey};

/// A read-only handle on a [`Store`]: every read, no write. An informer hands these out
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
    store: Store<K>,
}

impl<K> ReadOnlyStore<K> {
    pub(super) fn new(store: Store<K>) -> Self {
        Self { store }
    }

    /// The object stored under `key`.
    #[doc(alias = "GetByKey")]
    pub fn get_by_key(&self, key: &str) -> Option<Arc<K>> {
        self.store.get_by_key(key)
    }

    /// Whether an object is stored under `key`.
    pub fn contains_key(&self, key: &str) -> bool {
        self.store.contains_key(key)
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.store.list()
    }

    /// Every key, in no particular order.
    #[doc(alias = "ListKeys")]
    pub fn list_keys(&self) -> Vec<ObjectKey> {
        self.store.list_keys()
    }

    /// Every `(key, object)` pair, taken at one instant.
    pub fn entries(&self) -> Vec<(ObjectKey, Arc<K>)> {
        self.store.entries()
    }

    /// How many objects are cached.
    pub fn len(&self) -> usize {
        self.store.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    /// The resourceVersion the cache has reached (see [`Store::resource_version`]).
    #[doc(alias = "LastStoreSyncResourceVersion")]
    pub fn resource_version(&self) -> String {
        self.store.resource_version()
    }

    /// Waits until the cache has reached `resource_version` (see
    /// [`Store::wait_for_resource_version`]).
    pub async fn wait_for_resource_version(
        &self,
        resource_version: &str,
    ) -> Result<(), VersionError> {
        self.store.wait_for_resource_version(resource_version).await
    }

    /// The resourceVersion the watch of `namespace` has reached (see
    /// [`Store::resource_version_in`]).
    pub fn resource_version_in(&self, namespace: &str) -> Option<String> {
        self.store.resource_version_in(namespace)
    }

    /// Waits until the watch of `namespace` has reached `resource_version` (see
    /// [`Store::wait_for_resource_version_in`]): read-your-writes on a cache of several
    /// namespaces.
    pub async fn wait_for_resource_version_in(
        &self,
        namespace: &str,
        resource_version: &str,
    ) -> Result<(), VersionError> {
        self.store
            .wait_for_resource_version_in(namespace, resource_version)
            .await
    }

    /// The objects whose index function `index_name` produced `value`.
    #[doc(alias = "ByIndex")]
    pub fn by_index(&self, index_name: &str, value: &str) -> Result<Vec<Arc<K>>, IndexError> {
        self.store.by_index(index_name, value)
    }

    /// The keys of the objects whose index function `index_name` produced `value`.
    #[doc(alias = "IndexKeys")]
    pub fn index_keys(&self, index_name: &str, value: &str) -> Result<Vec<ObjectKey>, IndexError> {
        self.store.index_keys(index_name, value)
    }

    /// Every value of index `index_name` that at least one cached object has.
    #[doc(alias = "ListIndexFuncValues")]
    pub fn list_index_func_values(&self, index_name: &str) -> Result<Vec<String>, IndexError> {
        self.store.list_index_func_values(index_name)
    }

    /// The values the index function `index_name` gives for `obj` (see
    /// [`Store::index_values`]).
    pub fn index_values(&self, index_name: &str, obj: &K) -> Result<Vec<String>, IndexError> {
        self.store.index_values(index_name, obj)
    }

    /// The names of the registered index functions.
    #[doc(alias = "GetIndexers")]
    pub fn indexer_names(&self) -> Vec<String> {
        self.store.indexer_names()
    }
}

impl<K> From<Store<K>> for ReadOnlyStore<K> {
    fn from(store: Store<K>) -> Self {
        Self { store }
    }
}

impl<K> Clone for ReadOnlyStore<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
        }
    }
}

impl<K> fmt::Debug for ReadOnlyStore<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ReadOnlyStore").field(&self.store).finish()
    }
}
