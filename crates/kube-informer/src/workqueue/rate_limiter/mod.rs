//! Rate limiters: how long a re-added item waits (client-go's `default_rate_limiters.go`).

mod bucket;
mod exponential;
mod fast_slow;

use std::{sync::Arc, time::Duration};

pub use self::{
    bucket::BucketRateLimiter, exponential::ItemExponentialFailureRateLimiter,
    fast_slow::ItemFastSlowRateLimiter,
};
use super::QueueItem;

/// Decides how long an item waits before it is queued again.
#[doc(alias = "TypedRateLimiter")]
pub trait RateLimiter<T>: Send + Sync {
    /// The delay for `item` now. For per-item limiters this also counts one more failure.
    fn when(&self, item: &T) -> Duration;
    /// Clears `item`'s history (call after it succeeded).
    fn forget(&self, item: &T);
    /// How many failures are counted for `item`.
    fn num_requeues(&self, item: &T) -> u32;
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

impl<T, R: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<R> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        (**self).num_requeues(item)
    }
}

/// The strictest of several limiters: the longest delay, the highest failure count. Every
/// limiter sees every call (so each keeps counting).
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// Combines `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let delays = self.limiters.iter().map(|l| l.when(item));
        delays.max().unwrap_or_default()
    }
    fn forget(&self, item: &T) {
        self.limiters.iter().for_each(|l| l.forget(item));
    }
    fn num_requeues(&self, item: &T) -> u32 {
        let counts = self.limiters.iter().map(|l| l.num_requeues(item));
        counts.max().unwrap_or_default()
    }
}

/// Caps another limiter's delay at `max_wait`.
pub struct WithMaxWaitRateLimiter<R> {
    inner: R,
    max_wait: Duration,
}

impl<R> WithMaxWaitRateLimiter<R> {
    /// `inner`, but never waiting longer than `max_wait`.
    pub fn new(inner: R, max_wait: Duration) -> Self {
        Self { inner, max_wait }
    }
}

impl<T, R: RateLimiter<T>> RateLimiter<T> for WithMaxWaitRateLimiter<R> {
    fn when(&self, item: &T) -> Duration {
        self.inner.when(item).min(self.max_wait)
    }
    fn forget(&self, item: &T) {
        self.inner.forget(item);
    }
    fn num_requeues(&self, item: &T) -> u32 {
        self.inner.num_requeues(item)
    }
}

/// client-go's default for controllers: per-item exponential backoff from 5 ms to 1000 s,
/// and overall no more than 10 re-adds a second with bursts of 100, whichever waits longer.
#[doc(alias = "DefaultControllerRateLimiter")]
pub fn default_controller_rate_limiter<T: QueueItem>() -> MaxOfRateLimiter<T> {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}
