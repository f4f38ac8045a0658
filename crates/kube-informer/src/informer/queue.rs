//! The informer's side of its FIFO: whichever kind it is, and the transform applied to
//! objects on their way in.

use std::{convert::Infallible, sync::Arc};

use kube::Resource;
use parking_lot::Mutex;

use super::{Failure, failure::Reporter};
use crate::{
    DeltaFifo, Deltas, KeyError, RealFifo, Store,
    fifo::{DeltaQueue, DeltaSink, PopError, ProcessError},
    meta_namespace_key,
};

/// The most distinct keys applied to the cache under one write lock (client-go's batch
/// size), so readers cannot starve the writer; a relist from a `RealFifo` is applied whole.
const BATCH_KEYS: usize = 1000;

pub(super) type Transform<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// The queue, whichever kind.
pub(super) enum Queue<K> {
    Real(Arc<RealFifo<K>>),
    Delta(Arc<DeltaFifo<K>>),
}

impl<K: Resource + Send + Sync + 'static> Queue<K> {
    pub(super) fn new(kind: super::QueueKind, store: &Store<K>) -> Self {
        match kind {
            super::QueueKind::RealFifo => {
                Self::Real(Arc::new(RealFifo::new(Arc::new(store.clone()))))
            }
            super::QueueKind::DeltaFifo => {
                Self::Delta(Arc::new(DeltaFifo::new(Some(Arc::new(store.clone())))))
            }
        }
    }

    pub(super) fn sink(&self) -> Arc<dyn DeltaSink<K>> {
        match self {
            Self::Real(q) => q.clone(),
            Self::Delta(q) => q.clone(),
        }
    }

    /// Whether entries come out in event order (so each event's version can become the
    /// store's).
    pub(super) fn is_ordered(&self) -> bool {
        matches!(self, Self::Real(_))
    }

    /// Waits for `relists` first relists (one per namespace) before being synced.
    pub(super) fn expect_relists(&self, relists: usize) {
        match self {
            Self::Real(q) => q.expect_relists(relists),
            Self::Delta(q) => q.expect_relists(relists),
        }
    }

    pub(super) fn has_synced(&self) -> bool {
        match self {
            Self::Real(q) => q.has_synced(),
            Self::Delta(q) => q.has_synced(),
        }
    }

    pub(super) fn close(&self) {
        match self {
            Self::Real(q) => q.close(),
            Self::Delta(q) => q.close(),
        }
    }

    #[cfg(feature = "metrics")]
    pub(super) fn len(&self) -> usize {
        match self {
            Self::Real(q) => q.len(),
            Self::Delta(q) => q.len(),
        }
    }

    pub(super) async fn pop_batch(
        &self,
        process: impl FnOnce(&[(Deltas<K>, bool)]) -> Result<(), ProcessError<Infallible>> + Send,
    ) -> Result<(), PopError<Infallible>> {
        match self {
            Self::Real(q) => q.pop_batch(BATCH_KEYS, process).await,
            Self::Delta(q) => q.pop_batch(BATCH_KEYS, process).await,
        }
    }
}

/// Applies the informer's transform (if any) to objects on their way into the queue, so an
/// object is transformed once, before it enters the cache.
///
/// A transform is user code: if it panics on an object, the panic is reported and nothing
/// cached is lost — an add or update is skipped (the cache keeps the previous version), a
/// delete removes the cached object, and a relist keeps the cached version in place of the
/// new one (so the object is not taken for deleted).
pub(super) struct TransformSink<K> {
    pub(super) inner: Arc<dyn DeltaSink<K>>,
    pub(super) transform: Arc<Mutex<Option<Transform<K>>>>,
    pub(super) reporter: Arc<Reporter>,
    /// Told after a relist: an empty one syncs the queue without anything to pop.
    pub(super) progress: Arc<tokio::sync::Notify>,
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
                self.reporter.report(Failure::TransformPanicked {
                    key: key.clone(),
                    message: crate::panic_message(panic.as_ref()),
                });
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
}

/// The sink of one namespace's reflector when several namespaces feed one informer: its
/// relists replace only that namespace's objects, and its relists' and bookmarks' versions
/// are marked as that namespace's (a version of one namespace says nothing of the
/// others': the cache keeps one per namespace, see `Store::track_namespaces`).
pub(super) struct NamespaceSink<K> {
    pub(super) inner: Arc<dyn DeltaSink<K>>,
    pub(super) namespace: String,
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
}
