//! Batches, bookmarks and namespace-scoped relists.

use super::*;

// ---- batches ---------------------------------------------------------------------------

/// Pops batches of up to `max` keys; returns the keys of each batch.
async fn batches<Q: DeltaQueue<ConfigMap>>(q: &Q, max: usize) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    while !q.is_empty() {
        q.pop_batch(max, |batch| {
            out.push(
                batch
                    .iter()
                    .map(|(d, _)| d.key().name().to_owned())
                    .collect(),
            );
            Ok::<(), ProcessError<Infallible>>(())
        })
        .await
        .unwrap();
    }
    out
}

#[tokio::test]
async fn batches_hold_up_to_max_keys_in_order() {
    let store = Store::default();
    let q = real_fifo(&store);
    for name in ["a", "b", "a", "c", "d", "e"] {
        q.update(cm(name, "1")).unwrap();
    }
    // "a" twice counts once: [a b a c] is 3 keys.
    assert_eq!(
        batches(&q, 3).await,
        [vec!["a", "b", "a", "c"], vec!["d", "e"]]
    );
    let q = delta_fifo(&store);
    for name in ["a", "b", "c", "d", "e"] {
        q.update(cm(name, "1")).unwrap();
    }
    assert_eq!(
        batches(&q, 2).await,
        [vec!["a", "b"], vec!["c", "d"], vec!["e"]]
    );
}

#[tokio::test]
async fn real_fifo_never_splits_a_relist_across_batches() {
    let store = Store::default();
    store.add(cm("gone", "1")).unwrap();
    let q = real_fifo(&store);
    q.add(cm("x", "1")).unwrap();
    q.add(cm("y", "1")).unwrap();
    q.replace((0..6).map(|i| cm(&format!("r{i}"), "1")).collect(), "1")
        .unwrap();
    q.add(cm("z", "1")).unwrap();
    let got = batches(&q, 3).await;
    // The relist (tombstones for the queued x and y and the cached "gone", then 6 items)
    // rides whole in the batch it starts in.
    assert_eq!(
        got,
        [
            vec![
                "x", "y", "x", "y", "gone", "r0", "r1", "r2", "r3", "r4", "r5"
            ],
            vec!["z"]
        ]
    );
}

/// client-go 1.36's `Bookmark` delta: a bookmark marks the newest queued entry (the cache
/// reaches its version once that entry is applied), or, with nothing queued, goes straight
/// to the store.
async fn bookmarks_follow_what_was_queued_before_them<Q: DeltaQueue<ConfigMap>>(
    q: Q,
    store: &Store<ConfigMap>,
) {
    q.bookmark("3");
    assert_eq!(store.resource_version(), "3", "nothing queued");
    q.add(cm("a", "4")).unwrap();
    q.bookmark("7");
    assert_eq!(
        store.resource_version(),
        "3",
        "not before the add is applied"
    );
    q.pop(|deltas, _| {
        assert_eq!(deltas.reached_resource_version(), Some("7"));
        Ok::<(), ProcessError<Infallible>>(())
    })
    .await
    .unwrap();
    q.replace(vec![cm("a", "4"), cm("b", "1")], "15").unwrap();
    let mut reached = None;
    while !q.is_empty() {
        q.pop(|deltas, _| {
            if let Some(rv) = deltas.reached_resource_version() {
                reached = Some(rv.to_owned());
            }
            Ok::<(), ProcessError<Infallible>>(())
        })
        .await
        .unwrap();
    }
    assert_eq!(
        reached.as_deref(),
        Some("15"),
        "the relist's last entry carries it"
    );
}

#[tokio::test]
async fn bookmarks_reach_the_store_after_what_was_queued_before_them() {
    let store = Store::default();
    bookmarks_follow_what_was_queued_before_them(RealFifo::new(Arc::new(store.clone())), &store)
        .await;
    let store = Store::default();
    let known: Arc<dyn KnownObjects<ConfigMap>> = Arc::new(store.clone());
    bookmarks_follow_what_was_queued_before_them(DeltaFifo::new(Some(known)), &store).await;
}

/// A relist of one namespace (several namespaces watched into one queue) tombstones only
/// that namespace's missing objects, and the queue is synced once each namespace relisted.
async fn a_namespace_relist_leaves_other_namespaces_alone<Q: DeltaQueue<ConfigMap>>(
    q: Q,
    store: &Store<ConfigMap>,
) {
    let in_ns = |ns: &str, name: &str| {
        let mut obj = (*cm(name, "1")).clone();
        obj.metadata.namespace = Some(ns.into());
        Arc::new(obj)
    };
    q.replace_in_namespace("a", vec![in_ns("a", "x")], "5")
        .unwrap();
    assert!(!q.has_synced(), "namespace b has not listed yet");
    q.replace_in_namespace("b", vec![in_ns("b", "y")], "6")
        .unwrap();
    while !q.is_empty() {
        pop_one(&q, store).await;
    }
    assert!(q.has_synced());
    // Namespace a relists without x: x is deleted; b's y is untouched.
    q.replace_in_namespace("a", vec![], "9").unwrap();
    let mut popped = Vec::new();
    while !q.is_empty() {
        popped.push(pop_one(&q, store).await);
    }
    assert_eq!(popped.len(), 1, "{popped:?}");
    assert_eq!(popped[0].0, "a/x");
    assert!(store.get_by_key("b/y").is_some());
}

#[tokio::test]
async fn namespace_relists_are_scoped() {
    let store = Store::default();
    let fifo = RealFifo::new(Arc::new(store.clone()));
    fifo.expect_relists(2);
    a_namespace_relist_leaves_other_namespaces_alone(fifo, &store).await;
    let store = Store::default();
    let fifo = DeltaFifo::new(Some(
        Arc::new(store.clone()) as Arc<dyn KnownObjects<ConfigMap>>
    ));
    fifo.expect_relists(2);
    a_namespace_relist_leaves_other_namespaces_alone(fifo, &store).await;
}
