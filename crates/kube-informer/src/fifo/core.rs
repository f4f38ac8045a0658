//! What both FIFOs share: the lock, the wake-up of waiting pops, `close`, and the
//! bookkeeping behind `has_synced` / `is_in_initial_list`.

use parking_lot::{Mutex, MutexGuard};
use tokio::sync::Notify;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use futures_util::future::BoxFuture;

use kube::Resource;

use super::{Delta, Deltas, KnownObjects, PopError, ProcessError, Scope};
use crate::{KeyError, ObjectKey, meta_namespace_key};

/// Tracks the first relist: `has_synced` is true once everything it queued was popped, or
/// at once if a plain add/update/delete came before any relist. A queue fed by several
/// relists (one per namespace) is populated once each of them came.
#[derive(Debug)]
pub(super) struct Population {
    populated: bool,
    initial_count: usize,
    /// How many first relists make the initial state (one per reflector).
    expected: usize,
    relists: usize,
}

impl Default for Population {
    fn default() -> Self {
        Self {
            populated: false,
            initial_count: 0,
            expected: 1,
            relists: 0,
        }
    }
}

impl Population {
    /// Expect `relists` first relists (one per namespace watched into this queue).
    pub(super) fn expect(&mut self, relists: usize) {
        self.expected = relists.max(1);
    }

    /// An add/update/delete: the queue is populated (no-op after the first time), unless
    /// several relists are expected.
    pub(super) fn touch(&mut self) {
        if self.expected == 1 {
            self.populated = true;
        }
    }

    /// Whether a first relist has come already.
    pub(super) fn relisted(&self) -> bool {
        self.relists > 0
    }

    /// A `replace` that queued `queued` entries; only the first ones count.
    pub(super) fn replaced(&mut self, queued: usize) {
        if !self.populated {
            self.relists += 1;
            self.initial_count += queued;
            self.populated = self.relists >= self.expected;
        }
    }

    /// One entry popped; returns whether it belonged to the initial list.
    pub(super) fn popped(&mut self) -> bool {
        let in_initial_list = !self.has_synced();
        self.initial_count = self.initial_count.saturating_sub(1);
        in_initial_list
    }

    pub(super) fn has_synced(&self) -> bool {
        self.populated && self.initial_count == 0
    }
}

/// The part of a FIFO's state that differs between the two: how entries are kept.
pub(super) trait Entries<K> {
    /// Removes and returns the next entry.
    fn pop_front(&mut self) -> Option<Deltas<K>>;
    /// Puts back an entry whose processing asked for a retry.
    fn requeue(&mut self, deltas: Deltas<K>);
    /// How many entries a pop could take.
    fn len(&self) -> usize;
    /// Queues `delta` for `key` (how depends on the FIFO).
    fn push(&mut self, key: ObjectKey, delta: Delta<K>);
    /// The replace group of the next entry (0: none), or `None` when empty.
    fn front_group(&self) -> Option<u64>;
    /// The newest queued entry, which a bookmark marks; `None` when empty.
    fn newest_entry(&mut self) -> Option<&mut Deltas<K>>;
    /// How many deltas are queued, which a capacity bounds (the default: one per entry).
    fn deltas(&self) -> usize {
        self.len()
    }
    /// A relist of `scope`: queues `listed`, and deletions for what `known` (the store's
    /// objects in scope) has that `listed` lacks.
    fn replace(
        state: &mut State<Self>,
        listed: Vec<(ObjectKey, Arc<K>)>,
        known: Vec<(ObjectKey, Arc<K>)>,
        scope: &Scope<'_, K>,
    ) where
        Self: Sized;
}

pub(super) struct State<S> {
    pub(super) entries: S,
    pub(super) population: Population,
    pub(super) closed: bool,
}

/// A FIFO's state behind its lock, plus the wake-ups for waiting pops and for writers
/// waiting for room. The lock is never held across an `.await`.
pub(super) struct Core<S> {
    state: Mutex<State<S>>,
    notify: Notify,
    /// Queued deltas at which the queue is full (`usize::MAX`: never).
    capacity: AtomicUsize,
    /// Told when a pop makes room below the capacity, and on close.
    room: Notify,
}

impl<S> Core<S> {
    pub(super) fn new(entries: S) -> Self {
        Self {
            state: Mutex::new(State {
                entries,
                population: Population::default(),
                closed: false,
            }),
            notify: Notify::new(),
            capacity: AtomicUsize::new(usize::MAX),
            room: Notify::new(),
        }
    }

