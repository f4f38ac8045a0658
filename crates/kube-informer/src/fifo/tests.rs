//! The FIFO contract, rule by rule, for both implementations where the rule is shared.

use std::{collections::BTreeMap, convert::Infallible, sync::Arc};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::ObjectMeta;
use proptest::prelude::*;

use super::*;
use crate::Store;

/// `ns/<name>` with data `v=<version>`.
fn cm(name: &str, version: &str) -> Arc<ConfigMap> {
    Arc::new(ConfigMap {
        metadata: ObjectMeta {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some([("v".to_owned(), version.to_owned())].into()),
        ..Default::default()
    })
}

fn version(obj: &ConfigMap) -> String {
    obj.data.as_ref().unwrap()["v"].clone()
}

/// A delta as (type, version, is_tombstone), for compact assertions.
type Shape = (DeltaType, String, bool);

fn shape(delta: &Delta<ConfigMap>) -> Shape {
    let tombstone = matches!(delta, Delta::Deleted(d) if d.is_final_state_unknown());
    (delta.delta_type(), version(delta.object()), tombstone)
}

fn s(t: DeltaType, v: &str) -> Shape {
    (t, v.to_owned(), false)
}

fn tomb(v: &str) -> Shape {
    (DeltaType::Deleted, v.to_owned(), true)
}

use DeltaType::{Added, Deleted, Replaced, Sync, Updated};

/// What the informer does with popped deltas: apply them to the store.
fn apply(store: &Store<ConfigMap>, deltas: &Deltas<ConfigMap>) {
    for delta in deltas {
        match delta {
            Delta::Deleted(_) => {
                store.delete_by_key(deltas.key().as_str());
            }
            other => {
                store
                    .insert(deltas.key().clone(), other.object().clone())
                    .unwrap();
            }
        }
    }
}

/// A popped entry: key, its deltas, and whether it was in the initial list.
type Popped = (String, Vec<Shape>, bool);

async fn pop_one<Q: DeltaQueue<ConfigMap>>(q: &Q, store: &Store<ConfigMap>) -> Popped {
    let mut out = None;
    q.pop(|deltas, initial| {
        apply(store, deltas);
        out = Some((
            deltas.key().to_string(),
            deltas.iter().map(shape).collect(),
            initial,
        ));
        Ok::<(), ProcessError<Infallible>>(())
    })
    .await
    .unwrap();
    out.unwrap()
}

/// Pops (and applies) until empty; returns (key, deltas) of each pop.
async fn drain<Q: DeltaQueue<ConfigMap>>(
    q: &Q,
    store: &Store<ConfigMap>,
) -> Vec<(String, Vec<Shape>)> {
    let mut out = Vec::new();
    while !q.is_empty() {
        let (key, deltas, _) = pop_one(q, store).await;
        out.push((key, deltas));
    }
    out
}

fn delta_fifo(store: &Store<ConfigMap>) -> DeltaFifo<ConfigMap> {
    DeltaFifo::new(Some(Arc::new(store.clone())))
}

fn real_fifo(store: &Store<ConfigMap>) -> RealFifo<ConfigMap> {
    RealFifo::new(Arc::new(store.clone()))
}

fn k(name: &str) -> String {
    format!("ns/{name}")
}

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

// ---- model-based convergence -------------------------------------------------------------

/// One step of a simulated API server and a reflector that may miss events.
#[derive(Debug, Clone)]
enum Step {
    /// The server creates/modifies/deletes `name`; `seen` = the watch delivered it.
    Write { name: u8, delete: bool, seen: bool },
    /// A relist: `replace` with the server's full state.
    Relist,
    /// A resync tick.
    Resync,
    /// The informer pops (and applies) up to n entries.
    Pop(u8),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        8 => (0u8..5, prop::bool::weighted(0.3), prop::bool::weighted(0.85))
            .prop_map(|(name, delete, seen)| Step::Write { name, delete, seen }),
        1 => Just(Step::Relist),
        1 => Just(Step::Resync),
        4 => (1u8..4).prop_map(Step::Pop),
    ]
}

