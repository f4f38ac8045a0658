//! Work queues for controllers (client-go's `util/workqueue`).
//!
//! Event handlers put *keys* into a queue; workers take them out, reconcile, and report the
//! outcome. The queue guarantees, like client-go's:
//!
//! - **Fair**: items are handed out in the order they were added; with
//!   [`QueueConfig::fair_by`], groups of items (namespaces, tenants, clusters) take turns,
//!   so one group's backlog never holds back another's single item by more than one item
//!   per group, and [`QueueConfig::max_in_flight_per_group`] caps what one group may hold.
//! - **Stingy**: an item is queued at most once however often it is added before a worker
//!   takes it (the "dirty" set).
//! - **Exclusive**: an item is never handed to two workers at once. Added again while a
//!   worker holds it, it is queued again when that worker is done, never lost.
//! - **Shut-down aware**: after [`Queue::shut_down`] adds are ignored, the items already
//!   queued are still handed out, then [`Queue::get`] returns `None`.
//!
//! Unlike client-go, a worker cannot forget to call `Done`, call it twice, or `Forget` the
//! wrong item: [`Queue::get`] returns a [`WorkItem`] guard, dropping it marks the item done,
//! and [`WorkItem::forget`], [`WorkItem::requeue_rate_limited`] and
//! [`WorkItem::requeue_after`] consume it.
//!
//! Three handles share one implementation, as client-go's embed each other:
//! [`Queue`] (the basics), [`DelayingQueue`] (+ `add_after`, with one timer for all waiting
//! items), [`RateLimitingQueue`] (+ `add_rate_limited`, `forget`, `num_requeues` over a
//! [`RateLimiter`]). Each derefs to the one before. All are cheap to clone, `Send + Sync`,
//! and every clone is the same queue.
//!
//! [`Workers`] run N tasks over a queue, calling your function with each item and applying
//! its [`Requeue`] answer; they are owned by the value that started them (drain, abort, or
//! drop it). With [`WorkerScaling`] their number follows the queue's wait, between a floor
//! and a ceiling.
//!
//! This module depends on nothing else in the crate, so it can be used on its own.
//!
//! ```
//! use kube_informer::workqueue::{QueueConfig, RateLimitingQueue};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let queue = RateLimitingQueue::new(QueueConfig::default().name("pods"));
//! queue.add("default/web-1".to_owned());
//! queue.add("default/web-1".to_owned()); // already queued: ignored
//! assert_eq!(queue.len(), 1);
//!
//! let worker = queue.clone();
//! let item = worker.get().await.expect("not shut down");
//! match reconcile(&item) {
//!     Ok(()) => item.forget(),                 // success: reset its backoff, mark done
//!     Err(()) => item.requeue_rate_limited(),  // failure: retry later, with backoff
//! }
//! queue.shut_down();
//! assert!(queue.get().await.is_none());
//! # }
//! # fn reconcile(_key: &str) -> Result<(), ()> { Ok(()) }
//! ```

mod delaying;
mod fair;
#[cfg(feature = "metrics")]
mod metrics;
mod queue;
mod rate_limiter;
mod rate_limiting;
mod workers;

use std::{borrow::Cow, hash::Hash, sync::Arc};

#[cfg(feature = "metrics")]
pub use self::metrics::{TOP_GROUPS, WorkqueueMetrics};
pub use self::{
    delaying::DelayingQueue,
    queue::{Queue, WorkItem},
    rate_limiter::{
        BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
        MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter,
    },
    rate_limiting::RateLimitingQueue,
    workers::{Requeue, WorkerScaling, Workers},
};

/// What a queue can hold: a small, hashable, cheaply cloned value (usually an object key).
pub trait QueueItem: Clone + Eq + Hash + Send + Sync + 'static {}

impl<T: Clone + Eq + Hash + Send + Sync + 'static> QueueItem for T {}

/// How a queue is built: its name (for metrics and logs), where its metrics go, and the rate
/// limiter behind `add_rate_limited` / [`WorkItem::requeue_rate_limited`].
pub struct QueueConfig<T> {
    pub(crate) name: Option<String>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<WorkqueueMetrics>,
    pub(crate) rate_limiter: Option<Box<dyn RateLimiter<T>>>,
    pub(crate) group_of: Option<fair::GroupFn<T>>,
    pub(crate) group_limit: Option<usize>,
}

impl<T> Default for QueueConfig<T> {
    fn default() -> Self {
        Self {
            name: None,
            #[cfg(feature = "metrics")]
            metrics: None,
            rate_limiter: None,
            group_of: None,
            group_limit: None,
        }
    }
}

impl<T: QueueItem> QueueConfig<T> {
    /// The queue's name: the `name` label of its metrics, and how logs refer to it.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The rate limiter (default: [`default_controller_rate_limiter`]).
    #[must_use]
    pub fn rate_limiter(mut self, limiter: impl RateLimiter<T> + 'static) -> Self {
        self.rate_limiter = Some(Box::new(limiter));
        self
    }

    /// Shares the workers fairly between groups of items: `group_of` names each item's
    /// group (a namespace, a tenant, a cluster), and the groups with queued items take
    /// turns, one item each (default: one group, first come first served).
    ///
    /// The guarantee: while a group has an item waiting in a lane, no other group is
    /// handed two items of that lane. So a group that queues one item waits behind at most
    /// one item of each other group, however long their backlogs — with `G` groups queued,
    /// its item is among the next `G` handed out. Within a group, and between the two lanes
    /// ([`Queue::add_low_priority`]), the order is as without groups. The cost: one call
    /// of `group_of` and one hash of the group's name per add.
    ///
    /// `group_of` runs under the queue's lock: keep it quick, and never block or await in
    /// it. If it panics, the panic is logged and the item goes to the group named `""`
    /// (nothing is lost).
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use kube_informer::workqueue::{Queue, QueueConfig};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// // Items are "namespace/name"; the namespace is the group.
    /// let config = QueueConfig::default()
    ///     .fair_by(|key: &String| Cow::Borrowed(key.split('/').next().unwrap_or("")));
    /// let queue = Queue::new(config);
    /// for i in 0..1000 {
    ///     queue.add(format!("busy/cm-{i}"));
    /// }
    /// queue.add("quiet/cm".to_owned());
    /// let first = queue.get().await.unwrap();
    /// let second = queue.get().await.unwrap();
    /// assert_eq!((first.as_str(), second.as_str()), ("busy/cm-0", "quiet/cm"));
    /// # }
    /// ```
    #[must_use]
    pub fn fair_by<F>(mut self, group_of: F) -> Self
    where
        F: for<'a> Fn(&'a T) -> Cow<'a, str> + Send + Sync + 'static,
    {
        self.group_of = Some(Arc::new(group_of));
        self
    }

    /// At most `limit` items of one group held by workers at once (at least 1; default: no
    /// limit): a group whose items are slow to process cannot occupy every worker; the
    /// others take the rest. A group at its limit keeps its items queued until one of its
    /// items is done. Groups are those of [`fair_by`](Self::fair_by) (without it, one group:
    /// the limit then caps the whole queue).
    #[must_use]
    pub fn max_in_flight_per_group(mut self, limit: Option<usize>) -> Self {
        self.group_limit = limit;
        self
    }
}

#[cfg(test)]
mod tests;
