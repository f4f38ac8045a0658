//! [`UndeltaStore`]: a cache that hands its whole content to a callback after every change
//! (client-go's `UndeltaStore`), usable directly as a reflector's sink.

use std::sync::Arc;

use kube::Resource;

use crate::{KeyError, Store, fifo::DeltaSink};

type Push<K> = Arc<dyn Fn(Vec<Arc<K>>) + Send + Sync>;

/// A [`Store`] that calls `push` with every object it holds after each write: for consumers
/// that want the whole state, not the changes (a config reloader, a metrics exporter). As a
/// [`DeltaSink`], a reflector can feed it directly, without an informer.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::{fifo::DeltaSink, caches::undelta::UndeltaStore};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let s = seen.clone();
/// let store = UndeltaStore::new(move |all: Vec<Arc<ConfigMap>>| s.lock().unwrap().push(all.len()));
/// let mut cm = ConfigMap::default();
/// cm.metadata.name = Some("a".into());
/// store.add(Arc::new(cm.clone()))?;
/// cm.metadata.name = Some("b".into());
/// store.add(Arc::new(cm))?;
/// assert_eq!(*seen.lock().unwrap(), [1, 2]);
/// # Ok::<(), kube_informer::KeyError>(())
/// ```
pub struct UndeltaStore<K> {
    store: Store<K>,
    push: Push<K>,
}

impl<K> std::fmt::Debug for UndeltaStore<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UndeltaStore")
            .field("store", &self.store)
            .finish()
    }
}

impl<K: Resource> UndeltaStore<K> {
    /// An empty store calling `push` with its whole content after each change.
    pub fn new(push: impl Fn(Vec<Arc<K>>) + Send + Sync + 'static) -> Self {
        Self {
            store: Store::default(),
            push: Arc::new(push),
        }
    }

    /// The store, for reads.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    fn push(&self) {
        (self.push)(self.store.list());
    }
}

impl<K: Resource + Send + Sync> DeltaSink<K> for UndeltaStore<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.store.add(obj)?;
        self.push();
        Ok(())
    }
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.store.update(obj)?;
        self.push();
        Ok(())
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.store.delete(&obj)?;
        self.push();
        Ok(())
    }
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), KeyError> {
        self.store.replace(list, resource_version)?;
        self.push();
        Ok(())
    }
    fn resync(&self) {}
    fn bookmark(&self, resource_version: &str) {
        self.store.bookmark(resource_version);
    }
}
