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
//! Beside them, `Fifo` (client-go's plain `FIFO`, with the feature `client-go-caches`) is
//! not a delta queue and does not feed
//! an informer: it holds the newest state of each key and drops deleted ones, for a consumer
//! that wants to process every live object once, at its newest state (it implements
//! [`DeltaSink`], so a [`Reflector`](crate::reflector::Reflector) can fill it).
//!
//! # Which queue
//!
//! | you want | use |
//! |---|---|
//! | an informer, events in arrival order (the default) | [`RealFifo`] |
//! | an informer, all pending changes of a key handled together | [`DeltaFifo`] |
//! | every live object once at its newest state, deletes dropped, retry by requeue | `Fifo` (feature `client-go-caches`) |
//! | keys to reconcile, rate-limited retries, one worker per key | [`RateLimitingQueue`](crate::workqueue::RateLimitingQueue) |
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
//! # The resourceVersion the cache has reached
//!
//! client-go 1.36's `RealFIFO` queues a `Bookmark` delta and its atomic relists a
//! `ReplacedAll` entry carrying the list's version, so the store can report the newest
//! version applied. Here a queue entry (a `Deltas`) may carry the version reached once
//! it is applied: the last entry of a relist carries the list's
//! version, and a bookmark marks the newest queued entry (or, with nothing queued, goes
//! straight to the store). The informer sets the store's version from those marks and, with
//! a `RealFifo` (strict event order), from each event's own version; handlers never see a
//! bookmark.
//!
//! # client-go's atomic FIFO shapes
//!
//! client-go 1.36's `RealFIFO` with atomic events queues one `ReplacedAll` entry per relist
//! and one `SyncAll` entry per resync, and pops whole batches. The guarantees its tests
//! check hold here by other means:
//!
//! | client-go | here |
//! |---|---|
//! | one `ReplacedAll` entry per relist, applied under one lock | the entries of one `replace` share a group that `pop_batch` never splits; the informer applies a batch under one store lock |
//! | `ReplacedAll` carries the list's resourceVersion | the group's last entry carries it |
//! | one `SyncAll` entry per resync | one `Sync` entry per cached object with nothing queued (a resync is not atomic in client-go's non-atomic mode either; handlers see per-object updates in both) |
//! | `Bookmark` delta | a mark on the newest queued entry, or the store directly when empty |
//! | tombstones for missing keys | the same, as typed [`DeletedObject::FinalStateUnknown`] |
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
#[cfg(feature = "client-go-caches")]
mod plain;
mod real_fifo;
pub(crate) mod sink;

use std::{future::Future, sync::Arc};

use futures_util::future::BoxFuture;

pub use self::{
    delta::{DeletedObject, Delta, DeltaType, Deltas, deletion_handling_meta_namespace_key},
    delta_fifo::DeltaFifo,
    real_fifo::RealFifo,
};

/// client-go's plain `FIFO` (feature `client-go-caches`).
#[cfg(feature = "client-go-caches")]
pub use self::plain::Fifo;
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
    /// The consumer has reached `resource_version` with nothing left to apply: a bookmark
    /// that arrived while the queue was empty (called under the queue's lock, so nothing
    /// popped is still being applied). The default does nothing.
    fn bookmark(&self, _resource_version: &str) {}
    /// [`bookmark`](Self::bookmark) for the watch of one namespace, of several watched
    /// into the same cache (the default: nothing).
    fn bookmark_in_namespace(&self, _namespace: &str, _resource_version: &str) {}
}

