//! Sharded managers in range mode (issue #57) on both servers — kube-apiserver with the
//! `ShardedListAndWatch` gate and without it, fake-apiserver honouring `shardSelector` and
//! ignoring it: three replicas split ConfigMaps (each with a Secret it owns) by hash
//! ranges of their uids (in one namespace) or of their namespaces (forty, the Secrets
//! listed by the same slots) with nothing written to them; a killed replica's slots move once
//! its Lease expires, a joining one takes its share while the objects it takes are being
//! reconciled slowly where they are, a partitioned one stops before its slots move, and a
//! gracefully stopped one drains before its slots move at once. All
//! along objects change, and an instrumented reconcile shows no object reconciled by two
//! replicas at once; at each settled point every object was last reconciled by its slot's
//! holder and each replica's cache holds exactly its slots. The only writes to the
//! ConfigMaps are the test's own, and no ConfigMap is ever reconciled as deleted (none is:
//! a key whose object its replica has not listed yet is not a deleted one). A replica whose
//! share changes lists only the slots it gained (`reflector_shard_changes_total`).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering::SeqCst},
    },
    time::Duration,
};

use e2e::{Backend, BackendOptions, Ledger, both, ensure_namespace};
use futures_util::{StreamExt, stream};
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
use prometheus_client::{encoding::text::encode, registry::Registry};
use serde_json::json;

const OBJECTS: usize = 3000;
/// Where the Leases are, and the objects when uids are hashed.
const NS: &str = "range-sharded";
/// Hashing namespaces, the objects are spread over namespaces named as teams name them:
/// by words. (Names that differ only in their last characters, `team-01` … `team-40`, all
/// hash into one slot: FNV-1a's top bits barely depend on a name's end — docs/sharding.md.)
const TEAMS: [&str; 40] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "amber", "blue", "cyan", "dune",
    "ember", "frost", "gale", "haze", "iris", "jade", "kite", "lotus", "moss", "nova",
];

/// The namespace of object `i`.
fn namespace_of(field: ShardField, i: usize) -> String {
    match field {
        ShardField::Namespace => format!("{}-{NS}", TEAMS[i % TEAMS.len()]),
        _ => NS.to_owned(),
    }
}

struct Replica {
    cache: ReadOnlyStore<ConfigMap>,
    registry: Arc<Mutex<Registry>>,
    link: Partitionable,
    task: tokio::task::JoinHandle<()>,
    graceful: CancellationToken,
}

async fn replica(
    backend: &Backend,
    ledger: &Arc<Mutex<Ledger>>,
    field: ShardField,
    name: &'static str,
) -> Replica {
    let short = LeaderElectionConfig::new("unused")
        .namespace(NS)
        .lease_duration(Duration::from_secs(6))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500));
    let link = Partitionable::new(Api::<Lease>::namespaced(backend.client(), NS));
    let factory = match field {
        ShardField::Namespace => FactoryOptions::default(),
        _ => FactoryOptions::default().selectors(Selectors::default().in_namespace(NS)),
    };
    let options = ManagerOptions::for_tests()
        .lease_store(Arc::new(link.clone()))
        .factory(factory)
        .leader_election(short)
        .sharded("web", name)
        .hash_ranges(field)
        .sharding_period(Duration::from_millis(200));
    let mut manager = Manager::new(backend.client(), options).await.unwrap();
    let controller = manager
        .controller::<ConfigMap>(ControllerOptions::default().name("web"))
        .owns::<Secret>();
    let cache = controller.informer().store();
    let registry = manager.registry();
    let ledger = ledger.clone();
    // The reconcile knows nothing of sharding.
    let reconcile = move |cached: Cached<ConfigMap>, _ctx: Arc<()>| {
        let ledger = ledger.clone();
        async move {
            let cm = match cached {
                Cached::Present(cm) => cm,
                Cached::Gone(key) => {
                    ledger.lock().gone.push(format!("{key} on {name}"));
                    return Ok::<_, kube::Error>(Action::Done);
                }
            };
            let key = format!(
                "{}/{}",
                cm.metadata.namespace.as_deref().unwrap(),
                cm.metadata.name.as_deref().unwrap()
            );
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
        cache,
        registry,
        link,
        task,
        graceful,
    }
}

/// What `replica`'s informers reported: share changes taken in by listing only the slots
/// gained (`moved`) or the whole share (`all`), and the failures and expired watches that
/// make `all` the right answer (`disturbed`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Changes {
    moved: f64,
    all: f64,
    disturbed: f64,
}

