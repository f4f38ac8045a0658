//! A fixed short delay for the first attempts, then a fixed long one.

use std::{collections::HashMap, time::Duration};

use parking_lot::Mutex;

use super::RateLimiter;
use crate::workqueue::QueueItem;

/// Waits `fast` for an item's first `max_fast_attempts` attempts, then `slow`.
pub struct ItemFastSlowRateLimiter<T> {
    fast: Duration,
    slow: Duration,
    max_fast_attempts: u32,
    attempts: Mutex<HashMap<T, u32, foldhash::fast::RandomState>>,
}

impl<T> ItemFastSlowRateLimiter<T> {
    /// `fast` for the first `max_fast_attempts` attempts of an item, `slow` after.
    pub fn new(fast: Duration, slow: Duration, max_fast_attempts: u32) -> Self {
        Self {
            fast,
            slow,
            max_fast_attempts,
            attempts: Mutex::new(HashMap::default()),
        }
    }
}

impl<T: QueueItem> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let mut attempts = self.attempts.lock();
        let count = attempts.entry(item.clone()).or_insert(0);
        *count = count.saturating_add(1);
        if *count <= self.max_fast_attempts {
            self.fast
        } else {
            self.slow
        }
    }

    fn forget(&self, item: &T) {
        self.attempts.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.attempts.lock().get(item).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_for_the_first_attempts_then_slow() {
        let (fast, slow) = (Duration::from_millis(5), Duration::from_secs(10));
        let l = ItemFastSlowRateLimiter::new(fast, slow, 3);
        let delays: Vec<_> = (0..5).map(|_| l.when(&1)).collect();
        assert_eq!(delays, [fast, fast, fast, slow, slow]);
        assert_eq!(l.num_requeues(&1), 5);
        assert_eq!(l.when(&2), fast);
        l.forget(&1);
        assert_eq!((l.num_requeues(&1), l.when(&1)), (0, fast));
    }

    #[test]
    fn zero_fast_attempts_is_always_slow() {
        let l = ItemFastSlowRateLimiter::new(Duration::ZERO, Duration::from_secs(1), 0);
        assert_eq!(l.when(&"a"), Duration::from_secs(1));
    }
}
