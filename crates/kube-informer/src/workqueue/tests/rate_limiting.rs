//! The rate-limiting queue and its limiters.

use std::time::Duration;

use super::*;

#[tokio::test(start_paused = true)]
async fn failures_back_off_exponentially_and_forget_resets() {
    let q = RateLimitingQueue::new(exponential());
    q.add("a");
    for (attempt, backoff_ms) in [(1, 1000), (2, 2000), (3, 4000)] {
        let item = take(&q).await;
        item.requeue_rate_limited();
        assert_eq!(q.num_requeues(&"a"), attempt);
        sleep(backoff_ms - 1).await;
        assert!(
            q.is_empty(),
            "attempt {attempt} came back before {backoff_ms} ms"
        );
        sleep(2).await;
        assert_eq!(
            q.len(),
            1,
            "attempt {attempt} did not come back after {backoff_ms} ms"
        );
    }
    let item = take(&q).await;
    assert_eq!(item.num_requeues(), 3);
    item.forget();
    assert_eq!(q.num_requeues(&"a"), 0);
    q.add_rate_limited("a");
    sleep(1001).await;
    assert_eq!(q.len(), 1, "after forget the backoff starts over at 1 s");
}

#[tokio::test(start_paused = true)]
async fn requeue_after_delays_without_counting_a_failure() {
    let q = RateLimitingQueue::new(exponential());
    q.add("a");
    take(&q).await.requeue_after(Duration::from_secs(30));
    assert_eq!(q.num_requeues(&"a"), 0);
    sleep(29_999).await;
    assert!(q.is_empty());
    sleep(2).await;
    assert_eq!(q.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_requeue_while_the_item_is_queued_again_does_not_duplicate_it() {
    let q = RateLimitingQueue::new(exponential());
    q.add("a");
    let item = take(&q).await;
    q.add("a"); // new news while processing
    item.requeue_rate_limited();
    assert_eq!(q.len(), 1, "queued again once, by done");
    sleep(1001).await;
    assert_eq!(q.len(), 1, "the delayed re-add found it queued already");
}

#[tokio::test(start_paused = true)]
async fn default_queue_uses_client_gos_controller_limiter() {
    let q: RateLimitingQueue<u32> = RateLimitingQueue::default();
    // The per-item part: 5 ms, 10 ms, ...
    q.add_rate_limited(1);
    sleep(4).await;
    assert!(q.is_empty());
    sleep(2).await;
    assert_eq!(q.len(), 1);
    assert_eq!(q.num_requeues(&1), 1);
    // The overall bucket: 100 at once, then 10 a second.
    for i in 100..300 {
        q.forget(&i);
        q.add_rate_limited(i);
    }
    sleep(1000).await;
    // 99 tokens remained after the first add; 9.x refilled meanwhile.
    let n = q.len() - 1;
    assert!(
        (99..=110).contains(&n),
        "{n} items through the bucket in ~1 s"
    );
}

#[test]
fn max_of_and_max_wait_combine_limiters() {
    let l = MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(1),
            Duration::from_secs(100),
        )),
        Box::new(ItemFastSlowRateLimiter::new(
            Duration::from_millis(3),
            Duration::from_secs(1),
            2,
        )),
    ]);
    let delays: Vec<_> = (0..4).map(|_| l.when(&"x").as_millis()).collect();
    assert_eq!(
        delays,
        [3, 3, 1000, 1000],
        "the longer delay of the two, each call"
    );
    assert_eq!(l.num_requeues(&"x"), 4);
    l.forget(&"x");
    assert_eq!(l.num_requeues(&"x"), 0, "forget reaches every limiter");

    let capped = WithMaxWaitRateLimiter::new(l, Duration::from_millis(500));
    let delays: Vec<_> = (0..4).map(|_| capped.when(&"x").as_millis()).collect();
    assert_eq!(delays, [3, 3, 500, 500]);
}
