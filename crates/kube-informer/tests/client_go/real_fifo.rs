//! client-go `tools/cache/the_real_fifo_test.go`, against [`RealFifo`]: one entry per
//! event, strict arrival order; a relist queues tombstones first, then `Replaced` items, as
//! client-go's RealFIFO does. Tombstones are the typed `DeletedObject::FinalStateUnknown`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::fifo::{DeltaQueue, DeltaSink, DeltaType::*, RealFifo};

use super::support::{has_synced_cases, known, obj, pop, pop_val, pops_unblock_when_closed, seen};

fn fifo() -> RealFifo<ConfigMap> {
    RealFifo::new(known(&[]))
}

/// Mirrors `TestRealFIFO_addUpdate`: three events, three pops, in order.
#[tokio::test]
async fn real_fifo_add_update() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("foo", 12)).unwrap();
    f.delete(obj("foo", 15)).unwrap();
    assert_eq!(pop(&f).await, [seen(Added, "foo", 10, false)]);
    assert_eq!(pop(&f).await, [seen(Updated, "foo", 12, false)]);
    assert_eq!(pop(&f).await, [seen(Deleted, "foo", 15, false)]);
    assert!(f.list_keys().is_empty());
}

/// Mirrors `TestRealFIFO_enqueueingNoLister`: every event is delivered, deletes of unknown
/// keys included.
#[tokio::test]
async fn real_fifo_enqueueing_no_lister() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.add(obj("qux", 17)).unwrap();
    f.delete(obj("qux", 18)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    for expected in [10, 15, 17, 18, 20] {
        assert_eq!(pop_val(&f).await, expected);
    }
    assert!(f.list_keys().is_empty());
}

/// Mirrors `TestRealFIFO_addReplace`.
#[tokio::test]
async fn real_fifo_add_replace() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.replace(vec![obj("foo", 15)], "0").unwrap();
    assert_eq!(pop_val(&f).await, 10);
    assert_eq!(pop_val(&f).await, 15);
    assert!(f.list_keys().is_empty());
}

/// Mirrors `TestRealFIFO_Resync` and `TestRealFIFO_ResyncNonExisting`.
#[tokio::test]
async fn real_fifo_resync() {
    let f = RealFifo::new(known(&[obj("foo", 5)]));
    f.resync();
    assert_eq!(pop(&f).await, [seen(Sync, "foo", 5, false)]);

    let f = RealFifo::new(known(&[obj("foo", 5)]));
    f.delete(obj("foo", 10)).unwrap();
    f.resync();
    assert_eq!(pop(&f).await, [seen(Deleted, "foo", 10, false)]);
    assert!(f.list_keys().is_empty(), "no Sync behind a queued delete");
}

/// Mirrors `TestRealFIFO_DeleteExistingNonPropagated`.
#[tokio::test]
async fn real_fifo_delete_existing_non_propagated() {
    let f = fifo();
    f.add(obj("foo", 5)).unwrap();
    f.delete(obj("foo", 6)).unwrap();
    assert_eq!(pop(&f).await, [seen(Added, "foo", 5, false)]);
    assert_eq!(pop(&f).await, [seen(Deleted, "foo", 6, false)]);
}

/// Mirrors `TestRealFIFO_ReplaceMakesDeletions` (its first two cases).
#[tokio::test]
async fn real_fifo_replace_makes_deletions() {
    let listed = || known(&[obj("foo", 5), obj("bar", 6), obj("baz", 7)]);
    let f = RealFifo::new(listed());
    f.delete(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    let popped = [pop(&f).await, pop(&f).await, pop(&f).await];
    assert_eq!(
        popped,
        [
            vec![seen(Deleted, "baz", 10, false)],
            vec![seen(Deleted, "bar", 6, true)],
            vec![seen(Replaced, "foo", 5, false)],
        ]
    );

    let f = RealFifo::new(listed());
    f.add(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    let popped = [pop(&f).await, pop(&f).await, pop(&f).await, pop(&f).await];
    assert_eq!(
        popped,
        [
            vec![seen(Added, "baz", 10, false)],
            vec![seen(Deleted, "baz", 10, true)],
            vec![seen(Deleted, "bar", 6, true)],
            vec![seen(Replaced, "foo", 5, false)],
        ],
        "the tombstone carries the newest state seen (the queued add)"
    );
}

/// Mirrors `TestRealFIFO_detectLineJumpers`: strict arrival order, every event.
#[tokio::test]
async fn real_fifo_detect_line_jumpers() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 1)).unwrap();
    f.add(obj("foo", 11)).unwrap();
    f.add(obj("foo", 13)).unwrap();
    f.add(obj("zab", 30)).unwrap();
    assert_eq!(pop_val(&f).await, 10);
    f.add(obj("foo", 14)).unwrap();
    let mut rest = Vec::new();
    for _ in 0..5 {
        rest.push(pop_val(&f).await);
    }
    assert_eq!(rest, [1, 11, 13, 30, 14]);
}

/// Mirrors `TestRealFIFO_HasSynced` (the same cases as the DeltaFIFO's).
#[tokio::test]
async fn real_fifo_has_synced() {
    has_synced_cases(fifo, false).await;
}

/// Mirrors `TestRealFIFO_PopShouldUnblockWhenClosed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_fifo_pop_should_unblock_when_closed() {
    pops_unblock_when_closed(Arc::new(fifo())).await;
}
