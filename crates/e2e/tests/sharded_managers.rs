//! Sharded managers on both servers (fake-apiserver and kube-apiserver, Leases and labels
//! through the API), turned on with one option and an unchanged reconcile: three replicas split the objects (each caches and reconciles only its own),
//! a killed replica's objects are taken over once its Lease expires, a joining replica
//! takes its share through the drain handover, a replica partitioned from its Lease stops
//! before its objects are handed on — and, with objects changing all along and reconciles
//! slow on the shards objects leave, an instrumented reconcile shows that no object is ever
//! reconciled by two replicas at once (a direct move instead of the drain fails it), also
//! when someone else moves an object's label to another live shard mid-reconcile.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use k8s_openapi::api::coordination::v1::Lease;
use kube_informer_runtime::lease::Partitionable;

use e2e::{Backend, Ledger, both, ensure_namespace};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_informer::{
    Selectors,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
};
use kube_informer_runtime::{
    Action, Cached, CancellationToken, ControllerOptions, LeaderElectionConfig, Manager,
    ManagerOptions,
    sharding::{Ring, drain_label, shard_label, shard_selectors},
};
use parking_lot::Mutex;
use serde_json::json;

const OBJECTS: usize = 90;
const NS: &str = "sharded-managers";

struct Replica {
    factory: SharedInformerFactory,
    link: Partitionable,
    task: tokio::task::JoinHandle<()>,
    graceful: CancellationToken,
}

async fn replica(backend: &Backend, ledger: &Arc<Mutex<Ledger>>, name: &'static str) -> Replica {
    // Short enough for a quick test, with 3 s between a partitioned replica's renew deadline
    // and its Lease's expiry: its step-down must land in that margin, on a loaded machine
    // too (at 3 s / 2 s it was a single second).
    let short = LeaderElectionConfig::new("unused")
        .namespace(NS)
        .lease_duration(Duration::from_secs(6))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500));
    let link = Partitionable::new(Api::<Lease>::namespaced(backend.client(), NS));
    let options = ManagerOptions::for_tests()
        .lease_store(Arc::new(link.clone()))
        .factory(FactoryOptions::default().selectors(Selectors::default().in_namespace(NS)))
        .leader_election(short)
        .sharded("web", name)
        .sharding_period(Duration::from_millis(200));
    let mut manager = Manager::new(backend.client(), options).await.unwrap();
    let factory = manager.factory().clone();
    let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("web"));
    let ledger = ledger.clone();
    // The reconcile knows nothing of sharding.
    let reconcile = move |cached: Cached<ConfigMap>, _ctx: Arc<()>| {
        let ledger = ledger.clone();
        async move {
            let Cached::Present(cm) = cached else {
                return Ok::<_, kube::Error>(Action::Done);
            };
            let key = cm.metadata.name.clone().unwrap();
            Ledger::reconcile(&ledger, key, name, "d").await;
            Ok(Action::Done)
        }
    };
    manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
    let graceful = CancellationToken::new();
    let task = tokio::spawn({
        let graceful = graceful.clone();
        async move {
            let _ = manager.run_until(graceful, CancellationToken::new()).await;
        }
    });
    Replica {
        factory,
        link,
        task,
        graceful,
    }
}

/// The shard label of every object on the server (`<shard>+drain` while it is drained).
async fn labels(backend: &Backend) -> BTreeMap<String, String> {
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), NS);
    let (label, drain) = (shard_label("web"), drain_label("web"));
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|cm| {
            let labels = cm.metadata.labels.unwrap_or_default();
            let mut shard = labels.get(&label).cloned().unwrap_or_default();
            if labels.contains_key(&drain) {
                shard += "+drain";
            }
            (cm.metadata.name.unwrap(), shard)
        })
        .collect()
}

