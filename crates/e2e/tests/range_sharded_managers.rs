//! Sharded managers in range mode (issue #57) on both servers — kube-apiserver with the
//! `ShardedListAndWatch` gate and without it, fake-apiserver honouring `shardSelector` and
//! ignoring it: three replicas split ConfigMaps (each with a Secret it owns) by hash
//! ranges of their uids with nothing written to them; a killed replica's slots move once
//! its Lease expires, a joining one takes its share while the objects it takes are being
//! reconciled slowly where they are, a partitioned one stops before its slots move. All
//! along objects change, and an instrumented reconcile shows no object reconciled by two
//! replicas at once; at each settled point every object was last reconciled by its slot's
//! holder and each replica's cache holds exactly its slots. The only writes to the
//! ConfigMaps are the test's own.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering::SeqCst},
    },
    time::Duration,
};

use e2e::{Backend, BackendOptions, both, ensure_namespace};
use k8s_openapi::api::{
    coordination::v1::Lease,
    core::v1::{ConfigMap, Secret},
};
use kube::Api;
use kube_informer::{
    ReadOnlyStore, Selectors,
    factory::FactoryOptions,
    list_watch::{ShardField, shard_hash},
};
use kube_informer_runtime::{
    Action, Cached, CancellationToken, ControllerOptions, LeaderElectionConfig, Manager,
    ManagerOptions, lease::Partitionable,
};
use parking_lot::Mutex;
use serde_json::json;

const OBJECTS: usize = 120;
const NS: &str = "range-sharded";

/// Who reconciles what (see `sharded_managers.rs`).
#[derive(Default)]
struct Ledger {
    running: HashMap<String, String>,
    overlaps: Vec<String>,
    last: BTreeMap<String, String>,
    slow: BTreeSet<String>,
}

struct Running {
    ledger: Arc<Mutex<Ledger>>,
    key: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.ledger.lock().running.remove(&self.key);
    }
}

struct Replica {
    cache: ReadOnlyStore<ConfigMap>,
    link: Partitionable,
    task: tokio::task::JoinHandle<()>,
    graceful: CancellationToken,
}

async fn replica(backend: &Backend, ledger: &Arc<Mutex<Ledger>>, name: &'static str) -> Replica {
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
        .hash_ranges(ShardField::Uid)
        .sharding_period(Duration::from_millis(200));
    let mut manager = Manager::new(backend.client(), options).await.unwrap();
    let controller = manager
        .controller::<ConfigMap>(ControllerOptions::default().name("web"))
        .owns::<Secret>();
    let cache = controller.informer().store();
    let ledger = ledger.clone();
    // The reconcile knows nothing of sharding.
    let reconcile = move |cached: Cached<ConfigMap>, _ctx: Arc<()>| {
        let ledger = ledger.clone();
        async move {
            let Cached::Present(cm) = cached else {
                return Ok::<_, kube::Error>(Action::Done);
            };
            let key = cm.metadata.name.clone().unwrap();
            {
                let mut ledger = ledger.lock();
                if let Some(other) = ledger.running.insert(key.clone(), name.to_owned()) {
                    ledger.overlaps.push(format!("{key}: {other} and {name}"));
                }
            }
            let running = Running {
                ledger: ledger.clone(),
                key: key.clone(),
            };
            let slow = name != "d" && ledger.lock().slow.contains(&key);
            tokio::time::sleep(Duration::from_millis(if slow { 300 } else { 20 })).await;
            drop(running);
            ledger.lock().last.insert(key, name.to_owned());
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
        cache,
        link,
        task,
        graceful,
    }
}

/// Each ConfigMap's holder, as the slot table names the holder of its uid's slot (`None`
/// while some slot is moving or unheld).
async fn holders(backend: &Backend) -> Option<BTreeMap<String, String>> {
    let leases: Api<Lease> = Api::namespaced(backend.client(), NS);
    let table = leases.get_opt("web-slot-table").await.unwrap()?;
    let text = table.metadata.annotations?.remove("sharding.kube-informer.dev/slots")?;
    let table: serde_json::Value = serde_json::from_str(&text).unwrap();
    if table["moving"].as_object().is_some_and(|m| !m.is_empty()) {
        return None;
    }
    let slots: Vec<Option<String>> = serde_json::from_value(table["holders"].clone()).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), NS);
    let mut holders = BTreeMap::new();
    for cm in api.list(&Default::default()).await.unwrap().items {
        let hash = shard_hash(cm.metadata.uid.as_deref().unwrap());
        let slot = (hash >> 58) as usize; // 64 slots
        holders.insert(cm.metadata.name.unwrap(), slots[slot].clone()?);
    }
    Some(holders)
}

