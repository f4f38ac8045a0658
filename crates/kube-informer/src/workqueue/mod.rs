//! Work queues for controllers (client-go's `util/workqueue`).
//!
//! Event handlers put *keys* into a queue; workers take them out, reconcile, and report the
//! outcome. The queue guarantees, like client-go's:
//!
//! - **Fair**: items are handed out in the order they were added.
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
//! drop it).
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
#[cfg(feature = "metrics")]
mod metrics;
mod queue;
mod rate_limiter;
mod rate_limiting;
mod workers;

use std::hash::Hash;

#[cfg(feature = "metrics")]
pub use self::metrics::WorkqueueMetrics;
pub use self::{
    delaying::DelayingQueue,
    queue::{Queue, WorkItem},
    rate_limiter::{
        BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
        MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter, default_controller_rate_limiter,
    },
    rate_limiting::RateLimitingQueue,
    workers::{Requeue, Workers},
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
}

impl<T> Default for QueueConfig<T> {
    fn default() -> Self {
        Self {
            name: None,
            #[cfg(feature = "metrics")]
            metrics: None,
            rate_limiter: None,
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
}

#[cfg(test)]
mod tests;