fn shard_changes(replica: &Replica) -> Changes {
    let mut text = String::new();
    encode(&mut text, &replica.registry.lock()).unwrap();
    let sum = |metric: &str, label: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{metric}{{")) && l.contains(label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    Changes {
        moved: sum("reflector_shard_changes_total", "listed=\"moved\""),
        all: sum("reflector_shard_changes_total", "listed=\"all\""),
        disturbed: sum("reflector_failures_total", "")
            + sum("reflector_watch_restarts_total", "reason=\"gone\""),
    }
}

/// Asserts that each replica took in the share changes since `before` (its counts then)
/// by listing only the slots it gained — unless a request failed or a watch expired
/// meanwhile, when listing the whole share is right — and that some changed.
fn only_moved_listed(name: &str, replicas: &[&Replica], before: &[Changes]) {
    let after: Vec<Changes> = replicas.iter().map(|r| shard_changes(r)).collect();
    for (was, now) in before.iter().zip(&after) {
        assert!(
            was.all == now.all || was.disturbed < now.disturbed,
            "{name}: a share change relisted everything ({was:?} -> {now:?})"
        );
    }
    let moved: f64 = after
        .iter()
        .zip(before)
        .map(|(now, was)| now.moved - was.moved)
        .sum();
    assert!(
        moved > 0.0,
        "{name}: no share change seen ({before:?} -> {after:?})"
    );
}

/// Each ConfigMap's holder (by `namespace/name`), as the slot table names the holder of
/// its uid's or namespace's slot (`None` while some slot is moving or unheld).
async fn holders(backend: &Backend, field: ShardField) -> Option<BTreeMap<String, String>> {
    let leases: Api<Lease> = Api::namespaced(backend.client(), NS);
    let table = leases.get_opt("web-slot-table").await.unwrap()?;
    let text = table
        .metadata
        .annotations?
        .remove("sharding.kube-informer.dev/slots")?;
    let table: serde_json::Value = serde_json::from_str(&text).unwrap();
    if table["moving"].as_object().is_some_and(|m| !m.is_empty()) {
        return None;
    }
    let slots: Vec<Option<String>> = serde_json::from_value(table["holders"].clone()).unwrap();
    // Every ConfigMap the replicas cache: kube-apiserver keeps some of its own in
    // kube-system, and hashing namespaces the replicas watch them all.
    let api: Api<ConfigMap> = match field {
        ShardField::Namespace => Api::all(backend.client()),
        _ => Api::namespaced(backend.client(), NS),
    };
    let mut holders = BTreeMap::new();
    for cm in api.list(&Default::default()).await.unwrap().items {
        let ns = cm.metadata.namespace.clone().unwrap();
        let hash = shard_hash(match field {
            ShardField::Namespace => &ns,
            _ => cm.metadata.uid.as_deref().unwrap(),
        });
        let slot = (hash >> 58) as usize; // 64 slots
        holders.insert(
            format!("{ns}/{}", cm.metadata.name.unwrap()),
            slots[slot].clone()?,
        );
    }
    Some(holders)
}

/// Waits until every object's slot is held by one of `replicas` and each of them holds
/// some, the last reconcile of each object was by its holder, and each replica's cache
/// holds exactly its objects.
async fn settled(
    backend: &Backend,
    field: ShardField,
    ledger: &Mutex<Ledger>,
    replicas: &[(&str, &Replica)],
) -> BTreeMap<String, String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let names: BTreeSet<&str> = replicas.iter().map(|(n, _)| *n).collect();
    loop {
        let read = holders(backend, field).await;
        if let Some(holders) = &read {
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
                        .map(|(k, _)| k.clone())
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
                return holders.clone();
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let caches: Vec<(String, usize)> = replicas
                .iter()
                .map(|(n, r)| (n.to_string(), r.cache.list_keys().len()))
                .collect();
            let unreconciled: Vec<String> = read
                .iter()
                .flatten()
                .filter(|(k, h)| ledger.lock().last.get(*k) != Some(*h))
                .map(|(k, h)| format!("{k}@{h}:{:?}", ledger.lock().last.get(k)))
                .take(10)
                .collect();
            panic!(
                "{}: never settled on {names:?}: holders {:?}, caches {caches:?}, not reconciled by their holder {unreconciled:?}",
                backend.name(),
                read.map(|h| h
                    .values()
                    .fold(BTreeMap::<String, usize>::new(), |mut m, v| {
                        *m.entry(v.clone()).or_default() += 1;
                        m
                    })),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn range_sharded_managers_split_take_over_and_never_reconcile_one_object_twice(
    backend: Backend,
    field: ShardField,
) {
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let namespaces: BTreeSet<String> = (0..OBJECTS).map(|i| namespace_of(field, i)).collect();
    for ns in &namespaces {
        ensure_namespace(&client, ns).await;
    }
    let api = |i: usize| Api::<ConfigMap>::namespaced(client.clone(), &namespace_of(field, i));
    let writes = Arc::new(AtomicUsize::new(0));
    stream::iter(0..OBJECTS)
        .for_each_concurrent(16, |i| {
            let (client, api, writes) = (client.clone(), api(i), writes.clone());
            async move {
                let secrets: Api<Secret> = Api::namespaced(client, &namespace_of(field, i));
                let name = format!("cm-{i:04}");
                let cm: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
                let cm = api.create(&Default::default(), &cm).await.unwrap();
                writes.fetch_add(1, SeqCst);
                let child: Secret = serde_json::from_value(json!({"metadata": {
                    "name": name,
                    "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                        "name": cm.metadata.name, "uid": cm.metadata.uid, "controller": true}],
                }}))
                .unwrap();
                secrets.create(&Default::default(), &child).await.unwrap();
            }
        })
        .await;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop_churn = CancellationToken::new();
    let churn = tokio::spawn({
        let (client, stop, writes) = (client.clone(), stop_churn.clone(), writes.clone());
        async move {
            let mut n = 0u64;
            while !stop.is_cancelled() {
                n += 1;
                let i = ((n * 7919) % OBJECTS as u64) as usize;
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace_of(field, i));
                let name = format!("cm-{i:04}");
                let patch = json!({"data": {"n": n.to_string()}});
                writes.fetch_add(1, SeqCst);
                let _ = api
                    .patch(&name, &Default::default(), &kube::api::Patch::Merge(&patch))
                    .await;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    });
    let a = replica(&backend, &ledger, field, "a").await;
    let mut b = replica(&backend, &ledger, field, "b").await;
    let c = replica(&backend, &ledger, field, "c").await;
    let three = settled(&backend, field, &ledger, &[("a", &a), ("b", &b), ("c", &c)]).await;

    // Kill c: its manager's future is dropped, its Lease left to expire.
    let before = [shard_changes(&a), shard_changes(&b)];
    c.task.abort();
    let _ = c.task.await;
    let two = settled(&backend, field, &ledger, &[("a", &a), ("b", &b)]).await;
    only_moved_listed(backend.name(), &[&a, &b], &before);
    for (key, holder) in &three {
        if holder != "c" {
            assert_eq!(&two[key], holder, "{key} moved though its holder lives");
        }
    }

    // d joins while every object is reconciled slowly where it is: d must not start on
    // one before its old holder has finished and let go.
    ledger.lock().slow = two.keys().cloned().collect();
    let before = [shard_changes(&a), shard_changes(&b)];
    let d = replica(&backend, &ledger, field, "d").await;
    let with_d = settled(&backend, field, &ledger, &[("a", &a), ("b", &b), ("d", &d)]).await;
    only_moved_listed(backend.name(), &[&a, &b], &before);
    for (key, holder) in &with_d {
        assert!(
            holder == "d" || holder == &two[key],
            "{key} moved between old holders"
        );
    }
    ledger.lock().slow.clear();

    // Partition b from the Leases: it stops at its renew deadline, and its slots move once
    // its Lease has expired.
    b.link.set_partitioned(true);
    let without_b = settled(&backend, field, &ledger, &[("a", &a), ("d", &d)]).await;
    for (key, holder) in &with_d {
        if holder != "b" {
            assert_eq!(
                &without_b[key], holder,
                "{key} moved though its holder lives"
            );
        }
    }
    let _ = (&mut b.task).await; // its manager ended: leadership lost

    // Stop a gracefully while its objects are reconciled slowly: its reconciles drain, its
    // Lease is released, and d takes its slots at once (no Lease to wait out) — never
    // while a reconcile of a's runs.
    ledger.lock().slow = without_b
        .iter()
        .filter(|(_, h)| *h == "a")
        .map(|(k, _)| k.clone())
        .collect();
    a.graceful.cancel();
    a.task.await.unwrap();
    let only_d = settled(&backend, field, &ledger, &[("d", &d)]).await;
    assert!(only_d.values().all(|h| h == "d"));

    stop_churn.cancel();
    churn.await.unwrap();
    d.graceful.cancel();
    d.task.await.unwrap();
    let name = backend.name();
    assert!(
        ledger.lock().overlaps.is_empty(),
        "{name}: reconciled by two replicas at once: {:?}",
        ledger.lock().overlaps
    );
    let written: usize = namespaces
        .iter()
        .map(|ns| {
            let requests = backend.requests_for("configmaps", ns);
            let writing = ["create", "update", "patch", "delete"];
            requests
                .iter()
                .filter(|r| writing.contains(&r.verb.as_str()))
                .count()
        })
        .sum();
    assert_eq!(
        written,
        writes.load(SeqCst),
        "{name}: a replica wrote to a ConfigMap"
    );
    let gone = ledger.lock().gone.clone();
    assert!(
        gone.is_empty(),
        "{name}: reconciled as deleted, yet never deleted: {gone:?}"
    );
}

async fn by_uid_with_the_gate(backend: Backend) {
    range_sharded_managers_split_take_over_and_never_reconcile_one_object_twice(
        backend,
        ShardField::Uid,
    )
    .await;
}

async fn by_uid_without_the_gate(backend: Backend) {
    range_sharded_managers_split_take_over_and_never_reconcile_one_object_twice(
        backend,
        ShardField::Uid,
    )
    .await;
}

async fn by_namespace_with_the_gate(backend: Backend) {
    range_sharded_managers_split_take_over_and_never_reconcile_one_object_twice(
        backend,
        ShardField::Namespace,
    )
    .await;
}

both!(
    by_uid_with_the_gate,
    BackendOptions {
        feature_gates: vec!["ShardedListAndWatch"],
        ..BackendOptions::default()
    }
);
both!(by_uid_without_the_gate);
both!(
    by_namespace_with_the_gate,
    BackendOptions {
        feature_gates: vec!["ShardedListAndWatch"],
        ..BackendOptions::default()
    }
);