/// Waits until every object is labelled for one of `shards` and each of them has some, the
/// last reconcile of each object was by its shard, and each shard's cache holds exactly
/// its objects.
async fn settled(
    backend: &Backend,
    ledger: &Mutex<Ledger>,
    replicas: &[(&str, &Replica)],
) -> BTreeMap<String, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let labels = labels(backend).await;
        let shards: BTreeSet<&str> = replicas.iter().map(|(n, _)| *n).collect();
        let placed = labels.values().all(|s| shards.contains(s.as_str()))
            && shards
                .iter()
                .all(|shard| labels.values().any(|s| s == shard));
        let reconciled = placed && {
            let ledger = ledger.lock();
            labels.iter().all(|(k, s)| ledger.last.get(k) == Some(s))
        };
        let cached = reconciled
            && replicas.iter().all(|(name, replica)| {
                let informer = replica.factory.informer_with::<ConfigMap>(
                    InformerSpec::new().selectors(shard_selectors("web", name)),
                );
                let mine: BTreeSet<String> = labels
                    .iter()
                    .filter(|(_, s)| s == name)
                    .map(|(k, _)| format!("{NS}/{k}"))
                    .collect();
                let cache: BTreeSet<String> = informer
                    .store()
                    .list_keys()
                    .into_iter()
                    .map(|k| k.to_string())
                    .collect();
                cache == mine
            });
        if cached {
            return labels;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}: never settled on {shards:?}",
            backend.name()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn sharded_managers_split_take_over_and_never_reconcile_one_object_twice_at_once(
    backend: Backend,
) {
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for i in 0..OBJECTS {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:03}")}})).unwrap();
        api.create(&Default::default(), &cm).await.unwrap();
    }
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    // Churn all along: every few milliseconds an object changes, so reconciles are running
    // whenever an object moves.
    let stop_churn = CancellationToken::new();
    let churn = tokio::spawn({
        let (api, stop) = (
            Api::<ConfigMap>::namespaced(client.clone(), NS),
            stop_churn.clone(),
        );
        async move {
            let mut n = 0u64;
            while !stop.is_cancelled() {
                n += 1;
                let name = format!("cm-{:03}", (n * 7919) % OBJECTS as u64);
                let patch = json!({"data": {"n": n.to_string()}});
                // A conflict with the sharder's write is harmless here.
                let _ = api
                    .patch(&name, &Default::default(), &kube::api::Patch::Merge(&patch))
                    .await;
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        }
    });
    let a = replica(&backend, &ledger, "a").await;
    let mut b = replica(&backend, &ledger, "b").await;
    let c = replica(&backend, &ledger, "c").await;

    let three = settled(&backend, &ledger, &[("a", &a), ("b", &b), ("c", &c)]).await;
    for shard in ["a", "b", "c"] {
        let n = three.values().filter(|s| *s == shard).count();
        assert!(n > OBJECTS / 6, "{shard} holds {n} of {OBJECTS}");
    }

    // Someone else moves labels (`kubectl label --overwrite`, a GitOps tool): while an
    // object's reconcile runs on its shard, its label is set to another live shard, ten
    // times. No other shard starts on it, and every object ends where the ring puts it.
    ledger.lock().slow = three.keys().cloned().collect();
    let shard = shard_label("web");
    for edit in 0..10 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        let (key, holder) = loop {
            let running = ledger
                .lock()
                .running
                .iter()
                .next()
                .map(|(k, r)| (k.clone(), r.clone()));
            if let Some(running) = running {
                break running;
            }
            assert!(tokio::time::Instant::now() < deadline, "no reconcile ran");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let others: Vec<&str> = ["a", "b", "c"]
            .into_iter()
            .filter(|s| *s != holder)
            .collect();
        let moved = json!({"metadata": {"labels": {&shard: others[edit % 2]}}});
        api.patch(&key, &Default::default(), &kube::api::Patch::Merge(&moved))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let restored = settled(&backend, &ledger, &[("a", &a), ("b", &b), ("c", &c)]).await;
    assert_eq!(
        restored,
        three,
        "{}: an edited label stayed",
        backend.name()
    );
    assert!(
        ledger.lock().overlaps.is_empty(),
        "{}: a moved label gave two replicas one object: {:?}",
        backend.name(),
        ledger.lock().overlaps
    );
    ledger.lock().slow.clear();

    // Kill c: its manager's future is dropped, its Lease left to expire.
    c.task.abort();
    let _ = c.task.await;
    let two = settled(&backend, &ledger, &[("a", &a), ("b", &b)]).await;
    for (key, shard) in &three {
        if shard != "c" {
            assert_eq!(&two[key], shard, "{key} moved though its shard lives");
        }
    }

    // d joins while the objects it will take are being reconciled, slowly, by their
    // current shards: d must not start on one before its old shard has finished and let go.
    let ring = Ring::new(["a", "b", "d"]);
    let moving: BTreeSet<String> = two
        .keys()
        .filter(|k| ring.shard_for(&format!("/ConfigMap/{NS}/{k}")) == Some("d"))
        .cloned()
        .collect();
    ledger.lock().slow = moving.clone();
    for key in &moving {
        let patch = json!({"data": {"moving": "yes"}});
        api.patch(key, &Default::default(), &kube::api::Patch::Merge(&patch))
            .await
            .unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !ledger.lock().running.keys().any(|k| moving.contains(k)) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no slow reconcile started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let d = replica(&backend, &ledger, "d").await;
    let with_d = settled(&backend, &ledger, &[("a", &a), ("b", &b), ("d", &d)]).await;
    let to_d: BTreeSet<String> = with_d
        .iter()
        .filter(|(_, s)| *s == "d")
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(to_d, moving, "d took other objects than its share");
    for (key, shard) in &with_d {
        assert!(
            shard == "d" || shard == &two[key],
            "{key} moved between old shards"
        );
    }

    // Partition b from the Leases (its requests to them fail; it still reaches the
    // objects): it stops at its renew deadline, and its objects go to a and d only once its
    // Lease has expired.
    b.link.set_partitioned(true);
    let without_b = settled(&backend, &ledger, &[("a", &a), ("d", &d)]).await;
    for (key, shard) in &with_d {
        if shard != "b" {
            assert_eq!(&without_b[key], shard, "{key} moved though its shard lives");
        }
    }
    let _ = (&mut b.task).await; // its manager ended: leadership lost

    stop_churn.cancel();
    churn.await.unwrap();
    assert!(
        ledger.lock().overlaps.is_empty(),
        "reconciled by two replicas at once: {:?}",
        ledger.lock().overlaps
    );
    for replica in [a, d] {
        replica.graceful.cancel();
        replica.task.await.unwrap();
    }
}

both!(sharded_managers_split_take_over_and_never_reconcile_one_object_twice_at_once);
