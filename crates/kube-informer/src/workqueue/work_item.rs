//! [`WorkItem`]: the guard a worker holds while it processes an item.

use std::{fmt, ops::Deref, sync::Arc, time::Duration};

use super::{QueueItem, queue::Shared};

/// An item handed to a worker. It stays "processing" (no other worker gets it) until the
/// guard is dropped or consumed; dropping it marks the item done.
///
/// The consuming methods decide what happens next: [`forget`](Self::forget) after success,
/// [`requeue_rate_limited`](Self::requeue_rate_limited) after a failure,
/// [`requeue_after`](Self::requeue_after) to look again later.
#[must_use = "dropping a WorkItem at once marks it done; hold it while processing"]
pub struct WorkItem<T: QueueItem> {
    shared: Arc<Shared<T>>,
    /// `None` only once done.
    item: Option<T>,
}

impl<T: QueueItem> WorkItem<T> {
    pub(super) fn new(shared: Arc<Shared<T>>, item: T) -> Self {
        Self {
            shared,
            item: Some(item),
        }
    }

    /// The item.
    pub fn item(&self) -> &T {
        self.item
            .as_ref()
            .expect("a WorkItem holds its item until done")
    }

    /// Marks the item done (the same as dropping the guard).
    #[doc(alias = "Done")]
    pub fn done(self) {}

    /// Success: resets the item's rate-limiter history (its backoff starts over), then marks
    /// it done.
    #[doc(alias = "Forget")]
    pub fn forget(self) {
        self.shared.limiter.forget(self.item());
    }

    /// Failure: queues the item again after the rate limiter's delay for it (growing with
    /// each failure), then marks it done.
    #[doc(alias = "AddRateLimited")]
    pub fn requeue_rate_limited(self) {
        let delay = self.shared.limiter.when(self.item());
        super::delaying::add_after(&self.shared, self.item().clone(), delay);
    }

    /// Queues the item again after `delay`, then marks it done. The rate limiter's history
    /// is left as it is.
    #[doc(alias = "AddAfter")]
    pub fn requeue_after(self, delay: Duration) {
        super::delaying::add_after(&self.shared, self.item().clone(), delay);
    }

    /// How many times the rate limiter has seen this item fail since it was last forgotten.
    #[doc(alias = "NumRequeues")]
    pub fn num_requeues(&self) -> u32 {
        self.shared.limiter.num_requeues(self.item())
    }
}

impl<T: QueueItem> Deref for WorkItem<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.item()
    }
}

impl<T: QueueItem> Drop for WorkItem<T> {
    fn drop(&mut self) {
        if let Some(item) = self.item.take() {
            self.shared.done(&item);
        }
    }
}

impl<T: QueueItem + fmt::Debug> fmt::Debug for WorkItem<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WorkItem").field(&self.item).finish()
    }
}
