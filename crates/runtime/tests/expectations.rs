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
    pods: MemorySource<Pod>,
    cached_pods: kube_informer::ReadOnlyStore<Pod>,
    expectations: Option<Expectations>,
    created: AtomicUsize,
    deletes: AtomicUsize,
    reconciles: AtomicUsize,
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
    let have = ctx.cached_pods.list().len();
    let want = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0) as usize;
    let missing = want.saturating_sub(have);
    if let Some(expectations) = &ctx.expectations {
        expectations.expect_creations(&key, missing);
    }
    for _ in 0..missing {
        let n = ctx.created.fetch_add(1, Ordering::SeqCst);
        ctx.pods.add(pod(n));
    }
    Ok(Action::RequeueAfter(Duration::from_millis(50)))
}

/// Deletes the surplus pods the cache shows, newest name first.
async fn scale_down(rs: Cached<ReplicaSet>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
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
    let surplus = have.len().saturating_sub(want);
    if let Some(expectations) = &ctx.expectations {
        expectations.expect_deletions(&key, surplus);
    }
    for pod in have.iter().rev().take(surplus) {
        ctx.deletes.fetch_add(1, Ordering::SeqCst);
        ctx.pods.delete(Pod::clone(pod));
    }
    Ok(Action::RequeueAfter(Duration::from_millis(50)))
}

/// Runs the controller while the pod watch lags, then lets it catch up; returns the pods
/// created.
async fn run(with_expectations: bool) -> usize {
    let (sets, pods) = (
        MemorySource::<ReplicaSet>::default(),
        MemorySource::<Pod>::default(),
    );
    sets.add(replica_set(3));
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
    let ctx = Arc::new(Ctx {
        pods: pods.clone(),
        cached_pods: cached.store(),
        expectations: with_expectations.then(|| controller.expectations().clone()),
        created: AtomicUsize::new(0),
        deletes: AtomicUsize::new(0),
        reconciles: AtomicUsize::new(0),
    });
    pods.hold(); // the pod watch lags: writes land, the cache does not see them yet
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
    assert_eq!(
        cached.store().len(),
        ctx.created.load(Ordering::SeqCst),
        "the cache caught up"
    );
    cancel.cancel();
    running.await.unwrap().unwrap();
    factory.shutdown().await;
    ctx.created.load(Ordering::SeqCst)
}

#[tokio::test(start_paused = true)]
async fn expectations_prevent_duplicate_creates_under_a_lagging_watch() {
    assert_eq!(run(true).await, 3, "exactly the three pods needed");
    assert!(
        run(false).await > 3,
        "without expectations, the lagging cache causes duplicates"
    );
}

/// Scales four pods down to one while the pod watch lags, then lets it catch up; returns
/// the deletes sent, and whether the expectations were met again once the cache caught up
/// (the owned-object handler marked each deletion observed), long before they expire.
async fn run_scale_down(with_expectations: bool) -> (usize, bool) {
    let (sets, pods) = (
        MemorySource::<ReplicaSet>::default(),
        MemorySource::<Pod>::default(),
    );
    sets.add(replica_set(1));
    for n in 0..4 {
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
        pods: pods.clone(),
        cached_pods: cached.store(),
        expectations: with_expectations.then(|| expectations.clone()),
        created: AtomicUsize::new(0),
        deletes: AtomicUsize::new(0),
        reconciles: AtomicUsize::new(0),
    });
    pods.hold(); // the four pods are listed; the deletes are not seen yet
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        scale_down,
        |_, _, _| Action::Retry,
        ctx.clone(),
        cancel.clone(),
    ));
    while ctx.reconciles.load(Ordering::SeqCst) < 5 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    pods.release();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(cached.store().len(), 1, "the cache caught up");
    let met = expectations.satisfied(&ObjectKey::new(Some("shop"), "web"));
    cancel.cancel();
    running.await.unwrap().unwrap();
    factory.shutdown().await;
    (ctx.deletes.load(Ordering::SeqCst), met)
}

#[tokio::test(start_paused = true)]
async fn expectations_prevent_duplicate_deletes_under_a_lagging_watch() {
    assert_eq!(
        run_scale_down(true).await,
        (3, true),
        "exactly the three surplus pods, and the expectations met once they were seen gone"
    );
    let (deletes, _) = run_scale_down(false).await;
    assert!(
        deletes > 3,
        "without expectations, the lagging cache sends the deletes again: {deletes}"
    );
}