/// Runs `steps` against a FIFO, checking that the store converges to the server's state.
/// Returns an error message instead of panicking, for proptest.
async fn converges<Q: DeltaQueue<ConfigMap>>(
    q: Q,
    store: &Store<ConfigMap>,
    steps: &[Step],
) -> Result<(), String> {
    let mut server: BTreeMap<String, Arc<ConfigMap>> = BTreeMap::new();
    let mut revision = 0u64;
    let mut missed_since_relist = false;
    for step in steps {
        match *step {
            Step::Write { name, delete, seen } => {
                let name = format!("o{name}");
                revision += 1;
                let obj = cm(&name, &revision.to_string());
                let existed = server.contains_key(&k(&name));
                if delete && !existed {
                    continue;
                }
                if !seen {
                    missed_since_relist = true;
                }
                if delete {
                    let last = server.remove(&k(&name)).unwrap();
                    if seen {
                        q.delete(last).unwrap();
                    }
                } else {
                    server.insert(k(&name), obj.clone());
                    if seen && existed {
                        q.update(obj).unwrap();
                    } else if seen {
                        q.add(obj).unwrap();
                    }
                }
            }
            Step::Relist => {
                q.replace(server.values().cloned().collect(), "1").unwrap();
                missed_since_relist = false;
            }
            Step::Resync => q.resync(),
            Step::Pop(n) => {
                for _ in 0..n {
                    if q.is_empty() {
                        break;
                    }
                    pop_one(&q, store).await;
                }
            }
        }
    }
    let state = |store: &Store<ConfigMap>| -> BTreeMap<String, String> {
        let e = store.entries();
        e.into_iter()
            .map(|(k, v)| (k.to_string(), version(&v)))
            .collect()
    };
    let truth: BTreeMap<String, String> = server
        .iter()
        .map(|(k, v)| (k.clone(), version(v)))
        .collect();
    drain(&q, store).await;
    if !missed_since_relist && state(store) != truth {
        return Err(format!(
            "with every event seen: store {:?} != server {truth:?}",
            state(store)
        ));
    }
    q.replace(server.values().cloned().collect(), "1").unwrap();
    drain(&q, store).await;
    if state(store) != truth {
        return Err(format!(
            "after a relist: store {:?} != server {truth:?}",
            state(store)
        ));
    }
    Ok(())
}

proptest! {
    #[test]
    fn both_fifos_converge_to_the_servers_state(steps in prop::collection::vec(arb_step(), 1..80)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let store = Store::default();
        rt.block_on(converges(delta_fifo(&store), &store, &steps)).map_err(TestCaseError::fail)?;
        let store = Store::default();
        rt.block_on(converges(real_fifo(&store), &store, &steps)).map_err(TestCaseError::fail)?;
    }

    /// Without relists, RealFifo pops exactly the events pushed, in the order pushed.
    #[test]
    fn real_fifo_preserves_arrival_order(writes in prop::collection::vec((0u8..4, 0u8..3), 1..50)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let store = Store::default();
        let q = real_fifo(&store);
        let mut pushed = Vec::new();
        for (i, (name, kind)) in writes.iter().enumerate() {
            let obj = cm(&format!("o{name}"), &i.to_string());
            let t = match kind { 0 => { q.add(obj).unwrap(); Added } 1 => { q.update(obj).unwrap(); Updated } _ => { q.delete(obj).unwrap(); Deleted } };
            pushed.push((k(&format!("o{name}")), vec![s(t, &i.to_string())]));
        }
        prop_assert_eq!(rt.block_on(drain(&q, &store)), pushed);
    }
}

// ---- threads ------------------------------------------------------------------------------

/// The queues, their handles and `pop`'s future must cross threads (the informer spawns it).
#[test]
fn queues_and_pop_futures_are_send_and_sync() {
    fn send_sync<T: Send + std::marker::Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}
    let store = Store::<ConfigMap>::default();
    let (dq, rq) = (delta_fifo(&store), real_fifo(&store));
    send_sync(&dq);
    send_sync(&rq);
    send_sync(&store);
    send(dq.pop(|_, _| Ok::<(), ProcessError<Infallible>>(())));
    send(rq.pop(|_, _| Ok::<(), ProcessError<Infallible>>(())));
}

