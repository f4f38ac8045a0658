//! Where a controller's handlers put the keys they queue: its own queue, or — for a
//! member of a [fleet](crate::fleet) — the fleet's one queue, under the member's name.

use std::{sync::Arc, time::Duration};

use kube_informer::{ObjectKey, workqueue::RateLimitingQueue};

/// Takes keys for a controller whose queue is not its own (a fleet member's).
pub(crate) trait KeySink: Send + Sync {
    /// A live change.
    fn add(&self, key: ObjectKey);
    /// A change to reconcile after `delay` (a debounce).
    fn add_after(&self, key: ObjectKey, delay: Duration);
    /// Work that can wait (an initial list, a resync).
    fn add_low_priority(&self, key: ObjectKey);
}

/// The queue a controller's handlers fill.
#[derive(Clone)]
pub(crate) enum Sink {
    /// The controller's own queue (a plain controller: no indirection on this path).
    Own(RateLimitingQueue<ObjectKey>),
    /// Someone else's: a fleet's queue, as one member sees it.
    Shared(Arc<dyn KeySink>),
}

impl Sink {
    pub(crate) fn add(&self, key: ObjectKey) {
        match self {
            Self::Own(queue) => queue.add(key),
            Self::Shared(sink) => sink.add(key),
        }
    }

    pub(crate) fn add_after(&self, key: ObjectKey, delay: Duration) {
        match self {
            Self::Own(queue) => queue.add_after(key, delay),
            Self::Shared(sink) => sink.add_after(key, delay),
        }
    }

    pub(crate) fn add_low_priority(&self, key: ObjectKey) {
        match self {
            Self::Own(queue) => queue.add_low_priority(key),
            Self::Shared(sink) => sink.add_low_priority(key),
        }
    }
}