/// The write side of a FIFO: what a reflector needs, and all it may touch.
pub trait DeltaSink<K>: Send + Sync {
    /// Queues an [`Delta::Added`] for `obj`.
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError>;
    /// Queues an [`Delta::Updated`] for `obj`.
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError>;
    /// Queues a [`Delta::Deleted`] for `obj` (see the module docs for when it is dropped).
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError>;
    /// A relist at `resource_version`: queues [`Delta::Replaced`] for every item of `list`
    /// and a [`DeletedObject::FinalStateUnknown`] tombstone for every known key missing from
    /// it; the last entry carries `resource_version`.
    ///
    /// All or nothing: if an item has no key, nothing is queued and the error names it.
    fn replace(&self, list: Vec<Arc<K>>, resource_version: &str) -> Result<(), KeyError>;
    /// A relist of one namespace only (one of several watched into the same cache): like
    /// [`replace`](Self::replace), but tombstones are made only for keys of `namespace`.
    /// The default replaces everything (for sinks that are not shared by namespaces).
    fn replace_in_namespace(
        &self,
        namespace: &str,
        list: Vec<Arc<K>>,
        resource_version: &str,
    ) -> Result<(), KeyError> {
        let _ = namespace;
        self.replace(list, resource_version)
    }
    /// A relist of part of the collection (a sharded informer's share changed): like
    /// [`replace`](Self::replace), but tombstones are made only for the known or queued
    /// objects that `part` holds and `list` lacks; objects outside `part` are left as they
    /// are. Returns `false`, queuing nothing, if this sink cannot (the default): the
    /// reflector then relists the whole share.
    fn replace_part(
        &self,
        part: &dyn Fn(&K) -> bool,
        list: Vec<Arc<K>>,
        resource_version: &str,
    ) -> Result<bool, KeyError> {
        let _ = (part, list, resource_version);
        Ok(false)
    }
    /// Queues a [`Delta::Sync`] for every known object that has nothing queued.
    fn resync(&self);
    /// A watch bookmark: the server has sent everything up to `resource_version`. The
    /// newest queued entry carries it; with
    /// nothing queued it goes straight to the known objects
    /// ([`KnownObjects::bookmark`]). Nothing is handed to handlers. The default does
    /// nothing.
    fn bookmark(&self, _resource_version: &str) {}
    /// A bookmark of the watch of one namespace, of several watched into the same cache:
    /// the mark says which namespace reached the version
    /// (per namespace, see [`KnownObjects::bookmark_in_namespace`]). The default is
    /// [`bookmark`](Self::bookmark) (for sinks not shared by namespaces).
    fn bookmark_in_namespace(&self, namespace: &str, resource_version: &str) {
        let _ = namespace;
        self.bookmark(resource_version);
    }
    /// The newest state of `key` the queue knows: queued, or else known to the store. For a
    /// writer that lost an object (a transform that panicked) and must not lose the key.
    /// The default knows nothing.
    fn last_known(&self, _key: &str) -> Option<Arc<K>> {
        None
    }
    /// Whether the queue is at its capacity: `None` when it can take more, else a future
    /// that is ready once its consumer has made room (or the queue was closed).
    ///
    /// A [`Reflector`](crate::reflector::Reflector) asks before reading each watch event
    /// and waits while the queue is full, so a consumer that falls behind stops the reads
    /// from the watch's socket and the API server holds the events (see
    /// [`RealFifo::with_capacity`]). Writes themselves never wait and never fail for lack of
    /// room: a relist is queued whole, whatever its size. The default is never full.
    fn full(&self) -> Option<BoxFuture<'_, ()>> {
        None
    }
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

/// What a relist covers: tombstones are made only for known or queued objects inside it.
pub(crate) enum Scope<'a, K> {
    /// The whole collection.
    All,
    /// One namespace (of several watched into the same cache).
    Namespace(&'a str),
    /// The objects `part` holds (a share of a sharded collection that changed).
    Part(&'a dyn Fn(&K) -> bool),
}

impl<K> Scope<'_, K> {
    /// Whether the object `obj`, under `key`, is inside.
    pub(crate) fn holds(&self, key: &str, obj: &K) -> bool {
        match self {
            Self::All => true,
            Self::Namespace(ns) => key
                .strip_prefix(ns)
                .is_some_and(|rest| rest.starts_with('/')),
            Self::Part(part) => part(obj),
        }
    }

    /// The namespace whose watch the relist's version is from (`None`: the only watch).
    pub(crate) fn namespace(&self) -> Option<&str> {
        match self {
            Self::Namespace(ns) => Some(ns),
            Self::All | Self::Part(_) => None,
        }
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
