//! Replace (relists), resync, and the initial list.

use super::*;

// ---- replace ----------------------------------------------------------------------------

#[tokio::test]
async fn replace_tombstones_known_keys_missing_from_the_list() {
    // DeltaFifo: the listed items first, then the tombstones.
    let store = Store::default();
    store.add(cm("gone", "1")).unwrap();
    store.add(cm("kept", "1")).unwrap();
    let q = delta_fifo(&store);
    q.replace(vec![cm("kept", "2"), cm("new", "1")], "1")
        .unwrap();
    assert_eq!(
        drain(&q, &store).await,
        [
            (k("kept"), vec![s(Replaced, "2")]),
            (k("new"), vec![s(Replaced, "1")]),
            (k("gone"), vec![tomb("1")]),
        ]
    );
    assert_eq!(store.len(), 2);

    // RealFifo: the tombstones first, then the listed items.
    let store = Store::default();
    store.add(cm("gone", "1")).unwrap();
    store.add(cm("kept", "1")).unwrap();
    let q = real_fifo(&store);
    q.replace(vec![cm("kept", "2"), cm("new", "1")], "1")
        .unwrap();
    assert_eq!(
        drain(&q, &store).await,
        [
            (k("gone"), vec![tomb("1")]),
            (k("kept"), vec![s(Replaced, "2")]),
            (k("new"), vec![s(Replaced, "1")]),
        ]
    );
    assert_eq!(store.len(), 2);
}

#[tokio::test]
async fn delta_fifo_replace_while_items_are_pending() {
    let store = Store::default();
    store.add(cm("cached", "1")).unwrap();
    store.add(cm("deleting", "1")).unwrap();
    let q = delta_fifo(&store);
    q.add(cm("unstored", "1")).unwrap(); // queued, not yet in the store
    q.update(cm("cached", "2")).unwrap(); // newer than the store
    q.delete(cm("deleting", "2")).unwrap(); // already being deleted
    q.replace(vec![cm("fresh", "1")], "1").unwrap();
    assert_eq!(
        drain(&q, &store).await,
        [
            // The tombstone carries the newest *queued* state, not the store's.
            (k("unstored"), vec![s(Added, "1"), tomb("1")]),
            (k("cached"), vec![s(Updated, "2"), tomb("2")]),
            // A tombstone after a real delete collapses into the real one.
            (k("deleting"), vec![s(Deleted, "2")]),
            (k("fresh"), vec![s(Replaced, "1")]),
        ]
    );
    assert_eq!(store.list_keys(), ["ns/fresh"]);
}

#[tokio::test]
async fn real_fifo_replace_while_items_are_pending() {
    let store = Store::default();
    store.add(cm("cached", "1")).unwrap();
    store.add(cm("deleting", "1")).unwrap();
    let q = real_fifo(&store);
    q.add(cm("unstored", "1")).unwrap();
    q.update(cm("cached", "2")).unwrap();
    q.delete(cm("deleting", "2")).unwrap();
    q.replace(vec![cm("fresh", "1")], "1").unwrap();
    assert_eq!(
        drain(&q, &store).await,
        [
            (k("unstored"), vec![s(Added, "1")]),
            (k("cached"), vec![s(Updated, "2")]),
            (k("deleting"), vec![s(Deleted, "2")]),
            // Tombstones for queued keys carry the newest queued state; a key whose last
            // queued event is a delete gets none.
            (k("unstored"), vec![tomb("1")]),
            (k("cached"), vec![tomb("2")]),
            (k("fresh"), vec![s(Replaced, "1")]),
        ]
    );
    assert_eq!(store.list_keys(), ["ns/fresh"]);
}

#[tokio::test]
async fn replace_is_all_or_nothing_on_a_nameless_item() {
    let store = Store::default();
    let nameless = Arc::new(ConfigMap::default());
    let q = delta_fifo(&store);
    assert!(
        q.replace(vec![cm("a", "1"), nameless.clone()], "1")
            .is_err()
    );
    assert!(q.is_empty());
    assert!(
        !q.has_synced(),
        "a failed replace must not count as the first list"
    );
    let q = real_fifo(&store);
    assert!(q.replace(vec![cm("a", "1"), nameless], "1").is_err());
    assert!(q.is_empty());
    assert!(!q.has_synced());
}

// ---- resync -----------------------------------------------------------------------------