    /// A relist of `scope` into a queue feeding `known`.
    pub(super) fn replace<K: Resource>(
        &self,
        list: Vec<Arc<K>>,
        resource_version: &str,
        scope: Scope<'_, K>,
        known: Option<&dyn KnownObjects<K>>,
    ) -> Result<(), KeyError>
    where
        S: Entries<K>,
    {
        let listed = crate::key::key_all(list)?;
        self.write(|state| {
            // Read under our lock: the store is written only by `pop`'s process, which runs
            // under this lock too, so nothing popped can slip between this read and the
            // deletions (lock order: FIFO, then store, as in `pop`).
            let mut in_store = known.map(|k| k.entries()).unwrap_or_default();
            in_store.retain(|(key, obj)| scope.holds(key.as_str(), obj));
            S::replace(state, listed, in_store, &scope);
            mark_reached(state, resource_version, scope.namespace(), known);
        });
        Ok(())
    }

    /// Sets how many queued deltas make the queue full (`usize::MAX`: never full).
    pub(super) fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity.max(1), Ordering::Relaxed);
        self.room.notify_waiters();
    }

    /// The capacity set, `None` when unbounded.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> Option<usize> {
        let capacity = self.capacity.load(Ordering::Relaxed);
        (capacity != usize::MAX).then_some(capacity)
    }

    /// Whether a writer that honours the capacity should wait (never once closed).
    fn is_full<K>(&self) -> bool
    where
        S: Entries<K>,
    {
        let capacity = self.capacity.load(Ordering::Relaxed);
        if capacity == usize::MAX {
            return false;
        }
        let state = self.state.lock();
        !state.closed && state.entries.deltas() >= capacity
    }

    /// `None` if the queue has room; else a future that is ready once a pop has made room
    /// (or the queue was closed).
    pub(super) fn full<K>(&self) -> Option<BoxFuture<'_, ()>>
    where
        S: Entries<K> + Send,
    {
        if !self.is_full() {
            return None;
        }
        Some(Box::pin(async move {
            loop {
                let notified = self.room.notified();
                let mut notified = std::pin::pin!(notified);
                notified.as_mut().enable();
                if !self.is_full() {
                    return;
                }
                notified.await;
            }
        }))
    }

    /// For reads: the state under the lock.
    pub(super) fn lock(&self) -> MutexGuard<'_, State<S>> {
        self.state.lock()
    }

    /// For writes that may queue something: runs `f` under the lock, then wakes a waiting pop.
    pub(super) fn write<R>(&self, f: impl FnOnce(&mut State<S>) -> R) -> R {
        let result = f(&mut self.state.lock());
        self.notify.notify_one();
        result
    }

    /// An add, update or delete: keys `obj`, marks the queue populated, queues the delta.
    pub(super) fn push_object<K: Resource>(
        &self,
        obj: Arc<K>,
        delta: impl FnOnce(Arc<K>) -> Delta<K>,
    ) -> Result<(), KeyError>
    where
        S: Entries<K>,
    {
        let key = meta_namespace_key(obj.as_ref())?;
        self.write(|state| {
            state.population.touch();
            state.entries.push(key, delta(obj));
        });
        Ok(())
    }

    /// A bookmark at `resource_version` (of `namespace`'s watch, or of the only one):
    /// marks the newest entry, or, with nothing queued, hands it to `known` (under the
    /// lock, so nothing popped is still being applied).
    pub(super) fn bookmark<K>(
        &self,
        resource_version: &str,
        namespace: Option<&str>,
        known: Option<&dyn KnownObjects<K>>,
    ) where
        S: Entries<K>,
    {
        mark_reached(&mut self.state.lock(), resource_version, namespace, known);
    }

    pub(super) fn close(&self) {
        self.state.lock().closed = true;
        self.notify.notify_waiters();
        self.room.notify_waiters();
    }

    pub(super) fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    pub(super) fn has_synced(&self) -> bool {
        self.state.lock().population.has_synced()
    }

    /// Expect `relists` first relists before the queue is synced.
    pub(super) fn expect_relists(&self, relists: usize) {
        self.state.lock().population.expect(relists);
    }

    /// Waits until something is queued, then runs `take` under the lock (it pops and
    /// processes); `Closed` once the queue is closed and empty. The wake-up is passed on
    /// when entries remain, for other waiting pops.
    async fn with_entries<K, R, E>(
        &self,
        take: impl FnOnce(&mut State<S>) -> Result<R, PopError<E>>,
    ) -> Result<R, PopError<E>>
    where
        S: Entries<K>,
    {
        let mut take = Some(take);
        loop {
            // Register for a wake-up before looking, so an add between the look and the
            // wait cannot be missed.
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.state.lock();
                if state.entries.len() > 0 {
                    let take = take.take().expect("called once: we return right after");
                    let result = take(&mut state);
                    let more = state.entries.len() > 0;
                    let room = state.entries.deltas() < self.capacity.load(Ordering::Relaxed);
                    drop(state);
                    if more {
                        self.notify.notify_one();
                    }
                    if room {
                        self.room.notify_waiters();
                    }
                    return result;
                }
                if state.closed {
                    return Err(PopError::Closed);
                }
            }
            notified.await;
        }
    }

    /// Pops one entry and runs `process` on it under the lock.
    pub(super) async fn pop<K, F, E>(&self, process: F) -> Result<(), PopError<E>>
    where
        S: Entries<K>,
        F: FnOnce(&Deltas<K>, bool) -> Result<(), ProcessError<E>>,
    {
        self.with_entries(|state| {
            let deltas = state
                .entries
                .pop_front()
                .expect("with_entries saw an entry");
            let in_initial_list = state.population.popped();
            let result = process(&deltas, in_initial_list);
            outcome(result, || state.entries.requeue(deltas))
        })
        .await
    }

    /// Pops entries for up to `max_keys` distinct keys (more if needed to finish the
    /// replace group the batch is in) and runs `process` on them under the lock.
    pub(super) async fn pop_batch<K, F, E>(
        &self,
        max_keys: usize,
        process: F,
    ) -> Result<(), PopError<E>>
    where
        S: Entries<K>,
        F: FnOnce(&[(Deltas<K>, bool)]) -> Result<(), ProcessError<E>>,
    {
        self.with_entries(|state| {
            let mut batch: Vec<(Deltas<K>, bool)> = Vec::new();
            let mut keys: crate::FastSet<ObjectKey> = crate::FastSet::default();
            let mut group = 0;
            while let Some(next_group) = state.entries.front_group() {
                let in_open_group = group != 0 && next_group == group;
                if !batch.is_empty() && keys.len() >= max_keys.max(1) && !in_open_group {
                    break;
                }
                let deltas = state.entries.pop_front().expect("front_group saw an entry");
                let in_initial_list = state.population.popped();
                keys.insert(deltas.key().clone());
                group = next_group;
                batch.push((deltas, in_initial_list));
            }
            let result = process(&batch);
            outcome(result, || {
                // Back to the front, in their order (a DeltaFifo re-adds at the back).
                for (deltas, _) in batch.into_iter().rev() {
                    state.entries.requeue(deltas);
                }
            })
        })
        .await
    }
}

