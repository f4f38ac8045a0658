//! A capacity bounds what a writer that honours it (the reflector) queues: `full` says when
//! to wait and is ready once a pop made room; writes themselves never wait or fail.

use futures_util::FutureExt;

use super::*;

#[tokio::test]
async fn a_real_fifo_is_full_at_its_capacity_until_a_pop_makes_room() {
    let store = Store::default();
    let q = real_fifo(&store).with_capacity(2);
    assert_eq!(q.capacity(), Some(2));
    q.add(cm("a", "1")).unwrap();
    assert!(q.full().is_none(), "one of two: room");
    q.update(cm("a", "2")).unwrap();
    let mut waiting = q.full().expect("two of two: full");
    assert!((&mut waiting).now_or_never().is_none(), "still full");
    // A write never waits and never fails for lack of room.
    q.add(cm("b", "1")).unwrap();
    assert_eq!(q.len(), 3);
    pop_one(&q, &store).await;
    assert!((&mut waiting).now_or_never().is_none(), "two of two again");
    drop(waiting);
    pop_one(&q, &store).await;
    let waiting = q.full();
    assert!(waiting.is_none(), "one of two after two pops");
}

#[tokio::test]
async fn a_pop_wakes_the_waiting_writer() {
    let store = Store::default();
    let q = Arc::new(real_fifo(&store).with_capacity(1));
    q.add(cm("a", "1")).unwrap();
    let writer = tokio::spawn({
        let q = q.clone();
        async move {
            if let Some(room) = q.full() {
                room.await;
            }
            q.add(cm("b", "1")).unwrap();
        }
    });
    pop_one(q.as_ref(), &store).await;
    writer.await.unwrap();
    assert_eq!(q.list_keys(), ["ns/b"]);
}

#[tokio::test]
async fn a_delta_fifo_counts_the_deltas_of_every_key() {
    let store = Store::default();
    let q = delta_fifo(&store).with_capacity(3);
    q.add(cm("a", "1")).unwrap();
    q.update(cm("a", "2")).unwrap();
    assert!(q.full().is_none(), "one key, two deltas");
    q.update(cm("a", "3")).unwrap();
    assert!(q.full().is_some(), "one key, three deltas: full");
    assert_eq!(q.len(), 1);
    pop_one(&q, &store).await;
    assert!(q.full().is_none(), "the key's three deltas left together");
}

#[tokio::test]
async fn a_relist_is_queued_whole_and_close_frees_a_waiting_writer() {
    let store = Store::default();
    let q = real_fifo(&store).with_capacity(2);
    let list = (0..5).map(|i| cm(&format!("o{i}"), "1")).collect();
    q.replace(list, "10").unwrap();
    assert_eq!(q.len(), 5, "a relist is atomic: never cut at the capacity");
    let waiting = q.full().expect("over capacity");
    q.close();
    waiting.await; // closed: nobody will make room, the writer must not hang
    assert!(q.full().is_none());
}

#[test]
fn a_new_queue_is_unbounded() {
    let store = Store::default();
    assert_eq!(real_fifo(&store).capacity(), None);
    assert_eq!(delta_fifo(&store).capacity(), None);
    let q = real_fifo(&store);
    for i in 0..10_000 {
        q.add(cm(&format!("o{i}"), "1")).unwrap();
    }
    assert!(q.full().is_none());
}
