//! [`DeltaFifo`]: client-go's classic queue, one entry per key with that key's pending deltas.

use std::{collections::VecDeque, fmt, sync::Arc};

use futures_util::future::BoxFuture;
use kube::Resource;

use super::{
    DeletedObject, Delta, DeltaQueue, DeltaSink, Deltas, KnownObjects, PopError, ProcessError,
    Scope,
    core::{Core, Entries, State},
};
use crate::{FastMap, FastSet, KeyError, ObjectKey, meta_namespace_key};

/// A queue holding, per key, every delta that arrived while the key waited (client-go's
/// `DeltaFIFO`).
///
/// - A key is queued once; further deltas for it join its entry, which keeps its place.
/// - Two deletes in a row collapse into one, keeping the one that is not a tombstone.
/// - A delete of a key that is neither queued nor known to the paired store is dropped
///   (the object was presumably already reported deleted by a relist).
/// - `replace` queues [`Delta::Replaced`] for every listed object, then a
///   [`DeletedObject::FinalStateUnknown`] tombstone for every queued or known key missing from
///   the list, carrying the newest state seen (queued delta first, else the store's).
/// - `resync` queues [`Delta::Sync`] for known objects with nothing queued.
///
/// See [the module docs](crate::fifo) for how it differs from [`RealFifo`](super::RealFifo).
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::core::ObjectMeta;
/// use kube_informer::fifo::{DeltaFifo, DeltaQueue, DeltaSink, DeltaType, ProcessError};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let cm = |data: &str| Arc::new(ConfigMap {
///     metadata: ObjectMeta { namespace: Some("default".into()), name: Some("cfg".into()), ..Default::default() },
///     data: Some([("v".to_owned(), data.to_owned())].into()),
///     ..Default::default()
/// });
/// let fifo = DeltaFifo::new(None);
/// fifo.add(cm("1")).unwrap();
/// fifo.update(cm("2")).unwrap();
///
/// // Both deltas come out together, oldest first.
/// fifo.pop(|deltas, _in_initial_list| {
///     let types: Vec<_> = deltas.iter().map(|d| d.delta_type()).collect();
///     assert_eq!(types, [DeltaType::Added, DeltaType::Updated]);
///     Ok::<(), ProcessError<std::convert::Infallible>>(())
/// }).await.unwrap();
/// # }
/// ```
#[doc(alias = "DeltaFIFO")]
pub struct DeltaFifo<K> {
    core: Core<KeyedEntries<K>>,
    known: Option<Arc<dyn KnownObjects<K>>>,
}

/// The queue of keys and each key's deltas. Invariant: a key is in `queue` iff it is in
/// `items`, exactly once.
struct KeyedEntries<K> {
    queue: VecDeque<ObjectKey>,
    items: FastMap<ObjectKey, Deltas<K>>,
    /// The deltas held by `items`, together.
    deltas: usize,
}

impl<K> KeyedEntries<K> {
    fn add_if_not_present(&mut self, deltas: Deltas<K>) {
        if !self.items.contains_key(deltas.key().as_str()) {
            self.deltas += deltas.len();
            self.queue.push_back(deltas.key().clone());
            self.items.insert(deltas.key().clone(), deltas);
        }
    }
}

impl<K> Entries<K> for KeyedEntries<K> {
    fn pop_front(&mut self) -> Option<Deltas<K>> {
        let key = self.queue.pop_front()?;
        let deltas = self.items.remove(key.as_str())?;
        self.deltas -= deltas.len();
        Some(deltas)
    }

