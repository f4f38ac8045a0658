//! [`RateLimitingQueue`]: a [`DelayingQueue`] whose re-adds are paced by a [`RateLimiter`].

use std::ops::Deref;

use super::{DelayingQueue, QueueConfig, QueueItem};

/// A [`DelayingQueue`] with a rate limiter (client-go's `RateLimitingInterface`): failed items
/// come back after a delay that grows with each failure, and everything re-added is paced
/// overall. Derefs to [`DelayingQueue`], and through it to [`Queue`](super::Queue).
///
/// The limiter is [`QueueConfig::rate_limiter`], by default
/// [`default_controller_rate_limiter`](super::default_controller_rate_limiter).
#[doc(alias = "RateLimitingInterface")]
///
/// ```
/// use kube_informer::workqueue::{QueueConfig, RateLimitingQueue};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let queue: RateLimitingQueue<String> = RateLimitingQueue::new(QueueConfig::default());
/// queue.add("shop/web-1".to_owned());
/// let item = queue.get().await.unwrap();
/// // The reconcile failed: back in the queue after the limiter's delay (5 ms, doubling).
/// item.requeue_rate_limited();
/// let again = queue.get().await.unwrap();
/// assert_eq!(again.num_requeues(), 1);
/// again.forget(); // success: the failure count is reset
/// assert_eq!(queue.num_requeues(&"shop/web-1".to_owned()), 0);
/// # }
/// ```
pub struct RateLimitingQueue<T: QueueItem> {
    queue: DelayingQueue<T>,
}

impl<T: QueueItem> RateLimitingQueue<T> {
    /// A new, empty queue.
    pub fn new(config: QueueConfig<T>) -> Self {
        Self {
            queue: DelayingQueue::new(config),
        }
    }

    /// Adds `item` after the delay the rate limiter gives it (which counts as one more
    /// failure for per-item limiters).
    #[doc(alias = "AddRateLimited")]
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.queue.shared.limiter.when(&item);
        self.queue.add_after(item, delay);
    }

    /// Clears `item`'s rate-limiter history, so its next failure starts from the base delay.
    /// It does not remove the item from the queue.
    #[doc(alias = "Forget")]
    pub fn forget(&self, item: &T) {
        self.queue.shared.limiter.forget(item);
    }

    /// How many failures the rate limiter counts for `item`.
    #[doc(alias = "NumRequeues")]
    pub fn num_requeues(&self, item: &T) -> u32 {
        self.queue.shared.limiter.num_requeues(item)
    }
}

impl<T: QueueItem> Deref for RateLimitingQueue<T> {
    type Target = DelayingQueue<T>;

    fn deref(&self) -> &DelayingQueue<T> {
        &self.queue
    }
}

impl<T: QueueItem> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<T: QueueItem> Default for RateLimitingQueue<T> {
    fn default() -> Self {
        Self::new(QueueConfig::default())
    }
}

impl<T: QueueItem> std::fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("RateLimitingQueue")
            .field(&self.queue)
            .finish()
    }
}
