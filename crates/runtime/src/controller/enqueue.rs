//! How the handlers queue a key for the controller's workers: at once, after a debounce, or
//! behind live changes (initial lists and resyncs, which can wait), noting what queued it.

use std::sync::Arc;

use kube_informer::{ObjectKey, workqueue::RateLimitingQueue};

use super::trigger::{Trigger, Triggers};

/// Keys of `K` objects to reconcile, as a handler pushes them.
pub(crate) type Queue = RateLimitingQueue<ObjectKey>;

/// How the handlers queue a key: at once, or after it has been quiet for the debounce
/// period (see [`ControllerOptions::debounce`](super::ControllerOptions::debounce)).
#[derive(Clone)]
pub(crate) struct Enqueue {
    pub(crate) queue: super::sink::Sink,
    pub(crate) debounce: Option<Arc<Debounce>>,
    /// Whether work that can wait (initial lists, resyncs) goes behind live changes.
    pub(crate) prioritize: bool,
    /// Why each queued key is queued (for its reconcile's span).
    pub(crate) triggers: Arc<Triggers>,
    /// Which relation queues through this handle (`primary`, `owns`, `watches`).
    pub(crate) relation: &'static str,
    /// The kind of the objects whose changes it queues.
    pub(crate) kind: Arc<str>,
}

impl Enqueue {
    /// This queue, for a relation's handler: its triggers name `relation` and `kind`.
    pub(crate) fn via(&self, relation: &'static str, kind: Arc<str>) -> Self {
        Self {
            relation,
            kind,
            ..self.clone()
        }
    }

    /// Notes that `event` of an object (`object`: its key, when not `key` itself) queues
    /// `key`.
    pub(super) fn note(
        &self,
        key: &ObjectKey,
        event: &'static str,
        object: impl FnOnce() -> Option<ObjectKey>,
    ) {
        self.triggers.note(key, || Trigger {
            event,
            relation: self.relation,
            kind: self.kind.clone(),
            object: object(),
        });
    }

    /// A live change.
    pub(crate) fn add(&self, key: ObjectKey) {
        match &self.debounce {
            None => self.queue.add(key),
            Some(debounce) => {
                debounce.changed(&key);
                // The queue keeps the earliest of a key's delays; the worker waits the rest.
                self.queue.add_after(key, debounce.period);
            }
        }
    }

    /// Work that can wait: an object of an informer's initial list, or a resync.
    pub(crate) fn add_later(&self, key: ObjectKey) {
        if self.prioritize && self.debounce.is_none() {
            self.queue.add_low_priority(key);
        } else {
            self.add(key);
        }
    }

    /// [`add`](Self::add), or [`add_later`](Self::add_later) when `later` (an object of
    /// an informer's initial list).
    pub(super) fn add_as(&self, key: ObjectKey, later: bool) {
        if later {
            self.add_later(key);
        } else {
            self.add(key);
        }
    }

    /// A resync, or a tick of [`reconcile_all_on`](super::Controller::reconcile_all_on):
    /// work that can wait, and not a change. It never restarts a debounced key's quiet
    /// period: if it did, a resync period shorter than the debounce would keep every key
    /// from ever being reconciled, and any resync would postpone a pending change. A key
    /// whose change is still in its quiet period is reconciled when that ends (the worker
    /// puts it back for the rest), the others at once.
    pub(crate) fn add_resync(&self, key: ObjectKey) {
        if self.prioritize {
            self.queue.add_low_priority(key);
        } else {
            self.queue.add(key);
        }
    }

    /// An update: [`add_resync`](Self::add_resync) when it is a resync (old and new the
    /// same object), [`add`](Self::add) otherwise.
    pub(super) fn add_update(&self, key: ObjectKey, resync: bool) {
        if resync {
            self.add_resync(key);
        } else {
            self.add(key);
        }
    }
}

/// When each key last changed, for the debounce.
pub(crate) struct Debounce {
    period: std::time::Duration,
    changed: parking_lot::Mutex<std::collections::HashMap<ObjectKey, tokio::time::Instant>>,
}

impl Debounce {
    pub(crate) fn new(period: std::time::Duration) -> Self {
        Self {
            period,
            changed: parking_lot::Mutex::default(),
        }
    }

    fn changed(&self, key: &ObjectKey) {
        self.changed
            .lock()
            .insert(key.clone(), tokio::time::Instant::now());
    }

    /// How much longer `key` must stay quiet; `None` when it may be reconciled now (then
    /// its change is forgotten).
    pub(crate) fn wait_left(&self, key: &ObjectKey) -> Option<std::time::Duration> {
        let mut changed = self.changed.lock();
        let due = *changed.get(key)? + self.period;
        let now = tokio::time::Instant::now();
        if due > now {
            return Some(due - now);
        }
        changed.remove(key);
        None
    }
}
