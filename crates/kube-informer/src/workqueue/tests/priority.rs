//! Priorities: low-priority items wait for the front line, and random priorities lose
//! nothing.

use std::collections::HashMap;

use super::*;

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
        let mut next = seeded(seed);
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
