//! The queue semantics, rule by rule, and the concurrent ones under load.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;
use proptest::prelude::*;

use super::*;

fn sleep(ms: u64) -> tokio::time::Sleep {
    tokio::time::sleep(Duration::from_millis(ms))
}

async fn take<T: QueueItem>(q: &Queue<T>) -> WorkItem<T> {
    q.get().await.expect("queue shut down unexpectedly")
}

// ---- Queue ---------------------------------------------------------------------------------

#[tokio::test]
async fn items_come_out_in_order_and_at_most_once() {
    let q = Queue::default();
    for item in ["a", "b", "a", "c", "b"] {
        q.add(item);
    }
    assert_eq!(q.len(), 3);
    let mut out = Vec::new();
    while !q.is_empty() {
        out.push(*take(&q).await);
    }
    assert_eq!(out, ["a", "b", "c"]);
}

#[tokio::test]
async fn an_item_added_while_processing_waits_for_done_then_comes_back_once() {
    let q = Queue::default();
    q.add("a");
    let first = take(&q).await;
    q.add("a");
    q.add("a");
    assert_eq!(
        q.len(),
        0,
        "a second worker must not get it while the first holds it"
    );
    q.add("b");
    let b = take(&q).await;
    assert_eq!(*b, "b");
    first.done();
    assert_eq!(q.len(), 1, "queued again, once, when done");
    assert_eq!(*take(&q).await, "a");
    assert!(q.is_empty());
}

#[tokio::test]
async fn dropping_the_guard_marks_done_and_done_without_readd_does_not_requeue() {
    let q = Queue::default();
    q.add(1);
    drop(take(&q).await);
    assert!(q.is_empty());
    q.add(1);
    assert_eq!(q.len(), 1, "after done the item can be queued again");
}

#[tokio::test]
async fn shut_down_ignores_adds_hands_out_what_is_queued_then_returns_none() {
    let q = Queue::default();
    q.add("a");
    q.shut_down();
    q.add("b");
    assert!(q.is_shutting_down());
    assert_eq!(*take(&q).await, "a");
    assert!(q.get().await.is_none());
    assert!(q.get().await.is_none());
}

#[tokio::test]
async fn shut_down_wakes_every_waiting_worker() {
    let q: Queue<u32> = Queue::default();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.get().await.is_none() })
        })
        .collect();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    q.shut_down();
    for w in workers {
        assert!(w.await.unwrap());
    }
}

#[tokio::test]
async fn shut_down_with_drain_waits_for_items_being_processed() {
    let q = Queue::default();
    q.add("a");
    q.add("b");
    let a = take(&q).await;
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(
        !drain.is_finished(),
        "drain returned while 'a' was still processing"
    );
    // Workers keep draining what is queued: "b" is still handed out.
    let b = take(&q).await;
    drop(a);
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(
        !drain.is_finished(),
        "drain returned while 'b' was still processing"
    );
    drop(b);
    drain.await.unwrap();
    assert!(q.get().await.is_none());
}

/// client-go's `TestForceQueueShutdownUsingShutDown`: a second, plain shut down makes a
/// waiting drain return although an item is still held.
#[tokio::test]
async fn a_plain_shut_down_forces_a_waiting_drain_to_return() {
    let q = Queue::default();
    q.add("stuck");
    let held = take(&q).await;
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert!(!drain.is_finished(), "the drain waits for the held item");
    q.shut_down();
    drain.await.unwrap();
    drop(held);
}

#[tokio::test]
async fn shut_down_with_drain_returns_at_once_when_idle() {
    let q: Queue<u8> = Queue::default();
    q.shut_down_with_drain().await;
    assert!(q.is_shutting_down());
}

