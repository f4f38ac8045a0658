//! An overall token bucket: pace everything re-added, whatever the item.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::RateLimiter;

/// A token bucket shared by all items: `burst` re-adds at once, then `qps` a second. Each
/// call reserves a token; when none is left, the delay is how long until it will be.
/// Per-item history is not kept (`forget` does nothing, `num_requeues` is 0).
///
/// A `qps` that is not a positive finite number means "no limit"; a `burst` of 0 is taken as 1.
/// Time is tokio's clock, so tests with a paused clock control it.
pub struct BucketRateLimiter {
    qps: f64,
    burst: f64,
    /// (tokens now, when they were counted)
    bucket: Mutex<(f64, Option<Instant>)>,
}

impl BucketRateLimiter {
    /// `qps` re-adds a second on average, `burst` at once.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps,
            burst,
            bucket: Mutex::new((burst, None)),
        }
    }

    fn reserve(&self) -> Duration {
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let mut bucket = self.bucket.lock();
        let (tokens, last) = &mut *bucket;
        if let Some(last) = *last {
            let refill = now.saturating_duration_since(last).as_secs_f64() * self.qps;
            *tokens = (*tokens + refill).min(self.burst);
        }
        *last = Some(now);
        *tokens -= 1.0;
        if *tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(-*tokens / self.qps).unwrap_or(Duration::MAX)
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }
    fn forget(&self, _item: &T) {}
    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn when(l: &BucketRateLimiter) -> Duration {
        RateLimiter::<()>::when(l, &())
    }

    #[tokio::test(start_paused = true)]
    async fn burst_then_paced_by_qps() {
        let l = BucketRateLimiter::new(10.0, 3);
        let burst: Vec<_> = (0..3).map(|_| when(&l)).collect();
        assert_eq!(burst, [Duration::ZERO; 3]);
        // Reservations queue up behind each other, 100 ms apart.
        assert_eq!(when(&l), Duration::from_millis(100));
        assert_eq!(when(&l), Duration::from_millis(200));
        // After a second the bucket has refilled (to at most `burst`).
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(when(&l), Duration::ZERO);
        tokio::time::advance(Duration::from_secs(60)).await;
        let refilled: Vec<_> = (0..4).map(|_| when(&l)).collect();
        assert_eq!(refilled[..3], [Duration::ZERO; 3]);
        assert_eq!(refilled[3], Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn nonsense_settings_do_not_panic() {
        for qps in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let l = BucketRateLimiter::new(qps, 0);
            assert_eq!(when(&l), Duration::ZERO, "qps {qps} means no limit");
        }
        let tiny = BucketRateLimiter::new(f64::MIN_POSITIVE, 0);
        assert_eq!(when(&tiny), Duration::ZERO, "burst 0 is taken as 1");
        assert_eq!(
            when(&tiny),
            Duration::MAX,
            "a delay past Duration::MAX saturates"
        );
    }
}
