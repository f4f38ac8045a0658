//! [`RealFifo`]: client-go ≥ 1.36's default queue, one entry per event in arrival order.

use std::{collections::VecDeque, fmt, sync::Arc};

use futures_util::future::BoxFuture;
use kube::Resource;

use super::{
    DeletedObject, Delta, DeltaQueue, DeltaSink, Deltas, KnownObjects, PopError, ProcessError,
    Scope,
    core::{Core, Entries, State},
};
use crate::{FastMap, FastSet, KeyError, ObjectKey};

/// A queue that hands out every event, one at a time, strictly in the order it arrived
/// (client-go's `RealFIFO`, the informers' default since Kubernetes 1.36).
///
/// Nothing is merged: two updates of one object are two pops, deletes are never dropped or
/// collapsed, and the order across objects is the order of the events. `replace` first
/// queues a [`DeletedObject::FinalStateUnknown`] tombstone for every key missing from the new
/// list (a queued key whose newest queued delta is not already a delete, then every known key
/// with nothing queued), then a [`Delta::Replaced`] for every listed object. `resync` queues
/// [`Delta::Sync`] for known objects with nothing queued.
///
/// A `process` that asks for a requeue puts its entry back at the *front*, so a retry never
/// reorders events.
///
/// See [the module docs](crate::fifo) for how it differs from [`DeltaFifo`](super::DeltaFifo).
///
/// ```
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::core::ObjectMeta;
/// use kube_informer::{Store, fifo::{DeltaQueue, DeltaSink, DeltaType, ProcessError, RealFifo}};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let cm = |name: &str| Arc::new(ConfigMap {
///     metadata: ObjectMeta { namespace: Some("default".into()), name: Some(name.into()), ..Default::default() },
///     ..Default::default()
/// });
/// let store = Store::default();
/// let fifo = RealFifo::new(Arc::new(store.clone()));
/// fifo.add(cm("a")).unwrap();
/// fifo.add(cm("b")).unwrap();
/// fifo.update(cm("a")).unwrap();
///
/// let mut seen = Vec::new();
/// for _ in 0..3 {
///     fifo.pop(|deltas, _| {
///         seen.push((deltas.key().to_string(), deltas.newest().delta_type()));
///         Ok::<(), ProcessError<std::convert::Infallible>>(())
///     }).await.unwrap();
/// }
/// assert_eq!(seen, [
///     ("default/a".to_owned(), DeltaType::Added),
///     ("default/b".to_owned(), DeltaType::Added),
///     ("default/a".to_owned(), DeltaType::Updated),
/// ]);
/// # }
/// ```
#[doc(alias = "RealFIFO")]
pub struct RealFifo<K> {
    core: Core<OrderedEntries<K>>,
    known: Arc<dyn KnownObjects<K>>,
}

/// The events in arrival order. An entry normally holds one delta; a requeued or
/// re-added entry may hold several for one key.
struct OrderedEntries<K> {
    queue: VecDeque<Deltas<K>>,
    /// The last replace group handed out.
    last_group: u64,
}

impl<K> OrderedEntries<K> {
    fn contains_key(&self, key: &str) -> bool {
        self.queue.iter().any(|d| d.key().as_str() == key)
    }

    /// The queued keys, each with the newest delta queued for it, in order of first
    /// appearance.
    fn newest_per_key(&self) -> Vec<(ObjectKey, &Delta<K>)> {
        let mut position: FastMap<&str, usize> = FastMap::default();
        let mut out: Vec<(ObjectKey, &Delta<K>)> = Vec::new();
        for deltas in &self.queue {
            match position.get(deltas.key().as_str()) {
                Some(&i) => out[i].1 = deltas.newest(),
                None => {
                    position.insert(deltas.key().as_str(), out.len());
                    out.push((deltas.key().clone(), deltas.newest()));
                }
            }
        }
        out
    }
}

impl<K> Entries<K> for OrderedEntries<K> {
    fn pop_front(&mut self) -> Option<Deltas<K>> {
        self.queue.pop_front()
    }

    fn requeue(&mut self, deltas: Deltas<K>) {
        self.queue.push_front(deltas);
    }

    fn len(&self) -> usize {
        self.queue.len()
    }

    fn front_group(&self) -> Option<u64> {
        self.queue.front().map(|d| d.group)
    }

    fn newest_entry(&mut self) -> Option<&mut Deltas<K>> {
        self.queue.back_mut()
    }

    fn push(&mut self, key: ObjectKey, delta: Delta<K>) {
        self.queue.push_back(Deltas::new(key, delta));
    }

