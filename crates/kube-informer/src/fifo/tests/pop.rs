//! Pop: waiting, closing, requeue, add_if_not_present, listing.

use super::*;

// ---- pop: waiting, closing, requeue ------------------------------------------------------

async fn check_close_wakes_every_pop<Q: DeltaQueue<ConfigMap> + 'static>(q: Q) {
    let q = Arc::new(q);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move { q.pop(|_, _| Ok::<(), ProcessError<Infallible>>(())).await })
        })
        .collect();
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    q.close();
    for waiter in waiters {
        assert!(matches!(waiter.await.unwrap(), Err(PopError::Closed)));
    }
    assert!(q.is_closed());
}

#[tokio::test]
async fn close_wakes_every_waiting_pop_with_a_closed_error() {
    check_close_wakes_every_pop(delta_fifo(&Store::default())).await;
    check_close_wakes_every_pop(real_fifo(&Store::default())).await;
}

#[tokio::test]
async fn entries_queued_before_close_are_still_popped() {
    let store = Store::default();
    let q = real_fifo(&store);
    q.add(cm("a", "1")).unwrap();
    q.close();
    assert_eq!(pop_one(&q, &store).await.0, k("a"));
    let err = q
        .pop(|_, _| Ok::<(), ProcessError<Infallible>>(()))
        .await
        .unwrap_err();
    assert!(matches!(err, PopError::Closed));
    assert_eq!(err.to_string(), "the delta queue is closed and drained");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_pop_gets_an_item_added_later() {
    let store = Store::default();
    let q = Arc::new(real_fifo(&store));
    let popper = {
        let (q, store) = (q.clone(), store.clone());
        tokio::spawn(async move { pop_one(q.as_ref(), &store).await })
    };
    tokio::task::yield_now().await;
    q.add(cm("late", "1")).unwrap();
    assert_eq!(popper.await.unwrap().0, k("late"));
}

#[tokio::test]
async fn a_failed_process_can_requeue_its_entry() {
    #[derive(Debug, PartialEq)]
    struct Boom;
    let fail = |_: &Deltas<ConfigMap>, _| Err(ProcessError::Requeue(Boom));

    // DeltaFifo: back of the queue, deltas intact.
    let store = Store::default();
    let q = delta_fifo(&store);
    q.add(cm("a", "1")).unwrap();
    q.update(cm("a", "2")).unwrap();
    q.add(cm("b", "1")).unwrap();
    assert!(matches!(q.pop(fail).await, Err(PopError::Process(Boom))));
    assert_eq!(
        drain(&q, &store).await,
        [
            (k("b"), vec![s(Added, "1")]),
            (k("a"), vec![s(Added, "1"), s(Updated, "2")]),
        ]
    );

    // RealFifo: front of the queue, so the retry does not reorder events.
    let store = Store::default();
    let q = real_fifo(&store);
    q.add(cm("a", "1")).unwrap();
    q.add(cm("b", "1")).unwrap();
    assert!(matches!(q.pop(fail).await, Err(PopError::Process(Boom))));
    assert_eq!(
        drain(&q, &store).await,
        [(k("a"), vec![s(Added, "1")]), (k("b"), vec![s(Added, "1")])]
    );

    // Fail (not Requeue) drops the entry.
    let q = real_fifo(&store);
    q.add(cm("a", "1")).unwrap();
    let dropped = q.pop(|_, _| Err(ProcessError::Fail(Boom))).await;
    assert!(matches!(dropped, Err(PopError::Process(Boom))));
    assert!(q.is_empty());
}

#[tokio::test]
async fn add_if_not_present_never_overwrites_queued_news() {
    let store = Store::default();
    let retry = Deltas::new(
        ObjectKey::new(Some("ns"), "a"),
        Delta::Added(cm("a", "old")),
    );
    for real in [false, true] {
        let popped = if real {
            let q = real_fifo(&store);
            q.update(cm("a", "new")).unwrap();
            q.add_if_not_present(retry.clone());
            q.add_if_not_present(Deltas::new(
                ObjectKey::new(Some("ns"), "b"),
                Delta::Added(cm("b", "1")),
            ));
            drain(&q, &store).await
        } else {
            let q = delta_fifo(&store);
            q.update(cm("a", "new")).unwrap();
            q.add_if_not_present(retry.clone());
            q.add_if_not_present(Deltas::new(
                ObjectKey::new(Some("ns"), "b"),
                Delta::Added(cm("b", "1")),
            ));
            drain(&q, &store).await
        };
        assert_eq!(
            popped,
            [
                (k("a"), vec![s(Updated, "new")]),
                (k("b"), vec![s(Added, "1")]),
            ],
            "real={real}"
        );
    }
}

#[tokio::test]
async fn list_keys_and_get_by_key_show_what_is_queued() {
    let store = Store::default();
    let dq = delta_fifo(&store);
    let rq = real_fifo(&store);
    for (name, v) in [("b", "1"), ("a", "1"), ("b", "2")] {
        dq.update(cm(name, v)).unwrap();
        rq.update(cm(name, v)).unwrap();
    }
    assert_eq!(dq.list_keys(), ["ns/b", "ns/a"]);
    assert_eq!(rq.list_keys(), ["ns/b", "ns/a"]);
    for got in [dq.get_by_key("ns/b"), rq.get_by_key("ns/b")] {
        let shapes: Vec<_> = got.unwrap().iter().map(shape).collect();
        assert_eq!(shapes, [s(Updated, "1"), s(Updated, "2")]);
    }
    assert!(dq.get_by_key("ns/zzz").is_none());
    assert!(rq.get_by_key("ns/zzz").is_none());
    assert_eq!((dq.len(), rq.len()), (2, 3));
}
