//! The duplicate-create problem, with in-memory sources and a lagging watch: a ReplicaSet
//! controller creating pods from what its cache shows creates exactly as many as needed
//! when it keeps expectations — and too many without them (so the test can fail). The
//! same for deletes when it scales down.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
use kube::ResourceExt;
use kube_informer::{
    ObjectKey,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    list_watch::MemorySource,
};
use kube_informer_runtime::controller::{
    Action, Cached, Controller, ControllerOptions, Expectations,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Ctx {
    scale: Scale,
    pods: MemorySource<Pod>,
    cached_pods: kube_informer::ReadOnlyStore<Pod>,
    expectations: Option<Expectations>,
    created: AtomicUsize,
    deletes: AtomicUsize,
    reconciles: AtomicUsize,
}

/// Which way a run scales: the reconcile only creates, or only deletes, so that what it
/// did twice is not undone before it is counted.
#[derive(Clone, Copy, PartialEq)]
enum Scale {
    Up,
    Down,
}

fn replica_set(replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": "rs-uid"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap()
}

fn pod(n: usize) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": format!("web-{n}"), "namespace": "shop",
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-uid", "controller": true}]}}))
    .unwrap()
}

/// Scales the ReplicaSet's pods towards its replicas from what the cache shows: creates
/// the missing ones (scaling up), or deletes the surplus, newest name first (scaling down).
async fn reconcile(rs: Cached<ReplicaSet>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let Cached::Present(rs) = rs else {
        return Ok(Action::Done);
    };
    let key = ObjectKey::new(rs.namespace().as_deref(), &rs.name_any());
    if let Some(expectations) = &ctx.expectations
        && !expectations.satisfied(&key)
    {
        return Ok(Action::RequeueAfter(Duration::from_millis(50))); // the cache is behind
    }
    let mut have = ctx.cached_pods.list();
    have.sort_by_key(|p| p.name_any());
    let want = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0) as usize;
    if ctx.scale == Scale::Up {
        let missing = want.saturating_sub(have.len());
        if let Some(expectations) = &ctx.expectations {
            expectations.expect_creations(&key, missing);
        }
        for _ in 0..missing {
            let n = ctx.created.fetch_add(1, Ordering::SeqCst);
            ctx.pods.add(pod(n));
        }
    } else {
        let surplus = have.len().saturating_sub(want);
        if let Some(expectations) = &ctx.expectations {
            expectations.expect_deletions(&key, surplus);
        }
        for pod in have.iter().rev().take(surplus) {
            ctx.deletes.fetch_add(1, Ordering::SeqCst);
            ctx.pods.delete(Pod::clone(pod));
        }
    }
    Ok(Action::RequeueAfter(Duration::from_millis(50)))
}

/// What one run did.
struct Outcome {
    created: usize,
    deletes: usize,
    /// Pods in the cache once it caught up.
    cached: usize,
    /// Whether the expectations were met again once the cache caught up (the owned-object
    /// handlers marked each change observed), long before they expire.
    met: bool,
}

/// Runs the controller, scaling `scale`, over a ReplicaSet of `replicas` and `existing`
/// pods while the pod watch lags (writes land, the cache does not see them yet), then lets
/// it catch up.
async fn run(scale: Scale, replicas: i32, existing: usize, with_expectations: bool) -> Outcome {
    let (sets, pods) = (
        MemorySource::<ReplicaSet>::default(),
        MemorySource::<Pod>::default(),
    );
    sets.add(replica_set(replicas));
    for n in 0..existing {
        pods.add(pod(n));
    }
    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let factory = SharedInformerFactory::new(
        kube::Client::try_from(nowhere).unwrap(),
        FactoryOptions::default(),
    );
    factory.informer_with::<ReplicaSet>(InformerSpec::new().list_watcher(sets.clone()));
    let cached = factory.informer_with::<Pod>(InformerSpec::new().list_watcher(pods.clone()));
    let controller =
        Controller::<ReplicaSet>::new(&factory, ControllerOptions::default().name("rs"))
            .owns::<Pod>();
    let expectations = controller.expectations().clone();
    let ctx = Arc::new(Ctx {
        scale,
        pods: pods.clone(),
        cached_pods: cached.store(),
        expectations: with_expectations.then(|| expectations.clone()),
        created: AtomicUsize::new(0),
        deletes: AtomicUsize::new(0),
        reconciles: AtomicUsize::new(0),
    });
    pods.hold(); // the existing pods are listed; the writes are not seen yet
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        reconcile,
        |_, _, _| Action::Retry,
        ctx.clone(),
        cancel.clone(),
    ));
    while ctx.reconciles.load(Ordering::SeqCst) < 5 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    pods.release();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let outcome = Outcome {
        created: ctx.created.load(Ordering::SeqCst),
        deletes: ctx.deletes.load(Ordering::SeqCst),
        cached: cached.store().len(),
        met: expectations.satisfied(&ObjectKey::new(Some("shop"), "web")),
    };
    cancel.cancel();
    running.await.unwrap().unwrap();
    factory.shutdown().await;
    outcome
}

#[tokio::test(start_paused = true)]
async fn expectations_prevent_duplicate_creates_under_a_lagging_watch() {
    let kept = run(Scale::Up, 3, 0, true).await;
    assert_eq!(kept.cached, kept.created, "the cache caught up");
    assert_eq!(kept.created, 3, "exactly the three pods needed");
    let without = run(Scale::Up, 3, 0, false).await;
    assert_eq!(without.cached, without.created, "the cache caught up");
    assert!(
        without.created > 3,
        "without expectations, the lagging cache causes duplicates"
    );
}

#[tokio::test(start_paused = true)]
async fn expectations_prevent_duplicate_deletes_under_a_lagging_watch() {
    let kept = run(Scale::Down, 1, 4, true).await;
    assert_eq!(kept.cached, 1, "the cache caught up");
    assert_eq!(
        (kept.deletes, kept.met),
        (3, true),
        "exactly the three surplus pods, and the expectations met once they were seen gone"
    );
    let without = run(Scale::Down, 1, 4, false).await;
    assert_eq!(without.cached, 1, "the cache caught up");
    assert!(
        without.deletes > 3,
        "without expectations, the lagging cache sends the deletes again: {}",
        without.deletes
    );
}
