//! client-go `tools/cache/fifo_test.go`, against [`Fifo`]: one object per key, newest state,
//! in the order keys were first queued. Objects are ConfigMaps named as Go's test objects,
//! with Go's `val` in `data.v`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::fifo::{DeltaSink, Fifo, PopError, ProcessError};

fn obj(name: &str, val: u64) -> Arc<ConfigMap> {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some([("v".to_owned(), val.to_string())].into());
    Arc::new(cm)
}

fn val(cm: &ConfigMap) -> u64 {
    cm.data.as_ref().unwrap()["v"].parse().unwrap()
}

/// Go's `Pop(queue)` helper: pops one object, processing it successfully.
async fn pop(f: &Fifo<ConfigMap>) -> Arc<ConfigMap> {
    f.pop(|_, _| Ok::<(), ProcessError<()>>(()))
        .await
        .expect("an object")
}

/// Mirrors `TestFIFO_basic`: two producers, each object popped in its producer's order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_basic() {
    let f = Arc::new(Fifo::new());
    const AMOUNT: u64 = 500;
    for prefix in ["a", "b"] {
        let f = f.clone();
        tokio::spawn(async move {
            for i in 0..AMOUNT {
                f.add(obj(&format!("{prefix}-{i}"), i + 1)).unwrap();
                tokio::task::yield_now().await;
            }
        });
    }
    let mut last = [0u64; 2];
    for _ in 0..AMOUNT * 2 {
        let popped = pop(&f).await;
        let producer = usize::from(popped.metadata.name.as_deref().unwrap().starts_with('b'));
        assert!(val(&popped) > last[producer], "out of order");
        last[producer] = val(&popped);
    }
}

/// Mirrors `TestFIFO_addUpdate`: an update replaces the queued object; one pop, then gone.
#[tokio::test]
async fn fifo_add_update() {
    let f = Fifo::new();
    f.add(obj("foo", 10)).unwrap();
    f.update(obj("foo", 15)).unwrap();
    assert_eq!(f.list().iter().map(|o| val(o)).collect::<Vec<_>>(), [15]);
    assert_eq!(f.list_keys(), ["foo"]);
    assert_eq!(val(&*pop(&f).await), 15);
    assert!(f.is_empty(), "no second value");
    assert!(f.get(&obj("foo", 0)).is_none(), "the item got removed");
}

/// Mirrors `TestFIFO_addReplace`.
#[tokio::test]
async fn fifo_add_replace() {
    let f = Fifo::new();
    f.add(obj("foo", 10)).unwrap();
    f.replace(vec![obj("foo", 15)], "15").unwrap();
    assert_eq!(val(&*pop(&f).await), 15);
    assert!(f.is_empty(), "no second value");
    assert!(f.get(&obj("foo", 0)).is_none());
}

/// Mirrors `TestFIFO_detectLineJumpers`: an updated key keeps its place, and once popped,
/// re-adding it puts it at the back.
#[tokio::test]
async fn fifo_detect_line_jumpers() {
    let f = Fifo::new();
    f.add(obj("foo", 10)).unwrap();
    f.add(obj("bar", 1)).unwrap();
    f.add(obj("foo", 11)).unwrap();
    f.add(obj("foo", 13)).unwrap();
    f.add(obj("zab", 30)).unwrap();
    assert_eq!(val(&*pop(&f).await), 13);
    f.add(obj("foo", 14)).unwrap(); // foo must not jump back in line
    let rest = [pop(&f).await, pop(&f).await, pop(&f).await];
    assert_eq!(rest.map(|o| val(&o)), [1, 30, 14]);
}

/// Mirrors `TestFIFO_HasSynced` (its six cases).
#[tokio::test]
async fn fifo_has_synced() {
    type Action = fn(&Fifo<ConfigMap>);
    let replace_two: Action = |f| f.replace(vec![obj("a", 1), obj("b", 2)], "0").unwrap();
    let cases: Vec<(Vec<Action>, usize, bool)> = vec![
        (vec![], 0, false),
        (vec![|f| f.add(obj("a", 1)).unwrap()], 0, true),
        (vec![|f| f.replace(vec![], "0").unwrap()], 0, true),
        (vec![replace_two], 0, false),
        (vec![replace_two], 1, false),
        (vec![replace_two], 2, true),
    ];
    for (i, (actions, pops, expected)) in cases.into_iter().enumerate() {
        let f = Fifo::new();
        for action in actions {
            action(&f);
        }
        for _ in 0..pops {
            pop(&f).await;
        }
        assert_eq!(f.has_synced(), expected, "case {i}");
    }
}

/// Mirrors `TestFIFO_PopShouldUnblockWhenClosed`: ten waiting pops all return on close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifo_pop_should_unblock_when_closed() {
    let f = Arc::new(Fifo::<ConfigMap>::new());
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

/// `TestFIFO_requeueOnPop`, from client-go before 2025 (removed with `ErrRequeue`): a
/// process that asks for a requeue puts the object back; kept here because [`Fifo`] keeps
/// requeueing (see its docs for why it is safe on this queue).
#[tokio::test]
async fn fifo_requeue_on_pop_from_history() {
    let f = Fifo::new();
    f.add(obj("foo", 10)).unwrap();
    let failed = f.pop(|_, _| Err(ProcessError::Requeue("test error"))).await;
    assert!(matches!(failed, Err(PopError::Process("test error"))));
    assert_eq!(f.get_by_key("foo").map(|o| val(&o)), Some(10), "put back");
    let failed = f.pop(|_, _| Err(ProcessError::Fail("test error"))).await;
    assert!(matches!(failed, Err(PopError::Process("test error"))));
    assert!(f.get_by_key("foo").is_none(), "a plain failure drops it");
}
