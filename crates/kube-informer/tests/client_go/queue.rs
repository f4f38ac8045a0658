//! client-go `util/workqueue/queue_test.go`: the de-duplicating work queue, and its shutdown
//! with and without draining. Go's `Done(item)` is dropping our `WorkItem` guard.

use std::{collections::HashMap, sync::Arc, time::Duration};

use kube_informer::workqueue::{Queue, QueueConfig};

fn queue<T: Clone + Eq + std::hash::Hash + Send + Sync + 'static>() -> Queue<T> {
    Queue::new(QueueConfig::default())
}

/// Mirrors `TestBasic` (both shutdown kinds): 50 producers, 10 consumers; nothing added
/// after shutdown is handed out, and the queue ends empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic() {
    for drain in [false, true] {
        let q: Queue<i64> = queue();
        let producers: Vec<_> = (0..50)
            .map(|i| {
                let q = q.clone();
                tokio::spawn(async move {
                    for _ in 0..50 {
                        q.add(i);
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..10)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    while let Some(item) = q.get().await {
                        assert_ne!(*item.item(), -1, "an item added after shutdown");
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for p in producers {
            p.await.unwrap();
        }
        if drain {
            q.shut_down_with_drain().await;
        } else {
            q.shut_down();
        }
        q.add(-1); // "added after shutdown!"
        for c in consumers {
            c.await.unwrap();
        }
        assert_eq!(q.len(), 0);
    }
}

/// Mirrors `TestAddWhileProcessing`: an item re-added while held comes back once done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_while_processing() {
    for drain in [false, true] {
        let q: Queue<i64> = queue();
        for i in 0..50 {
            q.add(i);
        }
        let consumers: Vec<_> = (0..10)
            .map(|_| {
                let q = q.clone();
                tokio::spawn(async move {
                    let mut counters: HashMap<i64, u32> = HashMap::new();
                    while let Some(item) = q.get().await {
                        let count = counters.entry(*item.item()).or_default();
                        *count += 1;
                        if *count < 2 {
                            q.add(*item.item());
                        }
                    }
                    counters
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;
        if drain {
            q.shut_down_with_drain().await;
        } else {
            q.shut_down();
        }
        for c in consumers {
            c.await.unwrap();
        }
        assert_eq!(q.len(), 0);
    }
}

/// Mirrors `TestLen`.
#[test]
fn len() {
    let q: Queue<&str> = queue();
    q.add("foo");
    assert_eq!(q.len(), 1);
    q.add("bar");
    assert_eq!(q.len(), 2);
    q.add("foo"); // already queued
    assert_eq!(q.len(), 2);
}

/// Mirrors `TestReinsert`.
#[tokio::test]
async fn reinsert() {
    let q: Queue<&str> = queue();
    q.add("foo");
    let item = q.get().await.unwrap();
    assert_eq!(*item.item(), "foo");
    q.add(*item.item());
    drop(item); // Done: it was re-added while held, so it is queued again
    let again = q.get().await.unwrap();
    assert_eq!(*again.item(), "foo");
    drop(again);
    assert_eq!(q.len(), 0);
}

/// Mirrors `TestCollapse` (without the trace queue: our queue has no pluggable backing
/// store, so "Touch was called" is asserted as its effect — one item, not two).
#[tokio::test]
async fn collapse() {
    let q: Queue<&str> = queue();
    q.add("bar");
    q.add("bar");
    let item = q.get().await.unwrap();
    assert_eq!(*item.item(), "bar");
    drop(item);
    assert_eq!(q.len(), 0);
}

/// Mirrors `TestCollapseWhileProcessing`: two adds while held make one more pass, and no
/// second worker gets the item until the first is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collapse_while_processing() {
    let q: Queue<&str> = queue();
    q.add("foo");
    let held = q.get().await.unwrap();
    q.add("foo");
    q.add("foo");
    let second = tokio::spawn({
        let q = q.clone();
        async move { q.get().await.map(|item| *item.item()) }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !second.is_finished(),
        "the worker waits until the first is done"
    );
    drop(held);
    assert_eq!(second.await.unwrap(), Some("foo"));
    assert_eq!(q.len(), 0);
}

/// Waits until `get` reports shutdown, as the Go tests' `for !shuttingDown { q.Get() }`.
async fn until_get_says_shut_down(q: &Queue<&'static str>) {
    while q.get().await.is_some() {}
}

/// Mirrors `TestQueueDrainageUsingShutDownWithDrain`: the drain returns once the items
/// handed out are done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_drainage_using_shut_down_with_drain() {
    let q: Queue<&str> = queue();
    q.add("foo");
    q.add("bar");
    let (first, second) = (q.get().await.unwrap(), q.get().await.unwrap());
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    until_get_says_shut_down(&q).await;
    drop(first);
    drop(second);
    drain.await.unwrap();
}

/// Mirrors `TestNoQueueDrainageUsingShutDown`: a plain shutdown does not wait.
#[tokio::test]
async fn no_queue_drainage_using_shut_down() {
    let q: Queue<&str> = queue();
    q.add("foo");
    q.add("bar");
    let _held = (q.get().await.unwrap(), q.get().await.unwrap());
    q.shut_down(); // returns at once though both are still held
    assert!(q.is_shutting_down());
}

/// Mirrors `TestForceQueueShutdownUsingShutDown`: `shut_down` ends a waiting drain at once
/// ("a second SIGTERM").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_queue_shutdown_using_shut_down() {
    let q: Queue<&str> = queue();
    q.add("foo");
    q.add("bar");
    let _held = (q.get().await.unwrap(), q.get().await.unwrap());
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    until_get_says_shut_down(&q).await;
    q.shut_down();
    drain.await.unwrap(); // the items are still held
}

/// Mirrors `TestQueueDrainageUsingShutDownWithDrainWithDirtyItem`: an item re-added while
/// held is still handed out during the drain, then `get` reports shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_drainage_using_shut_down_with_drain_with_dirty_item() {
    let q: Queue<&'static str> = queue();
    q.add("foo");
    let gotten = q.get().await.unwrap();
    q.add("foo");
    let drain = tokio::spawn({
        let q = q.clone();
        async move { q.shut_down_with_drain().await }
    });
    while !q.is_shutting_down() {
        tokio::task::yield_now().await;
    }
    drop(gotten);
    let again = q.get().await.expect("the dirty item is handed out");
    drop(again);
    assert!(q.get().await.is_none(), "then it is done");
    drain.await.unwrap();
}

/// Mirrors `TestGarbageCollection`: a queue keeps no reference to an item once it is done.
#[tokio::test]
async fn garbage_collection() {
    let q: Queue<Arc<str>> = queue();
    let object: Arc<str> = Arc::from("hello");
    q.add(object.clone());
    drop(q.get().await.unwrap());
    assert_eq!(Arc::strong_count(&object), 1, "the queue let go of it");
}
