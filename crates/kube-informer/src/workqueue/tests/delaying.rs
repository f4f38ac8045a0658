//! The delaying queue: items ready in order, one timer for all.

use std::time::Duration;

use super::*;

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
