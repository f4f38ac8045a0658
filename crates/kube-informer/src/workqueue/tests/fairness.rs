//! Fairness between groups: turns, a tenant's backlog against another's single change with
//! real workers on a paused clock, and the per-group cap.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::*;

/// Items are `namespace/name`: the namespace is the group.
fn by_namespace(key: &str) -> Cow<'_, str> {
    Cow::Borrowed(key.split_once('/').map_or("", |(ns, _)| ns))
}

fn fair() -> QueueConfig<String> {
    QueueConfig::default().fair_by(|key: &String| by_namespace(key))
}

async fn order(q: &Queue<String>, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(take(q).await.item().clone());
    }
    out
}

#[tokio::test]
async fn groups_take_turns_one_item_each_and_keep_their_own_order() {
    let q = Queue::new(fair());
    for i in 0..4 {
        q.add(format!("a/{i}"));
    }
    q.add("b/0".to_owned());
    q.add("c/0".to_owned());
    q.add("c/1".to_owned());
    let got = order(&q, 7).await;
    assert_eq!(got, ["a/0", "b/0", "c/0", "a/1", "c/1", "a/2", "a/3"]);
    assert!(q.is_empty());
}

#[tokio::test]
async fn live_changes_of_any_group_go_before_any_group_s_backlog() {
    let q = Queue::new(fair());
    for i in 0..3 {
        q.add_low_priority(format!("a/list-{i}"));
        q.add_low_priority(format!("b/list-{i}"));
    }
    q.add("c/live".to_owned());
    q.add("b/list-2".to_owned()); // changed: promoted to the front lane of b
    let got = order(&q, 7).await;
    let want = [
        "c/live", "b/list-2", "a/list-0", "b/list-0", "a/list-1", "b/list-1", "a/list-2",
    ];
    assert_eq!(got, want);
    assert!(
        q.is_empty(),
        "b/list-2's old place in the low lane is not handed out"
    );
}

/// Issue #41's case: tenant A queues 10,000 keys, then tenant B one; 4 workers, 10 ms per
/// reconcile. B's key starts in the first round of reconciles after it was queued (within 4
/// reconcile slots), not after A's backlog (~2,500 slots) — and without fairness it does.
#[tokio::test(start_paused = true)]
async fn one_key_of_a_quiet_tenant_waits_one_round_not_behind_a_backlog() {
    async fn start_of_b(config: QueueConfig<String>) -> (Duration, usize) {
        let queue = RateLimitingQueue::new(config);
        let started = Arc::new(Mutex::new(Vec::new()));
        let t0 = Instant::now();
        let mut workers = Workers::spawn(&queue, 4, {
            let started = started.clone();
            move |key: String| {
                started.lock().push((key, t0.elapsed()));
                async {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    Requeue::Never
                }
            }
        });
        for i in 0..10_000 {
            queue.add(format!("tenant-a/cm-{i}"));
        }
        queue.add("tenant-b/cm".to_owned());
        assert!(workers.drain(None).await);
        let started = started.lock();
        assert_eq!(started.len(), 10_001, "every key once");
        let b = started
            .iter()
            .position(|(k, _)| k == "tenant-b/cm")
            .unwrap();
        (started[b].1, b)
    }
    let (at, position) = start_of_b(fair()).await;
    assert!(
        at <= Duration::from_millis(30) && position < 16,
        "fair: B started at {at:?}, {position} reconciles in"
    );
    let (at, position) = start_of_b(QueueConfig::default()).await;
    assert!(
        at >= Duration::from_secs(24) && position == 10_000,
        "without fairness B waits for the backlog: {at:?}, {position}"
    );
}

/// 3 slow keys of one tenant, 8 workers, at most 2 per tenant: never more than 2 of the
/// tenant's run at once, and the other tenants' keys use the other workers meanwhile.
#[tokio::test(start_paused = true)]
async fn a_group_at_its_cap_leaves_the_other_workers_to_the_other_groups() {
    let queue = RateLimitingQueue::new(fair().max_in_flight_per_group(Some(2)));
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let finished = Arc::new(Mutex::new(HashMap::<String, Duration>::new()));
    let t0 = Instant::now();
    let mut workers = Workers::spawn(&queue, 8, {
        let (running, most, finished) = (running.clone(), most.clone(), finished.clone());
        move |key: String| {
            let (running, most, finished) = (running.clone(), most.clone(), finished.clone());
            async move {
                let slow = key.starts_with("slow/");
                if slow {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                } else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                finished.lock().insert(key, t0.elapsed());
                Requeue::Never
            }
        }
    });
    for i in 0..3 {
        queue.add(format!("slow/{i}"));
    }
    for tenant in 0..6 {
        for i in 0..10 {
            queue.add(format!("tenant-{tenant}/{i}"));
        }
    }
    assert!(workers.drain(None).await);
    assert_eq!(
        most.load(Ordering::SeqCst),
        2,
        "at most 2 of one group at once"
    );
    let finished = finished.lock();
    assert_eq!(finished.len(), 63);
    // 60 quick keys on the 6 workers the slow group leaves: 10 rounds of 100 ms, all done
    // while the first two slow keys still run.
    let last_quick = (finished.iter())
        .filter(|(k, _)| !k.starts_with("slow/"))
        .map(|(_, t)| *t)
        .max()
        .unwrap();
    assert!(
        last_quick <= Duration::from_secs(1),
        "quick keys done at {last_quick:?}"
    );
    // The third slow key waited for one of the first two.
    assert_eq!(finished["slow/2"], Duration::from_secs(20));
}

/// Groups are freed when idle (past a bound), so namespaces that come and go leave nothing.
#[tokio::test]
async fn groups_that_come_and_go_do_not_accumulate() {
    let q = Queue::new(fair());
    for i in 0..5_000 {
        q.add(format!("ns-{i}/cm"));
        take(&q).await.done();
    }
    let groups = q.shared.group_count();
    assert!(
        groups <= 1_100,
        "{groups} groups kept for 5,000 namespaces seen"
    );
}

#[tokio::test]
async fn a_shut_down_queue_still_hands_out_a_capped_group_s_items_as_others_finish() {
    use futures_util::FutureExt;
    let q = Queue::new(fair().max_in_flight_per_group(Some(1)));
    q.add("a/1".to_owned());
    q.add("a/2".to_owned());
    let first = take(&q).await;
    q.shut_down();
    assert!(
        q.get().now_or_never().is_none(),
        "a/2 waits for a/1, no None yet"
    );
    first.done();
    assert_eq!(take(&q).await.item(), "a/2");
    assert!(q.get().await.is_none());
}

/// A group function that panics (the caller's code) loses nothing: the item is queued in
/// the group named "", and the queue goes on.
#[tokio::test]
async fn a_panicking_group_function_queues_the_item_in_the_unnamed_group() {
    let config = QueueConfig::default().fair_by(|key: &String| {
        assert!(!key.starts_with("bad/"), "no group for {key}");
        by_namespace(key)
    });
    let q = Queue::new(config);
    q.add("bad/1".to_owned());
    q.add("a/1".to_owned());
    assert_eq!(q.len(), 2);
    assert_eq!(order(&q, 2).await, ["bad/1", "a/1"]);
    q.add("bad/1".to_owned()); // added again after it was handed out: queued again
    assert_eq!(take(&q).await.item(), "bad/1");
}
