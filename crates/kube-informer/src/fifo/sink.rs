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
    /// Leave `metadata.managedFields` out, before the transform. Checked per object: one
    /// that has none (a factory's sources skip them while decoding) passes untouched, where
    /// a transform step would move every object out of its `Arc` and into a new one — a
    /// second allocation of each object's largest block, on another thread than its
    /// decoder's (and so, with glibc, in another arena).
    pub(crate) strip_managed_fields: bool,
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
    fn apply(&self, mut obj: Arc<K>) -> Result<Arc<K>, String> {
        if self.strip_managed_fields && obj.meta().managed_fields.is_some() {
            Arc::make_mut(&mut obj).meta_mut().managed_fields = None;
        }
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
    fn replace_part(
        &self,
        part: &dyn Fn(&K) -> bool,
        list: Vec<Arc<K>>,
        resource_version: &str,
    ) -> Result<bool, KeyError> {
        let list = self.transformed(list);
        let replaced = self.inner.replace_part(part, list, resource_version);
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
/// others': the cache keeps one per namespace, see `Store::track_namespaces`). It has no
/// `replace_part`: a sharded namespace's share that changes is relisted whole.
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

#[cfg(test)]
mod tests {
    use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry};

    use super::*;

    /// Keeps what reaches the queue.
    #[derive(Default)]
    struct Queued(Mutex<Vec<Arc<Pod>>>);

    impl DeltaSink<Pod> for Queued {
        fn add(&self, obj: Arc<Pod>) -> Result<(), KeyError> {
            self.0.lock().push(obj);
            Ok(())
        }
        fn update(&self, obj: Arc<Pod>) -> Result<(), KeyError> {
            self.add(obj)
        }
        fn delete(&self, obj: Arc<Pod>) -> Result<(), KeyError> {
            self.add(obj)
        }
        fn replace(&self, list: Vec<Arc<Pod>>, _: &str) -> Result<(), KeyError> {
            self.0.lock().extend(list);
            Ok(())
        }
        fn replace_in_namespace(
            &self,
            _: &str,
            list: Vec<Arc<Pod>>,
            rv: &str,
        ) -> Result<(), KeyError> {
            self.replace(list, rv)
        }
        fn resync(&self) {}
    }

    fn sink(transform: Option<Transform<Pod>>) -> (TransformSink<Pod>, Arc<Queued>) {
        let queued = Arc::new(Queued::default());
        let sink = TransformSink {
            inner: queued.clone(),
            transform: Arc::new(Mutex::new(transform)),
            strip_managed_fields: true,
            on_panic: Arc::new(|_, _| {}),
            progress: Arc::new(tokio::sync::Notify::new()),
        };
        (sink, queued)
    }

    fn pod(managed_fields: bool) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web".into());
        pod.metadata.managed_fields = managed_fields.then(|| vec![ManagedFieldsEntry::default()]);
        Arc::new(pod)
    }

    #[test]
    fn managed_fields_are_stripped_before_the_users_transform() {
        let (sink, queued) = sink(Some(Arc::new(|mut pod: Pod| {
            let seen = pod.metadata.managed_fields.is_some().to_string();
            pod.metadata.labels = Some([("saw-managed-fields".to_owned(), seen)].into());
            pod
        })));
        sink.add(pod(true)).unwrap();
        sink.replace(vec![pod(true)], "2").unwrap();
        for pod in queued.0.lock().iter() {
            assert_eq!(pod.metadata.managed_fields, None);
            assert_eq!(
                pod.metadata.labels.as_ref().unwrap()["saw-managed-fields"],
                "false"
            );
        }
    }

    #[test]
    fn an_object_without_managed_fields_is_queued_as_it_came() {
        // A factory's sources skip managedFields while decoding: the strip must then cost
        // nothing, not move every object into a new allocation.
        let (sink, queued) = sink(None);
        let (without, with) = (pod(false), pod(true));
        sink.add(without.clone()).unwrap();
        let with_address = Arc::as_ptr(&with);
        sink.add(with).unwrap();
        let queued = queued.0.lock();
        assert!(Arc::ptr_eq(&queued[0], &without), "the same allocation");
        assert_eq!(queued[1].metadata.managed_fields, None);
        assert_eq!(Arc::as_ptr(&queued[1]), with_address, "stripped in place");
    }
}
