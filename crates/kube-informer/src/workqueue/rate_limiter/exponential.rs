//! Per-item exponential backoff.

use std::{collections::HashMap, time::Duration};

use parking_lot::Mutex;

use super::RateLimiter;
use crate::workqueue::QueueItem;

/// Waits `base × 2^failures` for an item, capped at `max`; [`forget`](RateLimiter::forget)
/// resets the item. Overflow-safe: any delay past `max` (however many failures) is `max`.
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32, foldhash::fast::RandomState>>,
}

impl<T> ItemExponentialFailureRateLimiter<T> {
    /// Backoff from `base`, doubling per failure, never above `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            base,
            max,
            failures: Mutex::new(HashMap::default()),
        }
    }

    /// The delay after `failures` earlier failures.
    fn backoff(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures).filter(|_| failures < 32);
        match factor.and_then(|f| self.base.checked_mul(f)) {
            Some(delay) if delay <= self.max => delay,
            _ => self.max,
        }
    }
}

impl<T: QueueItem> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let mut failures = self.failures.lock();
        let count = failures.entry(item.clone()).or_insert(0);
        let previous = *count;
        *count = count.saturating_add(1);
        self.backoff(previous)
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_per_failure_and_caps_at_max() {
        let l = ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(1),
            Duration::from_secs(1),
        );
        let delays: Vec<_> = (0..12).map(|_| l.when(&"a").as_millis()).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000]);
        assert_eq!(l.num_requeues(&"a"), 12);
        assert_eq!(
            l.when(&"b"),
            Duration::from_millis(1),
            "items are counted apart"
        );
        l.forget(&"a");
        assert_eq!(l.num_requeues(&"a"), 0);
        assert_eq!(l.when(&"a"), Duration::from_millis(1));
    }

    #[test]
    fn never_overflows_however_many_failures() {
        let max = Duration::from_secs(1000);
        let l = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), max);
        for failures in [20, 31, 32, 33, 63, 64, 1000, u32::MAX - 1, u32::MAX] {
            assert_eq!(l.backoff(failures), max, "{failures}");
        }
        // A base that overflows on its own first doubling.
        let huge = ItemExponentialFailureRateLimiter::<u8>::new(Duration::MAX, Duration::MAX);
        assert_eq!(huge.backoff(0), Duration::MAX);
        assert_eq!(huge.backoff(1), Duration::MAX);
        // The failure counter saturates instead of wrapping back to the base delay.
        l.failures.lock().insert("x", u32::MAX);
        assert_eq!(l.when(&"x"), max);
        assert_eq!(l.num_requeues(&"x"), u32::MAX);
    }
}