/// N workers, few keys re-added constantly while being processed, at either priority
/// (seeded, random): a key is never processed by two workers at once, and every add is
/// followed by a processing run that starts after it (nothing is lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_workers_never_process_a_key_twice_at_once_and_lose_no_add() {
    const KEYS: u32 = 8;
    const ADDS: u64 = 20_000;
    const WORKERS: usize = 8;
    let q: Queue<u32> = Queue::default();
    let latest = Arc::new(Mutex::new(HashMap::<u32, u64>::new()));
    let processed = Arc::new(Mutex::new(HashMap::<u32, u64>::new()));
    let in_flight: Arc<Vec<AtomicUsize>> =
        Arc::new((0..KEYS).map(|_| AtomicUsize::new(0)).collect());

    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (q, latest, processed, in_flight) = (
                q.clone(),
                latest.clone(),
                processed.clone(),
                in_flight.clone(),
            );
            tokio::spawn(async move {
                while let Some(item) = q.get().await {
                    let key = *item;
                    let was = in_flight[key as usize].fetch_add(1, Ordering::SeqCst);
                    assert_eq!(was, 0, "key {key} handed to two workers at once");
                    let seen = latest.lock().get(&key).copied().unwrap_or(0);
                    // Hold the item a little, so adds land while it is processed.
                    for _ in 0..3 {
                        tokio::task::yield_now().await;
                    }
                    let mut done = processed.lock();
                    let entry = done.entry(key).or_insert(0);
                    *entry = (*entry).max(seen);
                    drop(done);
                    in_flight[key as usize].fetch_sub(1, Ordering::SeqCst);
                }
            })
        })
        .collect();

    // A small xorshift, seeded: the interleaving varies with the scheduler, the keys do not.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for generation in 1..=ADDS {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let key = (state % u64::from(KEYS)) as u32;
        latest.lock().insert(key, generation);
        // Either priority: a low add of a queued key keeps its place, a high one promotes it.
        if state & 0x100 == 0 {
            q.add(key);
        } else {
            q.add_low_priority(key);
        }
        if generation % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    q.shut_down_with_drain().await;
    for w in workers {
        w.await.expect("a worker panicked");
    }
    assert_eq!(
        *processed.lock(),
        *latest.lock(),
        "some add was never processed"
    );
}

#[tokio::test]
async fn low_priority_items_wait_for_the_front_line_and_an_add_promotes_them() {
    let q: Queue<&str> = Queue::default();
    for item in ["list-1", "list-2", "list-3"] {
        q.add_low_priority(item);
    }
    q.add("live-1");
    q.add_low_priority("live-1"); // already queued, in front: stays in front
    q.add("list-3"); // a live change of a listed item: promoted
    assert_eq!(q.len(), 4);
    let first = take(&q).await;
    assert_eq!(*first, "live-1");
    // Added again while held, at low priority: comes back behind the front line.
    q.add_low_priority("live-1");
    first.done();
    q.add("live-2");
    let order: Vec<&str> = [
        take(&q).await,
        take(&q).await,
        take(&q).await,
        take(&q).await,
        take(&q).await,
    ]
    .into_iter()
    .map(|item| *item)
    .collect();
    assert_eq!(order, ["list-3", "live-2", "list-1", "list-2", "live-1"]);
    assert!(q.is_empty());
}

/// Random adds at both priorities, takes and releases, 300 seeds: an item is never handed
/// out while a worker holds it, and every add is followed by exactly one hand-out of its
/// item (a promoted item's old place in the low line never hands it out again).
#[tokio::test]
async fn random_priorities_never_hand_out_a_held_item_and_lose_no_add() {
    use futures_util::FutureExt;
    for seed in 1..=300u64 {
        let q: Queue<u8> = Queue::default();
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut held: HashMap<u8, WorkItem<u8>> = HashMap::new();
        // Items added since they were last handed out: each must come out once more.
        let mut owed: std::collections::HashSet<u8> = std::collections::HashSet::new();
        for _ in 0..300 {
            let key = (next() % 6) as u8;
            match next() % 5 {
                0 => {
                    q.add(key);
                    owed.insert(key);
                }
                1 => {
                    q.add_low_priority(key);
                    owed.insert(key);
                }
                2 | 3 => {
                    if let Some(Some(item)) = q.get().now_or_never() {
                        let key = *item;
                        assert!(
                            !held.contains_key(&key),
                            "seed {seed}: {key} handed out twice"
                        );
                        assert!(
                            owed.remove(&key),
                            "seed {seed}: {key} handed out, never added"
                        );
                        held.insert(key, item);
                    }
                }
                _ => {
                    held.remove(&key);
                }
            }
        }
        held.clear();
        let mut rest = Vec::new();
        while let Some(Some(item)) = q.get().now_or_never() {
            rest.push(*item);
        }
        rest.sort_unstable();
        let mut owed: Vec<u8> = owed.into_iter().collect();
        owed.sort_unstable();
        assert_eq!(rest, owed, "seed {seed}: what was added and not handed out");
        assert!(q.is_empty(), "seed {seed}");
    }
}

