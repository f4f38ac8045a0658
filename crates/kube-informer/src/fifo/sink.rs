//! Adapters that run between a reflector and a FIFO: the informer's transform (applied once,
//! before an object is queued, panics caught) and the namespace scope of one reflector among
//! several feeding one FIFO (its relists replace only its namespace; its versions are
//! marked as its namespace's).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use kube::Resource;
use parking_lot::Mutex;

use super::DeltaSink;
use crate::{KeyError, meta_namespace_key};

/// A transform of objects on their way into the cache.
pub(crate) type Transform<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// Applies the informer's transform (if any) to objects on their way into the queue, so an
/// object is transformed once, before it enters the cache.
///
/// A transform is user code: if it panics on an object, the panic is reported and nothing
/// cached is lost — an add or update is skipped (the cache keeps the previous version), a
/// delete removes the cached object, and a relist keeps the cached version in place of the
/// new one (so the object is not taken for deleted).
pub(crate) struct TransformSink<K> {
    pub(crate) inner: Arc<dyn DeltaSink<K>>,
    pub(crate) transform: Arc<Mutex<Option<Transform<K>>>>,
    /// Told of a panic: the object's key and the panic's message.
    pub(crate) on_panic: Arc<dyn Fn(String, String) + Send + Sync>,
    /// Told after a relist: an empty one syncs the queue without anything to pop.
    pub(crate) progress: Arc<tokio::sync::Notify>,
}

impl<K: Resource + Clone> TransformSink<K> {
    /// A relist, transformed; an object whose transform panicked keeps its newest known
    /// state, so it is not taken for deleted.
    fn transformed(&self, list: Vec<Arc<K>>) -> Vec<Arc<K>> {
        list.into_iter()
            .filter_map(|o| match self.apply(o) {
                Ok(o) => Some(o),
                Err(key) => self.inner.last_known(&key),
            })
            .collect()
    }

    /// The transformed object, or `Err(key)` if the transform panicked (reported).
    fn apply(&self, obj: Arc<K>) -> Result<Arc<K>, String> {
        let transform = self.transform.lock().clone();
        let Some(f) = transform else {
            return Ok(obj);
        };
        let key =
            meta_namespace_key(obj.as_ref()).map_or_else(|_| String::new(), |k| k.to_string());
        // The reflector hands over a fresh Arc: unwrapping it does not copy.
        let owned = Arc::unwrap_or_clone(obj);
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(owned))) {
            Ok(transformed) => Ok(Arc::new(transformed)),
            Err(panic) => {
                (self.on_panic)(key.clone(), crate::panic_message(panic.as_ref()));
                Err(key)
            }
        }
    }
}

impl<K: Resource + Clone + Send + Sync> DeltaSink<K> for TransformSink<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        match self.apply(obj) {
            Ok(obj) => self.inner.add(obj),
            Err(_) => Ok(()),
        }
    }
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        match self.apply(obj) {
            Ok(obj) => self.inner.update(obj),
            Err(_) => Ok(()),
        }
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        match self.apply(obj) {
            Ok(obj) => self.inner.delete(obj),
            // The deleted object is lost with the panic: delete the newest state known.
            Err(key) => match self.inner.last_known(&key) {
                Some(known) => self.inner.delete(known),
                None => Ok(()),
            },
        }
    }
    fn replace_in_namespace(
        &self,
        namespace: &str,
        list: Vec<Arc<K>>,
        resource_version: &str,
    ) -> Result<(), KeyError> {
        let list = self.transformed(list);
        let replaced = self
            .inner
            .replace_in_namespace(namespace, list, resource_version);
        self.progress.notify_waiters();
        replaced
    }
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), KeyError> {
        let list = self.transformed(list);
        let replaced = self.inner.replace(list, resource_version);
        self.progress.notify_waiters();
        replaced
    }
    fn resync(&self) {
        self.inner.resync();
    }
    fn bookmark(&self, resource_version: &str) {
        self.inner.bookmark(resource_version);
    }
    fn bookmark_in_namespace(&self, namespace: &str, resource_version: &str) {
        self.inner
            .bookmark_in_namespace(namespace, resource_version);
    }
    fn last_known(&self, key: &str) -> Option<Arc<K>> {
        self.inner.last_known(key)
    }
    fn full(&self) -> Option<BoxFuture<'_, ()>> {
        self.inner.full()
    }
}

/// The sink of one namespace's reflector when several namespaces feed one informer: its
/// relists replace only that namespace's objects, and its relists' and bookmarks' versions
/// are marked as that namespace's (a version of one namespace says nothing of the
/// others': the cache keeps one per namespace, see `Store::track_namespaces`).
pub(crate) struct NamespaceSink<K> {
    pub(crate) inner: Arc<dyn DeltaSink<K>>,
    pub(crate) namespace: String,
}

impl<K: Send + Sync> DeltaSink<K> for NamespaceSink<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.inner.add(obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.inner.update(obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.inner.delete(obj)
    }
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), KeyError> {
        self.inner
            .replace_in_namespace(&self.namespace, list, resource_version)
    }
    fn resync(&self) {
        self.inner.resync();
    }
    fn bookmark(&self, resource_version: &str) {
        self.inner
            .bookmark_in_namespace(&self.namespace, resource_version);
    }
    fn last_known(&self, key: &str) -> Option<Arc<K>> {
        self.inner.last_known(key)
    }
    fn full(&self) -> Option<BoxFuture<'_, ()>> {
        self.inner.full()
    }
}
