//! client-go `util/workqueue/rate_limiting_queue_test.go`, on tokio's paused clock: Go reads
//! each `AddRateLimited`'s ready time off the delaying queue; here the item comes out of
//! `get` exactly when that time is reached, not a tick before.

use std::time::Duration;

use kube_informer::workqueue::{ItemExponentialFailureRateLimiter, QueueConfig, RateLimitingQueue};
use tokio::time::Instant;

/// How long after `add_rate_limited` the item is handed out.
async fn delay_of(q: &RateLimitingQueue<&'static str>, item: &'static str) -> Duration {
    let start = Instant::now();
    q.add_rate_limited(item);
    let got = q.get().await.unwrap();
    assert_eq!(*got.item(), item);
    start.elapsed()
}

/// Mirrors `TestRateLimitingQueue`.
#[tokio::test(start_paused = true)]
async fn rate_limiting_queue() {
    let limiter =
        ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1));
    let q = RateLimitingQueue::new(QueueConfig::default().rate_limiter(limiter));
    let ms = Duration::from_millis;
    assert_eq!(delay_of(&q, "one").await, ms(1));
    assert_eq!(delay_of(&q, "one").await, ms(2));
    assert_eq!(q.num_requeues(&"one"), 2);
    assert_eq!(delay_of(&q, "two").await, ms(1));
    assert_eq!(delay_of(&q, "two").await, ms(2));
    q.forget(&"one");
    assert_eq!(q.num_requeues(&"one"), 0);
    assert_eq!(delay_of(&q, "one").await, ms(1));
}