/// The newest queued entry carries `resource_version` (reached by `namespace`'s watch, or
/// by the only one): once it is applied, so is everything queued before it. With nothing
/// queued, `known` is told at once (the caller holds the queue's lock).
fn mark_reached<K, S: Entries<K>>(
    state: &mut State<S>,
    resource_version: &str,
    namespace: Option<&str>,
    known: Option<&dyn KnownObjects<K>>,
) {
    if resource_version.is_empty() {
        return;
    }
    match (state.entries.newest_entry(), known, namespace) {
        (Some(entry), _, _) => entry.mark(namespace, resource_version),
        (None, Some(known), Some(ns)) => known.bookmark_in_namespace(ns, resource_version),
        (None, Some(known), None) => known.bookmark(resource_version),
        (None, None, _) => {}
    }
}

/// What `pop` returns for what `process` returned; `requeue` puts the entries back when it
/// asked for that.
fn outcome<E>(
    result: Result<(), ProcessError<E>>,
    requeue: impl FnOnce(),
) -> Result<(), PopError<E>> {
    match result {
        Ok(()) => Ok(()),
        Err(ProcessError::Requeue(err)) => {
            requeue();
            Err(PopError::Process(err))
        }
        Err(ProcessError::Fail(err)) => Err(PopError::Process(err)),
    }
}
