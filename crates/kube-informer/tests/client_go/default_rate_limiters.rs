//! client-go `util/workqueue/default_rate_limiters_test.go`: the limiters' delays, exactly.

use std::time::Duration;

use kube_informer::workqueue::{
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOfRateLimiter, RateLimiter,
    WithMaxWaitRateLimiter,
};
use parking_lot::Mutex;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Mirrors `TestItemExponentialFailureRateLimiter`.
#[test]
fn item_exponential_failure_rate_limiter() {
    let limiter = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1));
    let one = "one";
    let delays: Vec<Duration> = (0..5).map(|_| limiter.when(&one)).collect();
    assert_eq!(delays, [ms(1), ms(2), ms(4), ms(8), ms(16)]);
    assert_eq!(limiter.num_requeues(&one), 5);
    assert_eq!((limiter.when(&"two"), limiter.when(&"two")), (ms(1), ms(2)));
    assert_eq!(limiter.num_requeues(&"two"), 2);
    limiter.forget(&one);
    assert_eq!(limiter.num_requeues(&one), 0);
    assert_eq!(limiter.when(&one), ms(1));
}

/// Mirrors `TestItemExponentialFailureRateLimiterOverFlow`: huge failure counts saturate
/// at the maximum instead of overflowing.
#[test]
fn item_exponential_failure_rate_limiter_overflow() {
    let limiter = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1000));
    for _ in 0..5 {
        limiter.when(&"one");
    }
    assert_eq!(limiter.when(&"one"), ms(32));
    for _ in 0..1000 {
        limiter.when(&"overflow1");
    }
    assert_eq!(limiter.when(&"overflow1"), Duration::from_secs(1000));

    let minute = Duration::from_secs(60);
    let limiter = ItemExponentialFailureRateLimiter::new(minute, minute * 60 * 1000);
    for _ in 0..2 {
        limiter.when(&"two");
    }
    assert_eq!(limiter.when(&"two"), minute * 4);
    for _ in 0..1000 {
        limiter.when(&"overflow2");
    }
    assert_eq!(limiter.when(&"overflow2"), minute * 60 * 1000);
}

/// Mirrors `TestItemFastSlowRateLimiter`.
#[test]
fn item_fast_slow_rate_limiter() {
    let limiter = ItemFastSlowRateLimiter::new(ms(5), Duration::from_secs(10), 3);
    let delays: Vec<Duration> = (0..5).map(|_| limiter.when(&"one")).collect();
    let slow = Duration::from_secs(10);
    assert_eq!(delays, [ms(5), ms(5), ms(5), slow, slow]);
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!((limiter.when(&"two"), limiter.when(&"two")), (ms(5), ms(5)));
    assert_eq!(limiter.num_requeues(&"two"), 2);
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), ms(5));
}

/// Mirrors `TestMaxOfRateLimiter`.
#[test]
fn max_of_rate_limiter() {
    let limiter: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
        Box::new(ItemFastSlowRateLimiter::new(
            ms(5),
            Duration::from_secs(3),
            3,
        )),
        Box::new(ItemExponentialFailureRateLimiter::new(
            ms(1),
            Duration::from_secs(1),
        )),
    ]);
    let delays: Vec<Duration> = (0..5).map(|_| limiter.when(&"one")).collect();
    let three = Duration::from_secs(3);
    assert_eq!(delays, [ms(5), ms(5), ms(5), three, three]);
    assert_eq!(limiter.num_requeues(&"one"), 5);
    assert_eq!((limiter.when(&"two"), limiter.when(&"two")), (ms(5), ms(5)));
    assert_eq!(limiter.num_requeues(&"two"), 2);
    limiter.forget(&"one");
    assert_eq!(limiter.num_requeues(&"one"), 0);
    assert_eq!(limiter.when(&"one"), ms(5));
}

/// client-go's test-only `StepRateLimiter`: `base` for the first `threshold` calls, then
/// `max`, whatever the item.
struct StepRateLimiter {
    count: Mutex<u32>,
    base: Duration,
    max: Duration,
    threshold: u32,
}

impl RateLimiter<u32> for StepRateLimiter {
    fn when(&self, _: &u32) -> Duration {
        let mut count = self.count.lock();
        *count += 1;
        if *count <= self.threshold {
            self.base
        } else {
            self.max
        }
    }
    fn forget(&self, _: &u32) {}
    fn num_requeues(&self, _: &u32) -> u32 {
        0
    }
}

/// Mirrors `TestWithMaxWaitRateLimiter`.
#[test]
fn with_max_wait_rate_limiter() {
    let step = StepRateLimiter {
        count: Mutex::new(0),
        base: ms(5),
        max: Duration::from_secs(1000),
        threshold: 100,
    };
    let limiter = WithMaxWaitRateLimiter::new(step, Duration::from_secs(500));
    for i in 0..100 {
        assert_eq!(limiter.when(&i), ms(5));
    }
    for i in 100..200 {
        assert_eq!(limiter.when(&i), Duration::from_secs(500));
    }
}