    fn requeue(&mut self, deltas: Deltas<K>) {
        self.add_if_not_present(deltas);
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    fn deltas(&self) -> usize {
        self.deltas
    }

    fn front_group(&self) -> Option<u64> {
        (!self.queue.is_empty()).then_some(0)
    }

    fn newest_entry(&mut self) -> Option<&mut Deltas<K>> {
        let key = self.queue.back()?;
        self.items.get_mut(key.as_str())
    }

    /// Appends `delta` to `key`'s entry, queueing the key if it had none.
    fn push(&mut self, key: ObjectKey, delta: Delta<K>) {
        match self.items.get_mut(key.as_str()) {
            Some(deltas) => {
                let before = deltas.len();
                deltas.push_deduped(delta);
                self.deltas = self.deltas + deltas.len() - before;
            }
            None => {
                self.deltas += 1;
                self.queue.push_back(key.clone());
                self.items.insert(key.clone(), Deltas::new(key, delta));
            }
        }
    }

    fn replace(
        state: &mut State<Self>,
        keyed: Vec<(ObjectKey, Arc<K>)>,
        known: Vec<(ObjectKey, Arc<K>)>,
        scope: &Scope<'_, K>,
    ) {
        let entries = &mut state.entries;
        let mut listed = FastSet::with_capacity_and_hasher(keyed.len(), Default::default());
        for (key, obj) in keyed {
            listed.insert(key.clone());
            entries.push(key, Delta::Replaced(obj));
        }
        // Queued keys missing from the list: tombstone with the newest queued state.
        let queued_missing: Vec<(ObjectKey, Arc<K>)> = entries
            .items
            .iter()
            .filter(|(key, deltas)| {
                !listed.contains(key.as_str())
                    && scope.holds(key.as_str(), deltas.newest().object())
            })
            .map(|(key, deltas)| (key.clone(), deltas.newest().object().clone()))
            .collect();
        let mut tombstones = queued_missing.len();
        for (key, last_known) in queued_missing {
            let tombstone = DeletedObject::FinalStateUnknown {
                key: key.clone(),
                last_known,
            };
            entries.push(key, Delta::Deleted(tombstone));
        }
        // Known keys missing from the list and not queued: tombstone with the cached state.
        for (key, last_known) in known {
            if listed.contains(key.as_str()) || entries.items.contains_key(key.as_str()) {
                continue;
            }
            tombstones += 1;
            let tombstone = DeletedObject::FinalStateUnknown {
                key: key.clone(),
                last_known,
            };
            entries.push(key, Delta::Deleted(tombstone));
        }
        state.population.replaced(listed.len() + tombstones);
    }
}

impl<K> DeltaFifo<K> {
    /// An empty queue. `known` is the store the popped deltas are applied to; without one,
    /// `replace` can only detect deletions among queued keys, `resync` does nothing, and
    /// deletes are dropped unless the key is queued.
    pub fn new(known: Option<Arc<dyn KnownObjects<K>>>) -> Self {
        Self {
            core: Core::new(KeyedEntries {
                queue: VecDeque::new(),
                items: FastMap::default(),
                deltas: 0,
            }),
            known,
        }
    }

    fn is_known(&self, key: &str) -> bool {
        self.known
            .as_ref()
            .is_some_and(|known| known.get_by_key(key).is_some())
    }
}

impl<K: Resource + Send + Sync> DeltaFifo<K> {
    /// Bounds the queue at `capacity` queued deltas (across all keys): at it, [`full`](DeltaSink::full)
    /// tells a writer to wait, and a [`Reflector`](crate::reflector::Reflector) stops reading
    /// its watch until a pop makes room (the API server then holds the events; TCP pushes
    /// back). Writes never fail for lack of room and a relist is queued whole, so the
    /// queue can exceed `capacity` by one relist. A new queue is unbounded; an informer
    /// bounds its own (see
    /// [`InformerOptions::queue_capacity`](crate::informer::InformerOptions::queue_capacity)).
    #[must_use]
    pub fn with_capacity(self, capacity: usize) -> Self {
        self.core.set_capacity(capacity);
        self
    }

    /// The capacity set with [`with_capacity`](Self::with_capacity); `None`: unbounded.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> Option<usize> {
        self.core.capacity()
    }