/// A producer thread pushes while a consumer task pops: nothing is lost (a lost wake-up
/// would hang the consumer; the timeout only turns a hang into a failure), RealFifo pops
/// exactly the pushed sequence, and DeltaFifo keeps each key's deltas in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_thread_and_a_consumer_task_lose_nothing() {
    const EVENTS: usize = 20_000;
    async fn consume<Q: DeltaQueue<ConfigMap>>(q: &Q) -> Vec<(String, Vec<Shape>)> {
        let mut popped = Vec::new();
        loop {
            let result = q
                .pop(|d, _| {
                    popped.push((d.key().to_string(), d.iter().map(shape).collect()));
                    Ok::<(), ProcessError<Infallible>>(())
                })
                .await;
            if let Err(PopError::Closed) = result {
                return popped;
            }
        }
    }
    fn produce(
        q: Arc<impl DeltaQueue<ConfigMap> + 'static>,
    ) -> std::thread::JoinHandle<Vec<(String, Shape)>> {
        std::thread::spawn(move || {
            let mut pushed = Vec::new();
            for i in 0..EVENTS {
                let name = format!("o{}", i % 37);
                q.update(cm(&name, &i.to_string())).unwrap();
                pushed.push((k(&name), s(Updated, &i.to_string())));
                if i % 1000 == 0 {
                    std::thread::yield_now();
                }
            }
            q.close();
            pushed
        })
    }
    let guard = std::time::Duration::from_secs(120);

    let q = Arc::new(real_fifo(&Store::default()));
    let producer = produce(q.clone());
    let popped = tokio::time::timeout(guard, consume(q.as_ref()))
        .await
        .expect("consumer hung");
    let pushed = producer.join().unwrap();
    let popped: Vec<(String, Shape)> = popped
        .into_iter()
        .map(|(key, mut d)| (key, d.remove(0)))
        .collect();
    assert_eq!(popped, pushed);

    let q = Arc::new(delta_fifo(&Store::default()));
    let producer = produce(q.clone());
    let popped = tokio::time::timeout(guard, consume(q.as_ref()))
        .await
        .expect("consumer hung");
    let pushed = producer.join().unwrap();
    let mut per_key_pushed: BTreeMap<String, Vec<Shape>> = BTreeMap::new();
    for (key, shape) in pushed {
        per_key_pushed.entry(key).or_default().push(shape);
    }
    let mut per_key_popped: BTreeMap<String, Vec<Shape>> = BTreeMap::new();
    for (key, shapes) in popped {
        per_key_popped.entry(key).or_default().extend(shapes);
    }
    assert_eq!(per_key_popped, per_key_pushed);
}

/// The producer waits for each pop before pushing again, so every push lands while the
/// consumer is (about to be) asleep: a lost wake-up stalls the exchange for good and the
/// producer's wait fails. The wait bound only turns that stall into a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_pong_never_loses_a_wake_up() {
    async fn ping_pong<Q: DeltaQueue<ConfigMap> + 'static>(q: Arc<Q>) {
        const ROUNDS: usize = 2_000;
        let (ack, acks) = std::sync::mpsc::channel();
        let consumer = {
            let q = q.clone();
            tokio::spawn(async move {
                while q
                    .pop(|_, _| Ok::<(), ProcessError<Infallible>>(()))
                    .await
                    .is_ok()
                {
                    ack.send(()).unwrap();
                }
            })
        };
        let producer = std::thread::spawn(move || {
            for i in 0..ROUNDS {
                q.add(cm("o", &i.to_string())).unwrap();
                acks.recv_timeout(std::time::Duration::from_secs(30))
                    .unwrap_or_else(|_| panic!("round {i}: the consumer never woke up"));
            }
            q.close();
        });
        tokio::task::spawn_blocking(move || producer.join().unwrap())
            .await
            .unwrap();
        consumer.await.unwrap();
    }
    let store = Store::default();
    ping_pong(Arc::new(real_fifo(&store))).await;
    ping_pong(Arc::new(delta_fifo(&store))).await;
}

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
