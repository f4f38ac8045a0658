//! The basic queue: order, at most once, re-adds while processing, shutting down, and
//! many workers at once.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use parking_lot::Mutex;

use super::*;

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
