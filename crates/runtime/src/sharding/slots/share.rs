//! [`RangeShare`]: what a replica serves in range mode — the slots its reconciles may run
//! for (with the reconciles running, per slot) and the share its informers list — as the
//! [`SlotServer`] the protocol drives.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_informer::list_watch::{LiveShare, ShardField, shard_hash};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::{SLOTS, SlotServer, SlotSet, slot_of};

/// One replica's share of a ring in range mode, shared by all its sharded controllers.
pub(crate) struct RangeShare {
    field: ShardField,
    /// The share of the controllers' sharded informers.
    informers: LiveShare,
    state: Mutex<Served>,
    /// Told when a reconcile ends (a narrow waits for the last of its slots).
    ended: Notify,
}

struct Served {
    slots: SlotSet,
    running: [u32; SLOTS],
}

impl std::fmt::Debug for RangeShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeShare")
            .field("field", &self.field)
            .field("slots", &self.state.lock().slots.len())
            .finish_non_exhaustive()
    }
}

/// A reconcile running for a key of a served slot; ends when dropped.
pub(crate) struct Running {
    share: Arc<RangeShare>,
    slot: usize,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.share.state.lock().running[self.slot] -= 1;
        self.share.ended.notify_waiters();
    }
}

impl RangeShare {
    /// Serving nothing yet, hashing `field`.
    pub(crate) fn new(field: ShardField) -> Self {
        Self {
            field,
            informers: LiveShare::new(None),
            state: Mutex::new(Served {
                slots: SlotSet::EMPTY,
                running: [0; SLOTS],
            }),
            ended: Notify::new(),
        }
    }

    /// The field hashed.
    pub(crate) fn field(&self) -> ShardField {
        self.field
    }

    /// The share the sharded informers select.
    pub(crate) fn informers(&self) -> &LiveShare {
        &self.informers
    }

    /// The slot of an object.
    pub(crate) fn slot_of(&self, meta: &ObjectMeta) -> usize {
        slot_of(shard_hash(self.field.value(meta)))
    }

    /// The slot of a namespace's objects (when hashing namespaces).
    pub(crate) fn slot_of_namespace(&self, namespace: Option<&str>) -> Option<usize> {
        (self.field == ShardField::Namespace)
            .then(|| slot_of(shard_hash(namespace.unwrap_or_default())))
    }

    /// A reconcile of a key of `slot` starts, if the slot is served; `None` otherwise (the
    /// key is another replica's, or is moving away).
    pub(crate) fn enter(self: &Arc<Self>, slot: usize) -> Option<Running> {
        let mut state = self.state.lock();
        if !state.slots.contains(slot) {
            return None;
        }
        state.running[slot] += 1;
        Some(Running {
            share: self.clone(),
            slot,
        })
    }

    fn set_informers(&self, slots: SlotSet) {
        self.informers.set(slots.selector(self.field));
    }
}

impl SlotServer for Arc<RangeShare> {
    fn widen(&self, slots: SlotSet) -> BoxFuture<'_, ()> {
        let served = {
            let mut state = self.state.lock();
            state.slots = state.slots.union(slots);
            state.slots
        };
        self.set_informers(served);
        Box::pin(async {})
    }

    fn narrow(&self, slots: SlotSet) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let served = {
                let mut state = self.state.lock();
                state.slots = state.slots.minus(slots);
                state.slots
            };
            // No reconcile of these slots starts any more; the running ones finish.
            loop {
                let ended = self.ended.notified();
                let running = self.state.lock().running;
                if slots.iter().all(|s| running[s] == 0) {
                    break;
                }
                ended.await;
            }
            self.set_informers(served);
        })
    }

    /// No reconcile starts any more. The informers are left as they are: reconciles
    /// draining on a graceful stop still read them, and they stop with the factory.
    fn halt(&self) {
        self.state.lock().slots = SlotSet::EMPTY;
    }
}
