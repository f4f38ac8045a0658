//! What the FIFO cases share: Go's test objects as ConfigMaps (`name`, with Go's `val` in
//! `data.v`), known-object stores, and pops that report what came out.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::{
    Indexers, Store,
    fifo::{DeltaQueue, DeltaSink, DeltaType, PopError, ProcessError},
};

/// Go's `mkFifoObj(name, val)`.
pub(super) fn obj(name: &str, val: u64) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some([("v".to_owned(), val.to_string())].into());
    Arc::new(cm)
}

pub(super) fn val(cm: &ConfigMap) -> u64 {
    cm.data.as_ref().unwrap()["v"].parse().unwrap()
}

/// A known-objects store holding `objects` (Go's `literalListerGetter`).
pub(super) fn known(objects: &[Arc<ConfigMap>]) -> Arc<Store<ConfigMap>> {
    let store = Store::new(Indexers::new());
    for o in objects {
        store.add(o.clone()).unwrap();
    }
    Arc::new(store)
}

/// One delta as the tests compare it: type, name, val, and whether it is a
/// final-state-unknown tombstone.
pub(super) type Seen = (DeltaType, String, u64, bool);

pub(super) fn seen(t: DeltaType, name: &str, v: u64, tombstone: bool) -> Seen {
    (t, name.to_owned(), v, tombstone)
}

/// Go's `Pop(f)`: one entry's deltas, oldest first.
pub(super) async fn pop<Q: DeltaQueue<ConfigMap>>(q: &Q) -> Vec<Seen> {
    let mut out = Vec::new();
    q.pop(|deltas, _| {
        for d in deltas.iter() {
            let tombstone =
                matches!(d, kube_informer::fifo::Delta::Deleted(gone) if gone.is_final_state_unknown());
            let o = d.object();
            out.push((
                d.delta_type(),
                o.metadata.name.clone().unwrap(),
                val(o),
                tombstone,
            ));
        }
        Ok::<(), ProcessError<()>>(())
    })
    .await
    .unwrap();
    out
}

/// Go's `testPop(f).val`: the newest delta's value.
pub(super) async fn pop_val<Q: DeltaQueue<ConfigMap>>(q: &Q) -> u64 {
    pop(q).await.last().unwrap().2
}

/// `TestDeltaFIFO_HasSynced` / `TestRealFIFO_HasSynced`: their shared cases (and, for the
/// DeltaFIFO, the one with a key listed twice).
pub(super) async fn has_synced_cases<Q>(make: impl Fn() -> Q, duplicate_key_case: bool)
where
    Q: DeltaQueue<ConfigMap> + DeltaSink<ConfigMap>,
{
    type Action<Q> = fn(&Q);
    let two: Action<Q> = |f| f.replace(vec![obj("a", 1), obj("b", 2)], "0").unwrap();
    let mut cases: Vec<(Vec<Action<Q>>, usize, bool)> = vec![
        (vec![], 0, false),
        (vec![|f| f.add(obj("a", 1)).unwrap()], 0, true),
        (vec![|f| f.replace(vec![], "0").unwrap()], 0, true),
        (vec![two], 0, false),
        (vec![two], 1, false),
        (vec![two], 2, true),
    ];
    if duplicate_key_case {
        cases.push((
            vec![|f| f.replace(vec![obj("a", 1), obj("a", 2)], "0").unwrap()],
            1,
            true,
        ));
    }
    for (i, (actions, pops, expected)) in cases.into_iter().enumerate() {
        let f = make();
        for action in actions {
            action(&f);
        }
        for _ in 0..pops {
            pop(&f).await;
        }
        assert_eq!(f.has_synced(), expected, "case {i}");
    }
}

/// `Test*FIFO_PopShouldUnblockWhenClosed`: ten waiting pops all return on close.
pub(super) async fn pops_unblock_when_closed<Q: DeltaQueue<ConfigMap> + 'static>(f: Arc<Q>) {
    let pops: Vec<_> = (0..10)
        .map(|_| {
            let f = f.clone();
            tokio::spawn(async move { f.pop(|_, _| Ok::<(), ProcessError<()>>(())).await })
        })
        .collect();
    tokio::task::yield_now().await;
    f.close();
    for p in pops {
        assert!(matches!(p.await.unwrap(), Err(PopError::Closed)));
    }
}