#[tokio::test]
async fn resync_replays_known_objects_with_nothing_queued() {
    for real in [false, true] {
        let store = Store::default();
        store.add(cm("idle", "1")).unwrap();
        store.add(cm("busy", "1")).unwrap();
        let popped = if real {
            let q = real_fifo(&store);
            q.update(cm("busy", "2")).unwrap();
            q.resync();
            drain(&q, &store).await
        } else {
            let q = delta_fifo(&store);
            q.update(cm("busy", "2")).unwrap();
            q.resync();
            drain(&q, &store).await
        };
        assert_eq!(
            popped,
            [
                (k("busy"), vec![s(Updated, "2")]),
                (k("idle"), vec![s(Sync, "1")]),
            ],
            "real={real}"
        );
    }
    // A DeltaFifo without a store has nothing to resync.
    let q: DeltaFifo<ConfigMap> = DeltaFifo::new(None);
    q.resync();
    assert!(q.is_empty());
}

// ---- has_synced / is_in_initial_list ---------------------------------------------------

async fn check_initial_list<Q: DeltaQueue<ConfigMap>>(q: Q, store: &Store<ConfigMap>) {
    assert!(!q.has_synced());
    // One known object goes missing: its tombstone is part of the initial list too.
    q.replace(vec![cm("a", "1"), cm("b", "1")], "1").unwrap();
    assert!(!q.has_synced());
    let mut flags = Vec::new();
    for _ in 0..3 {
        flags.push(pop_one(&q, store).await.2);
        let all_popped = flags.len() == 3;
        assert_eq!(q.has_synced(), all_popped);
    }
    assert_eq!(flags, [true, true, true]);
    q.replace(vec![cm("c", "1")], "1").unwrap(); // a later relist is not initial
    assert!(q.has_synced());
    q.add(cm("d", "1")).unwrap();
    assert!(!pop_one(&q, store).await.2);
}

#[tokio::test]
async fn has_synced_once_the_first_replace_is_fully_popped() {
    let store = Store::default();
    store.add(cm("stale", "1")).unwrap();
    check_initial_list(delta_fifo(&store), &store).await;
    let store = Store::default();
    store.add(cm("stale", "1")).unwrap();
    check_initial_list(real_fifo(&store), &store).await;
}

#[tokio::test]
async fn has_synced_at_once_when_an_event_comes_before_any_list() {
    let store = Store::default();
    let q = delta_fifo(&store);
    q.add(cm("a", "1")).unwrap();
    assert!(q.has_synced());
    let q = real_fifo(&store);
    q.update(cm("a", "1")).unwrap();
    assert!(q.has_synced());
    assert!(!pop_one(&q, &store).await.2);
}

/// A relist of part of the collection (a sharded cache whose share changed): what the part
/// holds and the list lacks is deleted, known or queued; everything outside the part is
/// left as it is, known or queued.
async fn a_part_relist_leaves_the_rest_alone<Q>(q: Q, store: &Store<ConfigMap>)
where
    Q: DeltaQueue<ConfigMap> + DeltaSink<ConfigMap>,
{
    store.add(cm("a-known", "1")).unwrap();
    store.add(cm("a-kept", "1")).unwrap();
    store.add(cm("b-known", "1")).unwrap();
    q.add(cm("a-queued", "2")).unwrap();
    q.add(cm("b-queued", "2")).unwrap();
    let in_a = |obj: &ConfigMap| obj.metadata.name.as_deref().unwrap().starts_with("a-");
    let listed = vec![cm("a-kept", "3"), cm("a-new", "3")];
    assert!(q.replace_part(&in_a, listed, "3").unwrap());
    drain(&q, store).await;
    let mut held: Vec<(String, String)> = store
        .list()
        .iter()
        .map(|o| (o.metadata.name.clone().unwrap(), version(o)))
        .collect();
    held.sort();
    let expected = [
        ("a-kept", "3"),
        ("a-new", "3"),
        ("b-known", "1"),
        ("b-queued", "2"),
    ];
    assert_eq!(held, expected.map(|(n, v)| (n.to_owned(), v.to_owned())));
}

#[tokio::test]
async fn a_part_relist_replaces_only_its_part() {
    let store = Store::default();
    a_part_relist_leaves_the_rest_alone(real_fifo(&store), &store).await;
    let store = Store::default();
    a_part_relist_leaves_the_rest_alone(delta_fifo(&store), &store).await;
}
