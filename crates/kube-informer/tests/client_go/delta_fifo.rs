//! client-go `tools/cache/delta_fifo_test.go`, against [`DeltaFifo`]. Documented
//! differences (see the `fifo` module docs): a relist queues `Replaced` deltas (client-go's
//! `EmitDeltaTypeReplaced: true`, which its informers set) where the Go cases without that
//! option expect `Sync`; tombstones are the typed `DeletedObject::FinalStateUnknown`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::fifo::{DeltaFifo, DeltaQueue, DeltaSink, DeltaType::*};

use super::support::{has_synced_cases, known, obj, pop, pop_val, pops_unblock_when_closed, seen};

fn fifo() -> DeltaFifo<ConfigMap> {
    DeltaFifo::new(None)
}

/// Mirrors `TestDeltaFIFO_basic`: two producers, each one's objects popped in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_fifo_basic() {
    let f = Arc::new(fifo());
    for prefix in ["a", "b"] {
        let f = f.clone();
        tokio::spawn(async move {
            for i in 0..500 {
                f.add(obj(&format!("{prefix}{i}"), i + 1)).unwrap();
                tokio::task::yield_now().await;
            }
        });
    }
    let mut last = [0u64; 2];
    for _ in 0..1000 {
        let deltas = pop(&*f).await;
        let (_, name, v, _) = deltas.last().unwrap().clone();
        let producer = usize::from(name.starts_with('b'));
        assert!(v > last[producer], "{name} out of order");
        last[producer] = v;
    }
}

/// Mirrors `TestDeltaFIFO_replaceWithDeleteDeltaIn` (difference: `Replaced`, not `Sync`).
#[tokio::test]
async fn delta_fifo_replace_with_delete_delta_in() {
    let old = obj("foo", 1);
    let f = DeltaFifo::new(Some(known(std::slice::from_ref(&old))));
    f.delete(old).unwrap();
    f.replace(vec![obj("foo", 2)], "").unwrap();
    assert_eq!(
        pop(&f).await,
        [
            seen(Deleted, "foo", 1, false),
            seen(Replaced, "foo", 2, false)
        ]
    );
}

/// Mirrors `TestDeltaFIFO_addUpdate`: all three deltas in one entry, popped once.
#[tokio::test]
async fn delta_fifo_add_update() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("foo", 12)).unwrap();
    f.delete(obj("foo", 15)).unwrap();
    assert_eq!(f.list_keys(), ["foo"]);
    assert_eq!(pop_val(&f).await, 15);
    assert!(
        f.list_keys().is_empty(),
        "nothing left; the item got removed"
    );
}

/// Mirrors `TestDeltaFIFO_enqueueingNoLister`: without known objects, a delete of a key
/// never queued is dropped.
#[tokio::test]
async fn delta_fifo_enqueueing_no_lister() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.add(obj("qux", 17)).unwrap();
    f.delete(obj("qux", 18)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    for expected in [10, 15, 18] {
        assert_eq!(pop_val(&f).await, expected);
    }
    assert!(f.list_keys().is_empty());
}

/// Mirrors `TestDeltaFIFO_enqueueingWithLister`: a known key's delete is queued.
#[tokio::test]
async fn delta_fifo_enqueueing_with_lister() {
    let f = DeltaFifo::new(Some(known(&[obj("foo", 5), obj("bar", 6), obj("baz", 7)])));
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("bar", 15)).unwrap();
    f.delete(obj("baz", 20)).unwrap();
    for expected in [10, 15, 20] {
        assert_eq!(pop_val(&f).await, expected);
    }
    assert!(f.list_keys().is_empty());
}

/// Mirrors `TestDeltaFIFO_addReplace`.
#[tokio::test]
async fn delta_fifo_add_replace() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.replace(vec![obj("foo", 15)], "0").unwrap();
    assert_eq!(pop_val(&f).await, 15);
    assert!(f.list_keys().is_empty(), "popped once");
}

/// Mirrors `TestDeltaFIFO_ResyncNonExisting`: a queued delete is not followed by a `Sync`.
#[tokio::test]
async fn delta_fifo_resync_non_existing() {
    let f = DeltaFifo::new(Some(known(&[obj("foo", 5)])));
    f.delete(obj("foo", 10)).unwrap();
    f.resync();
    assert_eq!(pop(&f).await, [seen(Deleted, "foo", 10, false)]);
}

/// Mirrors `TestDeltaFIFO_Resync`.
#[tokio::test]
async fn delta_fifo_resync() {
    let f = DeltaFifo::new(Some(known(&[obj("foo", 5)])));
    f.resync();
    assert_eq!(pop(&f).await, [seen(Sync, "foo", 5, false)]);
}

/// Mirrors `TestDeltaFIFO_DeleteExistingNonPropagated`: a delete of an object only queued
/// (not yet known) is kept, after its add.
#[tokio::test]
async fn delta_fifo_delete_existing_non_propagated() {
    let f = DeltaFifo::new(Some(known(&[])));
    f.add(obj("foo", 5)).unwrap();
    f.delete(obj("foo", 6)).unwrap();
    assert_eq!(
        pop(&f).await,
        [seen(Added, "foo", 5, false), seen(Deleted, "foo", 6, false)]
    );
}

/// Mirrors `TestDeltaFIFO_ReplaceMakesDeletions` (difference: `Replaced`, not `Sync`).
#[tokio::test]
async fn delta_fifo_replace_makes_deletions() {
    let f = DeltaFifo::new(Some(known(&[obj("foo", 5), obj("bar", 6), obj("baz", 7)])));
    f.delete(obj("baz", 10)).unwrap();
    f.replace(vec![obj("foo", 5)], "0").unwrap();
    let popped = [pop(&f).await, pop(&f).await, pop(&f).await];
    assert_eq!(
        popped,
        [
            vec![seen(Deleted, "baz", 10, false)],
            vec![seen(Replaced, "foo", 5, false)],
            vec![seen(Deleted, "bar", 6, true)],
        ]
    );
}

/// Mirrors `TestDeltaFIFO_detectLineJumpers`.
#[tokio::test]
async fn delta_fifo_detect_line_jumpers() {
    let f = fifo();
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 1)).unwrap();
    f.add(obj("foo", 11)).unwrap();
    f.add(obj("foo", 13)).unwrap();
    f.add(obj("zab", 30)).unwrap();
    assert_eq!(pop_val(&f).await, 13);
    f.add(obj("foo", 14)).unwrap(); // foo must not jump back in line
    assert_eq!(
        [pop_val(&f).await, pop_val(&f).await, pop_val(&f).await],
        [1, 30, 14]
    );
}

/// Mirrors `TestDeltaFIFO_HasSynced` (its seven cases, the duplicate-key one included).
#[tokio::test]
async fn delta_fifo_has_synced() {
    has_synced_cases(fifo, true).await;
}

/// Mirrors `TestDeltaFIFO_PopShouldUnblockWhenClosed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_fifo_pop_should_unblock_when_closed() {
    pops_unblock_when_closed(Arc::new(fifo())).await;
}