    fn replace(
        state: &mut State<Self>,
        keyed: Vec<(ObjectKey, Arc<K>)>,
        known: Vec<(ObjectKey, Arc<K>)>,
        scope: &Scope<'_, K>,
    ) {
        let queued_before = state.entries.queue.len();
        let tombstones = {
            let listed: FastSet<&str> = keyed.iter().map(|(key, _)| key.as_str()).collect();
            let newest = state.entries.newest_per_key();
            let queued: FastSet<&str> = newest.iter().map(|(key, _)| key.as_str()).collect();
            // Queued keys missing from the list, unless already on their way out...
            let from_queue = newest
                .iter()
                .filter(|(key, newest)| {
                    !listed.contains(key.as_str())
                        && !matches!(newest, Delta::Deleted(_))
                        && scope.holds(key.as_str(), newest.object())
                })
                .map(|(key, newest)| (key.clone(), newest.object().clone()));
            // ...then known keys missing from the list with nothing queued.
            let from_store = known.into_iter().filter(|(key, _)| {
                !listed.contains(key.as_str()) && !queued.contains(key.as_str())
            });
            from_queue.chain(from_store).collect::<Vec<_>>()
        };
        state.entries.last_group += 1;
        let group = state.entries.last_group;
        for (key, last_known) in tombstones {
            let tombstone = DeletedObject::FinalStateUnknown {
                key: key.clone(),
                last_known,
            };
            state.entries.push(key, Delta::Deleted(tombstone));
            state.entries.queue.back_mut().expect("just pushed").group = group;
        }
        for (key, obj) in keyed {
            state.entries.push(key, Delta::Replaced(obj));
            state.entries.queue.back_mut().expect("just pushed").group = group;
        }
        // The first relist counts everything queued (earlier events too); a later first relist
        // of another namespace counts what it added.
        let queued = state.entries.queue.len();
        let added = queued - queued_before;
        state.population.replaced(if state.population.relisted() {
            added
        } else {
            queued
        });
    }
}

impl<K> RealFifo<K> {
    /// An empty queue feeding the store `known` (client-go requires it for `RealFIFO` too:
    /// without it a relist could not tell what was deleted).
    pub fn new(known: Arc<dyn KnownObjects<K>>) -> Self {
        Self {
            core: Core::new(OrderedEntries {
                queue: VecDeque::new(),
                last_group: 0,
            }),
            known,
        }
    }
}

impl<K: Resource + Send + Sync> RealFifo<K> {
    /// Bounds the queue at `capacity` queued events: at it, [`full`](DeltaSink::full)
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

impl<K: Resource + Send + Sync> DeltaSink<K> for RealFifo<K> {
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
        self.core
            .push_object(obj, |obj| Delta::Deleted(DeletedObject::Known(obj)))
    }

    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), KeyError> {
        self.core.replace(
            list,
            resource_version,
            Scope::All,
            Some(self.known.as_ref()),
        )
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
            Some(self.known.as_ref()),
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
            Some(self.known.as_ref()),
        )
    }

    fn resync(&self) {
        self.core.write(|state| {
            let queued: FastSet<&str> = state
                .entries
                .queue
                .iter()
                .map(|d| d.key().as_str())
                .collect();
            let sync: Vec<_> = self
                .known
                .entries()
                .into_iter()
                .filter(|(key, _)| !queued.contains(key.as_str()))
                .collect();
            for (key, obj) in sync {
                state.entries.push(key, Delta::Sync(obj));
            }
        });
    }

    fn last_known(&self, key: &str) -> Option<Arc<K>> {
        let queued = self.get_by_key(key).map(|d| d.newest().object().clone());
        queued.or_else(|| Some(self.known.as_ref()).and_then(|k| k.get_by_key(key)))
    }

    fn bookmark(&self, resource_version: &str) {
        self.core
            .bookmark(resource_version, None, Some(self.known.as_ref()));
    }

    fn bookmark_in_namespace(&self, namespace: &str, resource_version: &str) {
        self.core
            .bookmark(resource_version, Some(namespace), Some(self.known.as_ref()));
    }
}

impl<K: Resource + Send + Sync> DeltaQueue<K> for RealFifo<K> {
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

    /// Queues `deltas` at the back unless an entry for their key is queued.
    fn add_if_not_present(&self, deltas: Deltas<K>) {
        self.core.write(|state| {
            state.population.touch();
            if !state.entries.contains_key(deltas.key().as_str()) {
                state.entries.queue.push_back(deltas);
            }
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
        let state = self.core.lock();
        state
            .entries
            .newest_per_key()
            .into_iter()
            .map(|(key, _)| key)
            .collect()
    }

    fn get_by_key(&self, key: &str) -> Option<Deltas<K>> {
        let state = self.core.lock();
        let mut found: Option<Deltas<K>> = None;
        for deltas in state
            .entries
            .queue
            .iter()
            .filter(|d| d.key().as_str() == key)
        {
            match &mut found {
                None => found = Some(deltas.clone()),
                Some(all) => deltas.iter().for_each(|d| all.push(d.clone())),
            }
        }
        found
    }

    fn len(&self) -> usize {
        self.core.lock().entries.queue.len()
    }
}

impl<K> fmt::Debug for RealFifo<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.core.lock();
        f.debug_struct("RealFifo")
            .field("queued", &state.entries.queue.len())
            .field("closed", &state.closed)
            .field("has_synced", &state.population.has_synced())
            .finish()
    }
}