#[tokio::test]
async fn a_shut_down_queue_still_hands_out_its_low_priority_items() {
    let q: Queue<u32> = Queue::default();
    q.add_low_priority(1);
    q.add(2);
    q.shut_down();
    q.add_low_priority(3); // ignored
    assert_eq!(*take(&q).await, 2);
    assert_eq!(*take(&q).await, 1);
    assert!(q.get().await.is_none());
}

// ---- DelayingQueue -------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn delayed_items_arrive_in_ready_order_without_real_sleeping() {
    let q = DelayingQueue::default();
    q.add_after("slow", Duration::from_secs(3));
    q.add_after("fast", Duration::from_secs(1));
    q.add_after("now", Duration::ZERO);
    assert_eq!(q.len(), 1, "a zero delay adds at once");
    assert_eq!(q.waiting(), 2);
    sleep(999).await;
    assert_eq!(q.len(), 1);
    sleep(2).await;
    assert_eq!(q.len(), 2);
    sleep(2000).await;
    let mut out = Vec::new();
    while !q.is_empty() {
        out.push(*take(&q).await);
    }
    assert_eq!(out, ["now", "fast", "slow"]);
    assert_eq!(q.waiting(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_earliest_ready_time_wins_for_an_item_already_waiting() {
    let q = DelayingQueue::default();
    q.add_after("a", Duration::from_secs(10));
    q.add_after("a", Duration::from_secs(1)); // earlier: wins
    q.add_after("b", Duration::from_secs(1));
    q.add_after("b", Duration::from_secs(10)); // later: ignored
    assert_eq!(q.waiting(), 2);
    sleep(1001).await;
    assert_eq!(q.len(), 2);
    let (a, b) = (take(&q).await, take(&q).await);
    drop((a, b));
    sleep(20_000).await;
    assert!(
        q.is_empty(),
        "the superseded ready times must not add the items again"
    );
}

#[tokio::test(start_paused = true)]
async fn shut_down_drops_waiting_items() {
    let q = DelayingQueue::default();
    q.add_after(1, Duration::from_secs(1));
    q.shut_down();
    assert_eq!(q.waiting(), 0);
    sleep(5000).await;
    assert!(q.get().await.is_none());
    q.add_after(2, Duration::ZERO);
    assert!(q.is_empty(), "add_after after shutdown is ignored");
}

#[tokio::test(start_paused = true)]
async fn a_hundred_thousand_waiting_items_share_one_timer() {
    let q = DelayingQueue::default();
    for i in 0..100_000u32 {
        q.add_after(i, Duration::from_millis(u64::from(i % 1000) + 1));
    }
    assert_eq!(q.waiting(), 100_000);
    sleep(1001).await;
    assert_eq!(q.len(), 100_000);
    assert_eq!(*take(&q).await % 1000, 0, "the first ready comes out first");
}

#[test]
fn add_after_outside_a_runtime_adds_at_once_instead_of_panicking() {
    let q = DelayingQueue::default();
    q.add_after("a", Duration::from_secs(60));
    assert_eq!(q.len(), 1);
    assert_eq!(q.waiting(), 0);
}

// ---- RateLimitingQueue ---------------------------------------------------------------------

fn exponential() -> QueueConfig<&'static str> {
    QueueConfig::default().rate_limiter(ItemExponentialFailureRateLimiter::new(
        Duration::from_secs(1),
        Duration::from_secs(60),
    ))
}

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

proptest! {
    /// Whatever the sequence of adds, gets and dones, the queue never hands out an item that
    /// is being processed, never holds one twice, and ends holding exactly the items that
    /// were added and not yet handed out since (a naive model of client-go's queue).
    #[test]
    fn queue_matches_a_naive_model(ops in prop::collection::vec((0u8..3, 0u8..5), 1..200)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let q: Queue<u8> = Queue::default();
            let mut held: Vec<WorkItem<u8>> = Vec::new();
            let mut model_queue: Vec<u8> = Vec::new();
            let mut model_dirty: std::collections::HashSet<u8> = Default::default();
            for (op, item) in ops {
                match op {
                    0 => {
                        q.add(item);
                        if model_dirty.insert(item) && !held.iter().any(|h| **h == item) {
                            model_queue.push(item);
                        }
                    }
                    1 if !model_queue.is_empty() => {
                        let got = take(&q).await;
                        let expected = model_queue.remove(0);
                        prop_assert_eq!(*got, expected);
                        model_dirty.remove(&expected);
                        prop_assert!(!held.iter().any(|h| **h == expected), "handed out twice");
                        held.push(got);
                    }
                    _ if !held.is_empty() => {
                        let i = usize::from(item) % held.len();
                        let done = held.remove(i);
                        let value = *done;
                        drop(done);
                        if model_dirty.contains(&value) {
                            model_queue.push(value);
                        }
                    }
                    _ => {}
                }
                prop_assert_eq!(q.len(), model_queue.len());
            }
            Ok(())
        })?;
    }
}

