//! client-go `util/workqueue/delaying_queue_test.go` on tokio's paused clock (Go's fake
//! clock): delays, de-duplication to the earliest, and ordering by ready time — exactly.

use std::time::Duration;

use kube_informer::workqueue::{DelayingQueue, QueueConfig};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Go's `fakeClock.Step(d)` followed by waiting for the queue's timer to act.
async fn step(d: Duration) {
    tokio::time::advance(d).await;
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn delaying() -> DelayingQueue<&'static str> {
    DelayingQueue::new(QueueConfig::default())
}

async fn next(q: &DelayingQueue<&'static str>) -> &'static str {
    *q.get().await.expect("not shut down").item()
}

/// Mirrors `TestSimpleQueue`.
#[tokio::test(start_paused = true)]
async fn simple_queue() {
    let q = delaying();
    q.add_after("foo", ms(50));
    step(Duration::ZERO).await;
    assert_eq!(q.len(), 0, "should not have added");
    step(ms(60)).await;
    assert_eq!(q.len(), 1, "should have added");
    assert_eq!(next(&q).await, "foo");
    step(Duration::from_secs(10)).await;
    assert_eq!(q.len(), 0, "added only once");
}

/// Mirrors `TestDeduping`: a second `add_after` of a waiting item keeps the earlier time.
#[tokio::test(start_paused = true)]
async fn deduping() {
    let q = delaying();
    q.add_after("foo", ms(50));
    q.add_after("foo", ms(70));
    step(Duration::ZERO).await;
    assert_eq!(q.len(), 0);
    step(ms(60)).await;
    assert_eq!(q.len(), 1, "at the earlier time");
    assert_eq!(next(&q).await, "foo");
    step(ms(20)).await;
    assert_eq!(q.len(), 0, "not again at the later time");

    q.add_after("foo", ms(50));
    q.add_after("foo", ms(30));
    step(Duration::ZERO).await;
    assert_eq!(q.len(), 0);
    step(ms(40)).await;
    assert_eq!(q.len(), 1, "the earlier of the two, though added second");
    assert_eq!(next(&q).await, "foo");
    step(ms(20)).await;
    assert_eq!(q.len(), 0);
}

/// Mirrors `TestAddTwoFireEarly`.
#[tokio::test(start_paused = true)]
async fn add_two_fire_early() {
    let q = delaying();
    q.add_after("foo", Duration::from_secs(1));
    q.add_after("bar", ms(50));
    step(Duration::ZERO).await;
    assert_eq!(q.len(), 0);
    step(ms(60)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(next(&q).await, "bar");
    q.add_after("baz", Duration::from_secs(2));
    step(Duration::from_secs(1)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(next(&q).await, "foo");
    step(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 1);
    assert_eq!(next(&q).await, "baz");
}

/// Mirrors `TestCopyShifting`: items come out by ready time, not by the order added.
#[tokio::test(start_paused = true)]
async fn copy_shifting() {
    let q = delaying();
    q.add_after("foo", Duration::from_secs(1));
    q.add_after("bar", ms(500));
    q.add_after("baz", ms(250));
    step(Duration::ZERO).await;
    assert_eq!(q.len(), 0);
    step(Duration::from_secs(2)).await;
    assert_eq!(q.len(), 3);
    assert_eq!(
        [next(&q).await, next(&q).await, next(&q).await],
        ["baz", "bar", "foo"]
    );
}