    /// Waits for `relists` first relists (one per namespace watched into this queue) before
    /// [`has_synced`](DeltaQueue::has_synced).
    pub(crate) fn expect_relists(&self, relists: usize) {
        self.core.expect_relists(relists);
    }
}

impl<K: Resource + Send + Sync> DeltaSink<K> for DeltaFifo<K> {
    fn full(&self) -> Option<BoxFuture<'_, ()>> {
        self.core.full()
    }

    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.core.push_object(obj, Delta::Added)
    }

    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.core.push_object(obj, Delta::Updated)
    }

    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        let key = meta_namespace_key(obj.as_ref())?;
        self.core.write(|state| {
            state.population.touch();
            if state.entries.items.contains_key(key.as_str()) || self.is_known(key.as_str()) {
                state
                    .entries
                    .push(key, Delta::Deleted(DeletedObject::Known(obj)));
            }
        });
        Ok(())
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), KeyError> {
        self.core
            .replace(list, resource_version, Scope::All, self.known.as_deref())
    }

    fn replace_part(
        &self,
        part: &dyn Fn(&K) -> bool,
        list: Vec<Arc<K>>,
        resource_version: &str,
    ) -> Result<bool, KeyError> {
        self.core.replace(
            list,
            resource_version,
            Scope::Part(part),
            self.known.as_deref(),
        )?;
        Ok(true)
    }

    fn replace_in_namespace(
        &self,
        namespace: &str,
        list: Vec<Arc<K>>,
        resource_version: &str,
    ) -> Result<(), KeyError> {
        self.core.replace(
            list,
            resource_version,
            Scope::Namespace(namespace),
            self.known.as_deref(),
        )
    }

    fn resync(&self) {
        let Some(known) = &self.known else { return };
        self.core.write(|state| {
            for (key, obj) in known.entries() {
                if !state.entries.items.contains_key(key.as_str()) {
                    state.entries.push(key, Delta::Sync(obj));
                }
            }
        });
    }

    fn last_known(&self, key: &str) -> Option<Arc<K>> {
        let queued = self.get_by_key(key).map(|d| d.newest().object().clone());
        queued.or_else(|| self.known.as_deref().and_then(|k| k.get_by_key(key)))
    }

    fn bookmark_in_namespace(&self, namespace: &str, resource_version: &str) {
        self.core
            .bookmark(resource_version, Some(namespace), self.known.as_deref());
    }

    fn bookmark(&self, resource_version: &str) {
        self.core
            .bookmark(resource_version, None, self.known.as_deref());
    }
}

impl<K: Resource + Send + Sync> DeltaQueue<K> for DeltaFifo<K> {
    async fn pop<F, E>(&self, process: F) -> Result<(), PopError<E>>
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<(), ProcessError<E>> + Send,
        E: Send,
    {
        self.core.pop(process).await
    }

    async fn pop_batch<F, E>(&self, max_keys: usize, process: F) -> Result<(), PopError<E>>
    where
        F: FnOnce(&[(Deltas<K>, bool)]) -> Result<(), ProcessError<E>> + Send,
        E: Send,
    {
        self.core.pop_batch(max_keys, process).await
    }

    fn add_if_not_present(&self, deltas: Deltas<K>) {
        self.core.write(|state| {
            state.population.touch();
            state.entries.add_if_not_present(deltas);
        });
    }

    fn has_synced(&self) -> bool {
        self.core.has_synced()
    }

    fn close(&self) {
        self.core.close();
    }

    fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    fn list_keys(&self) -> Vec<ObjectKey> {
        self.core.lock().entries.queue.iter().cloned().collect()
    }

    fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        self.core.lock().entries.items.get(key).cloned()
    }

    fn len(&self) -> usize {
        self.core.lock().entries.queue.len()
    }
}

impl<K> fmt::Debug for DeltaFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.core.lock();
        f.debug_struct("DeltaFifo")
            .field("queued_keys", &state.entries.queue.len())
            .field("closed", &state.closed)
            .field("has_synced", &state.population.has_synced())
            .finish()
    }
}
