//! Per-key accumulation and ordering; deletes.

use super::*;

// ---- per-key accumulation and ordering ------------------------------------------------

#[tokio::test]
async fn delta_fifo_accumulates_a_keys_deltas_in_one_entry() {
    let store = Store::default();
    let q = delta_fifo(&store);
    q.add(cm("a", "1")).unwrap();
    q.update(cm("a", "2")).unwrap();
    q.delete(cm("a", "3")).unwrap();
    assert_eq!(q.len(), 1);
    assert_eq!(
        drain(&q, &store).await,
        [(
            k("a"),
            vec![s(Added, "1"), s(Updated, "2"), s(Deleted, "3")]
        )]
    );
}

#[tokio::test]
async fn real_fifo_hands_out_each_event_alone() {
    let store = Store::default();
    let q = real_fifo(&store);
    q.add(cm("a", "1")).unwrap();
    q.update(cm("a", "2")).unwrap();
    q.delete(cm("a", "3")).unwrap();
    assert_eq!(q.len(), 3);
    assert_eq!(
        drain(&q, &store).await,
        [
            (k("a"), vec![s(Added, "1")]),
            (k("a"), vec![s(Updated, "2")]),
            (k("a"), vec![s(Deleted, "3")]),
        ]
    );
}

#[tokio::test]
async fn an_update_while_queued_joins_the_entry_in_delta_fifo_but_keeps_arrival_order_in_real_fifo()
{
    let store = Store::default();
    let q = delta_fifo(&store);
    q.add(cm("a", "1")).unwrap();
    q.add(cm("b", "1")).unwrap();
    q.update(cm("a", "2")).unwrap();
    assert_eq!(
        drain(&q, &store).await,
        [
            (k("a"), vec![s(Added, "1"), s(Updated, "2")]),
            (k("b"), vec![s(Added, "1")]),
        ]
    );

    let store = Store::default();
    let q = real_fifo(&store);
    q.add(cm("a", "1")).unwrap();
    q.add(cm("b", "1")).unwrap();
    q.update(cm("a", "2")).unwrap();
    assert_eq!(
        drain(&q, &store).await,
        [
            (k("a"), vec![s(Added, "1")]),
            (k("b"), vec![s(Added, "1")]),
            (k("a"), vec![s(Updated, "2")]),
        ]
    );
}

#[tokio::test]
async fn a_delete_then_readd_before_pop_keeps_both_in_order() {
    for real in [false, true] {
        let store = Store::default();
        store.add(cm("a", "1")).unwrap();
        if real {
            let q = real_fifo(&store);
            q.delete(cm("a", "1")).unwrap();
            q.add(cm("a", "2")).unwrap();
            assert_eq!(
                drain(&q, &store).await,
                [
                    (k("a"), vec![s(Deleted, "1")]),
                    (k("a"), vec![s(Added, "2")])
                ]
            );
        } else {
            let q = delta_fifo(&store);
            q.delete(cm("a", "1")).unwrap();
            q.add(cm("a", "2")).unwrap();
            assert_eq!(
                drain(&q, &store).await,
                [(k("a"), vec![s(Deleted, "1"), s(Added, "2")])]
            );
        }
        assert_eq!(
            version(&store.get_by_key("ns/a").unwrap()),
            "2",
            "real={real}"
        );
    }
}

// ---- deletes --------------------------------------------------------------------------

#[tokio::test]
async fn delta_fifo_collapses_two_deletes_in_a_row_real_fifo_does_not() {
    let store = Store::default();
    store.add(cm("a", "0")).unwrap();
    let q = delta_fifo(&store);
    q.delete(cm("a", "1")).unwrap();
    q.delete(cm("a", "2")).unwrap();
    assert_eq!(drain(&q, &store).await, [(k("a"), vec![s(Deleted, "1")])]);

    let store = Store::default();
    store.add(cm("a", "0")).unwrap();
    let q = real_fifo(&store);
    q.delete(cm("a", "1")).unwrap();
    q.delete(cm("a", "2")).unwrap();
    assert_eq!(
        drain(&q, &store).await,
        [
            (k("a"), vec![s(Deleted, "1")]),
            (k("a"), vec![s(Deleted, "2")])
        ]
    );
}

#[tokio::test]
async fn delta_fifo_drops_a_delete_of_a_key_it_never_saw() {
    let store = Store::default();
    let q = delta_fifo(&store);
    q.delete(cm("ghost", "1")).unwrap();
    assert!(q.is_empty());
    // Known to the store: queued. Queued but not yet stored: queued too.
    store.add(cm("cached", "1")).unwrap();
    q.delete(cm("cached", "1")).unwrap();
    q.add(cm("pending", "1")).unwrap();
    q.delete(cm("pending", "2")).unwrap();
    assert_eq!(
        drain(&q, &store).await,
        [
            (k("cached"), vec![s(Deleted, "1")]),
            (k("pending"), vec![s(Added, "1"), s(Deleted, "2")]),
        ]
    );
    // Without a paired store only queued keys count.
    let q = DeltaFifo::new(None);
    q.delete(cm("cached", "1")).unwrap();
    assert!(q.is_empty());
}

#[tokio::test]
async fn real_fifo_delivers_a_delete_of_a_key_it_never_saw() {
    let store = Store::default();
    let q = real_fifo(&store);
    q.delete(cm("ghost", "1")).unwrap();
    assert_eq!(
        drain(&q, &store).await,
        [(k("ghost"), vec![s(Deleted, "1")])]
    );
}