/// Waits until every object's slot is held by one of `replicas` and each of them holds
/// some, the last reconcile of each object was by its holder, and each replica's cache
/// holds exactly its objects.
async fn settled(
    backend: &Backend,
    ledger: &Mutex<Ledger>,
    replicas: &[(&str, &Replica)],
) -> BTreeMap<String, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let names: BTreeSet<&str> = replicas.iter().map(|(n, _)| *n).collect();
        if let Some(holders) = holders(backend).await {
            let placed = holders.values().all(|h| names.contains(h.as_str()))
                && names.iter().all(|n| holders.values().any(|h| h == n));
            let reconciled = placed && {
                let ledger = ledger.lock();
                holders.iter().all(|(k, h)| ledger.last.get(k) == Some(h))
            };
            let cached = reconciled
                && replicas.iter().all(|(name, replica)| {
                    let mine: BTreeSet<String> = holders
                        .iter()
                        .filter(|(_, h)| h == name)
                        .map(|(k, _)| format!("{NS}/{k}"))
                        .collect();
                    let cache: BTreeSet<String> = replica
                        .cache
                        .list_keys()
                        .into_iter()
                        .map(|k| k.to_string())
                        .collect();
                    cache == mine
                });
            if cached {
                return holders;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{}: never settled on {names:?}",
            backend.name()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn range_sharded_managers_split_take_over_and_never_reconcile_one_object_twice(
    backend: Backend,
) {
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let writes = Arc::new(AtomicUsize::new(0));
    for i in 0..OBJECTS {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:03}")}})).unwrap();
        let cm = api.create(&Default::default(), &cm).await.unwrap();
        writes.fetch_add(1, SeqCst);
        let child: Secret = serde_json::from_value(json!({"metadata": {
            "name": format!("cm-{i:03}"),
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": cm.metadata.name,
                "uid": cm.metadata.uid, "controller": true}],
        }}))
        .unwrap();
        secrets.create(&Default::default(), &child).await.unwrap();
    }
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop_churn = CancellationToken::new();
    let churn = tokio::spawn({
        let (api, stop, writes) = (api.clone(), stop_churn.clone(), writes.clone());
        async move {
            let mut n = 0u64;
            while !stop.is_cancelled() {
                n += 1;
                let name = format!("cm-{:03}", (n * 7919) % OBJECTS as u64);
                let patch = json!({"data": {"n": n.to_string()}});
                writes.fetch_add(1, SeqCst);
                let _ = api
                    .patch(&name, &Default::default(), &kube::api::Patch::Merge(&patch))
                    .await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    let a = replica(&backend, &ledger, "a").await;
    let mut b = replica(&backend, &ledger, "b").await;
    let c = replica(&backend, &ledger, "c").await;
    let three = settled(&backend, &ledger, &[("a", &a), ("b", &b), ("c", &c)]).await;

    // Kill c: its manager's future is dropped, its Lease left to expire.
    c.task.abort();
    let _ = c.task.await;
    let two = settled(&backend, &ledger, &[("a", &a), ("b", &b)]).await;
    for (key, holder) in &three {
        if holder != "c" {
            assert_eq!(&two[key], holder, "{key} moved though its holder lives");
        }
    }

    // d joins while every object is reconciled slowly where it is: d must not start on
    // one before its old holder has finished and let go.
    ledger.lock().slow = two.keys().cloned().collect();
    let d = replica(&backend, &ledger, "d").await;
    let with_d = settled(&backend, &ledger, &[("a", &a), ("b", &b), ("d", &d)]).await;
    for (key, holder) in &with_d {
        assert!(holder == "d" || holder == &two[key], "{key} moved between old holders");
    }
    ledger.lock().slow.clear();

    // Partition b from the Leases: it stops at its renew deadline, and its slots move once
    // its Lease has expired.
    b.link.set_partitioned(true);
    let without_b = settled(&backend, &ledger, &[("a", &a), ("d", &d)]).await;
    for (key, holder) in &with_d {
        if holder != "b" {
            assert_eq!(&without_b[key], holder, "{key} moved though its holder lives");
        }
    }
    let _ = (&mut b.task).await; // its manager ended: leadership lost

    stop_churn.cancel();
    churn.await.unwrap();
    for replica in [a, d] {
        replica.graceful.cancel();
        replica.task.await.unwrap();
    }
    let name = backend.name();
    assert!(
        ledger.lock().overlaps.is_empty(),
        "{name}: reconciled by two replicas at once: {:?}",
        ledger.lock().overlaps
    );
    let written = backend
        .requests_for("configmaps", NS)
        .into_iter()
        .filter(|r| matches!(r.verb.as_str(), "create" | "update" | "patch" | "delete"))
        .count();
    assert_eq!(written, writes.load(SeqCst), "{name}: a replica wrote to a ConfigMap");
}

async fn range_sharded_managers_with_the_gate(backend: Backend) {
    range_sharded_managers_split_take_over_and_never_reconcile_one_object_twice(backend).await;
}

async fn range_sharded_managers_without_the_gate(backend: Backend) {
    range_sharded_managers_split_take_over_and_never_reconcile_one_object_twice(backend).await;
}

both!(
    range_sharded_managers_with_the_gate,
    BackendOptions {
        feature_gates: vec!["ShardedListAndWatch"],
        ..BackendOptions::default()
    }
);
both!(range_sharded_managers_without_the_gate);