// ---- metrics -------------------------------------------------------------------------------

#[cfg(feature = "metrics")]
#[tokio::test(start_paused = true)]
async fn metrics_follow_client_gos_names_and_meanings() {
    use prometheus_client::{encoding::text::encode, registry::Registry};

    let mut registry = Registry::default();
    let metrics = crate::metrics::Metrics::register(&mut registry);
    let q = RateLimitingQueue::new(exponential().name("pods").metrics(&metrics));
    let unnamed: Queue<&str> = Queue::new(QueueConfig::default().metrics(&metrics));
    unnamed.add("ignored: no name, no metrics");

    q.add("a");
    q.add("b");
    q.add("a");
    sleep(2000).await;
    let a = take(&q).await; // waited 2 s in the queue
    sleep(5000).await; // processing for 5 s
    let scrape = |registry: &Registry| {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text
    };
    let text = scrape(&registry);
    for expected in [
        r#"workqueue_depth{name="pods"} 1"#,
        r#"workqueue_adds_total{name="pods"} 2"#,
        r#"workqueue_queue_duration_seconds_sum{name="pods"} 2.0"#,
        r#"workqueue_queue_duration_seconds_count{name="pods"} 1"#,
        r#"workqueue_unfinished_work_seconds{name="pods"} 5.0"#,
        r#"workqueue_longest_running_processor_seconds{name="pods"} 5.0"#,
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    assert!(
        !text.contains("ignored"),
        "an unnamed queue records nothing"
    );

    a.requeue_rate_limited();
    let text = scrape(&registry);
    for expected in [
        r#"workqueue_work_duration_seconds_sum{name="pods"} 5.0"#,
        r#"workqueue_retries_total{name="pods"} 1"#,
        r#"workqueue_unfinished_work_seconds{name="pods"} 0.0"#,
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    drop(q);
    let text = scrape(&registry);
    assert!(
        !text.contains(r#"workqueue_unfinished_work_seconds{name="pods"}"#),
        "dropped queues leave the in-flight gauges"
    );
}
