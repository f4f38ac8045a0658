//! The queue between the reflector and the informer.
//!
//! The reflector pushes what it learns from the API server (`add`, `update`, `delete`,
//! `replace` after a relist, `resync` on a timer); the informer pops and applies it to the
//! cache, then tells the handlers. Two implementations share one contract, [`DeltaQueue`]:
//!
//! - [`RealFifo`], the default (client-go ≥ 1.36's `RealFIFO`): one entry per event, popped in
//!   strict arrival order.
//! - [`DeltaFifo`], the classic design (client-go's `DeltaFIFO`): one entry per *key*, holding
//!   every delta that arrived for it while it waited, oldest first.
//!
//! # How they differ for a handler
//!
//! | | `RealFifo` | `DeltaFifo` |
//! |---|---|---|
//! | order across objects | the order the events arrived | the order each key was *first* queued; a key that changes again keeps its place |
//! | one pop holds | one delta | all pending deltas of one key |
//! | delete of a never-seen key | delivered | dropped (neither queued nor known) |
//! | two deletes of a key in a row | both delivered | collapsed into one (keeping the non-tombstone) |
//! | relist (`replace`) | tombstones first, then the `Replaced` items | `Replaced` items first, then tombstones |
//!
//! In both, each object's own deltas are popped oldest first; tombstones are
//! [`DeletedObject::FinalStateUnknown`] for every key that was known (cached in the paired
//! store, or still queued) but is missing from the new list; `resync` queues a
//! [`Delta::Sync`] for every cached object that has nothing queued; and `has_synced` turns
//! true once everything the first `replace` queued has been popped (or at once, if an
//! `add`/`update`/`delete` came before any `replace`).
//!
//! # Popping
//!
//! [`DeltaQueue::pop`] waits for an entry and runs the `process` closure on it *while holding
//! the queue's lock*, as client-go does: the informer applies the deltas to the store in
//! `process`, so a concurrent `replace` or `resync` never compares against a store that is
//! half-way through an update. Keep `process` short and never call back into the queue from
//! it (it would deadlock). If `process` asks for a requeue ([`ProcessError::Requeue`]), the
//! entry goes back into the queue.

mod core;
mod delta;
mod delta_fifo;
mod real_fifo;

use std::{future::Future, sync::Arc};

pub use self::{
    delta::{DeletedObject, Delta, DeltaType, Deltas},
    delta_fifo::DeltaFifo,
    real_fifo::RealFifo,
};
use crate::{KeyError, ObjectKey};

/// What the FIFOs need to know of the cache they feed: which objects it holds. `replace`
/// emits tombstones for known objects missing from a relist, `resync` replays them, and
/// `DeltaFifo::delete` drops deletes of unknown keys. [`Store`](crate::Store) implements it.
#[doc(alias = "KeyListerGetter")]
pub trait KnownObjects<K>: Send + Sync {
    /// Every known key.
    fn list_keys(&self) -> Vec<ObjectKey>;
    /// The known object under `key`.
    fn get_by_key(&self, key: &str) -> Option<Arc<K>>;
    /// Every known `(key, object)` pair, taken at one instant.
    fn entries(&self) -> Vec<(ObjectKey, Arc<K>)>;
}

/// The write side of a FIFO: what a reflector needs, and all it may touch.
pub trait DeltaSink<K>: Send + Sync {
    /// Queues an [`Delta::Added`] for `obj`.
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError>;
    /// Queues an [`Delta::Updated`] for `obj`.
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError>;
    /// Queues a [`Delta::Deleted`] for `obj` (see the module docs for when it is dropped).
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError>;
    /// A relist: queues [`Delta::Replaced`] for every item of `list` and a
    /// [`DeletedObject::FinalStateUnknown`] tombstone for every known key missing from it.
    ///
    /// All or nothing: if an item has no key, nothing is queued and the error names it.
    fn replace(&self, list: Vec<Arc<K>>) -> Result<(), KeyError>;
    /// Queues a [`Delta::Sync`] for every known object that has nothing queued.
    fn resync(&self);
}

/// The full FIFO contract, implemented by [`RealFifo`] and [`DeltaFifo`].
#[doc(alias = "Queue")]
pub trait DeltaQueue<K>: DeltaSink<K> {
    /// Waits for an entry, removes it and runs `process` on it under the queue's lock.
    ///
    /// `process` gets the deltas and whether they belong to the first relist
    /// (`is_in_initial_list`). Entries still queued after [`close`](Self::close) are popped
    /// as usual; once the queue is closed *and* empty, `pop` returns [`PopError::Closed`].
    fn pop<F, E>(&self, process: F) -> impl Future<Output = Result<(), PopError<E>>> + Send
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<(), ProcessError<E>> + Send,
        E: Send;
    /// Like [`pop`](Self::pop), for a batch: entries of up to `max_keys` distinct keys, in
    /// order, in one call of `process` (each with its `is_in_initial_list`). `RealFifo`
    /// never splits the entries of one `replace` across batches, so a relist can be applied
    /// to the cache at once.
    fn pop_batch<F, E>(
        &self,
        max_keys: usize,
        process: F,
    ) -> impl Future<Output = Result<(), PopError<E>>> + Send
    where
        F: FnOnce(&[(Deltas<K>, bool)]) -> Result<(), ProcessError<E>> + Send,
        E: Send;
    /// Queues `deltas` unless something is already queued for their key: for a consumer to
    /// retry an entry without overwriting newer news for it.
    fn add_if_not_present(&self, deltas: Deltas<K>);
    /// Whether the first relist has been fully popped (or a plain add/update/delete came
    /// first).
    fn has_synced(&self) -> bool;
    /// Closes the queue: waiting and future pops return [`PopError::Closed`] once the queue
    /// is empty.
    fn close(&self);
    /// Whether [`close`](Self::close) was called.
    fn is_closed(&self) -> bool;
    /// The keys with something queued, in pop order (a key appears once).
    fn list_keys(&self) -> Vec<ObjectKey>;
    /// Everything queued for `key`, oldest first.
    fn get_by_key(&self, key: &str) -> Option<Deltas<K>>;
    /// How many entries a pop could take.
    fn len(&self) -> usize;
    /// Whether nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How a `process` closure given to [`DeltaQueue::pop`] can fail.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError<E> {
    /// Put the entry back in the queue (as `add_if_not_present` would) and report `E`.
    #[error("processing failed, the deltas were queued again: {0}")]
    Requeue(E),
    /// Report `E`; the entry is dropped.
    #[error("processing failed: {0}")]
    Fail(E),
}

/// Why [`DeltaQueue::pop`] returned without processing successfully.
#[derive(Debug, thiserror::Error)]
pub enum PopError<E> {
    /// The queue is closed and empty.
    #[error("the delta queue is closed and drained")]
    Closed,
    /// The `process` closure failed (the entry was requeued if it asked for that).
    #[error("processing a popped entry failed: {0}")]
    Process(E),
}

#[cfg(test)]
mod tests;
