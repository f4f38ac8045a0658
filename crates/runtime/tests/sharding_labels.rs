//! Sharding on fake-apiserver: three live shards split the objects, the sharder labels each
//! with its shard (children with their owner's), each shard's informer caches its own
//! objects only, and a fourth shard joining moves about a quarter of them, to itself only:
//! an owner only after its old shard has let go of it (the drain handover).

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_informer::informer::{InformerOptions, SharedIndexInformer};
use kube_informer::reflector::ReflectorOptions;
use kube_informer_runtime::{
    CancellationToken,
    leader_election::LeaderElector,
    lease::MemoryLeases,
    sharding::{
        Members, Placement, Ring, ShardedKind, Sharder, Standing, Step, acknowledge_drain,
        shard_label, shard_selectors, standing,
    },
};
use serde_json::json;

const OWNERS: usize = 240;
const CHILDREN_PER_OWNER: usize = 2;

struct Shard {
    informer: SharedIndexInformer<ConfigMap>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn shard(server: &FakeApiServer, name: &str) -> Shard {
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let options = InformerOptions::default()
        .reflector(ReflectorOptions::default().selectors(shard_selectors("web", name)));
    let informer = SharedIndexInformer::new(api, options);
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    Shard {
        informer,
        cancel,
        task,
    }
}

fn cached(shard: &Shard) -> BTreeSet<String> {
    shard
        .informer
        .store()
        .list_keys()
        .into_iter()
        .map(|k| k.to_string())
        .collect()
}

/// Labels every object of the namespace for `ring`: owners by their own key, children by
/// their owner's; returns how many labels were written.
async fn label(server: &FakeApiServer, sharder: &Sharder, ring: &Ring) -> (usize, usize) {
    let client = server.client().unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "demo");
    let all = api.list(&Default::default()).await.unwrap().items;
    let (children, owners): (Vec<_>, Vec<_>) = all
        .iter()
        .partition(|cm| cm.metadata.owner_references.is_some());
    let mut moves = sharder.plan(ring, owners, &(), Placement::Own);
    moves.extend(sharder.plan(ring, children, &(), Placement::Controller));
    let drains = moves.iter().filter(|m| m.step == Step::Drain).count();
    let applied = sharder
        .apply::<ConfigMap>(&client, &(), &moves)
        .await
        .unwrap();
    assert_eq!(applied.stale, 0);
    assert_eq!(applied.labelled, moves.len());
    (drains, moves.len() - drains)
}

/// Waits until the old shards' caches show `expected` objects draining, and acknowledges
/// each; returns how many.
async fn acknowledge_all(client: &kube::Client, old: &[(&str, &Shard)], expected: usize) -> usize {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let draining = loop {
        let draining: Vec<_> = old
            .iter()
            .flat_map(|(name, shard)| {
                shard
                    .informer
                    .store()
                    .list()
                    .into_iter()
                    .filter(|cm| standing(&cm.metadata, "web", name) == Standing::Draining)
            })
            .collect();
        if draining.len() == expected {
            break draining;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the drains never reached the caches"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut acked = 0;
    for cm in draining {
        assert!(acknowledge_drain(client, &(), "web", &*cm).await.unwrap());
        acked += 1;
    }
    acked
}

/// Waits until the shards' caches hold exactly what the server labelled for each.
async fn converged(server: &FakeApiServer, shards: &[(&str, &Shard)]) {
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let label = shard_label("web");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let all = api.list(&Default::default()).await.unwrap().items;
        let done = shards.iter().all(|(name, shard)| {
            let want: BTreeSet<String> = all
                .iter()
                .filter(|cm| {
                    cm.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(&label))
                        .map(String::as_str)
                        == Some(*name)
                })
                .map(|cm| format!("demo/{}", cm.metadata.name.as_deref().unwrap()))
                .collect();
            cached(shard) == want
        });
        if done {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the shards' caches never matched the labels"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_cache_only_their_own_objects_and_a_joining_shard_takes_a_quarter() {
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["demo"]))
        .await
        .unwrap();
    let cms = Gvr::core("configmaps");
    for i in 0..OWNERS {
        let owner = server
            .create(
                &cms,
                Some("demo"),
                json!({"metadata": {"name": format!("owner-{i}")}}),
            )
            .unwrap();
        for c in 0..CHILDREN_PER_OWNER {
            server
                .create(
                    &cms,
                    Some("demo"),
                    json!({"metadata": {
                        "name": format!("owner-{i}-child-{c}"),
                        "ownerReferences": [{
                            "apiVersion": "v1", "kind": "ConfigMap", "name": format!("owner-{i}"),
                            "uid": owner["metadata"]["uid"], "controller": true,
                        }],
                    }}),
                )
                .unwrap();
        }
    }
    let total = OWNERS * (1 + CHILDREN_PER_OWNER);

    // Three replicas hold their shard Leases; the sharder sees them.
    let leases = Arc::new(MemoryLeases::default());
    let mut electors = Vec::new();
    for name in ["a", "b", "c", "d"] {
        let elector = LeaderElector::new(
            leases.clone(),
            kube_informer_runtime::sharding::shard_lease("web", name),
        )
        .unwrap();
        electors.push((name, elector, CancellationToken::new()));
    }
    let mut runs = Vec::new();
    for (_, elector, cancel) in &electors[..3] {
        let (e, c) = (elector.clone(), cancel.clone());
        runs.push(tokio::spawn(async move { e.run(c).await }));
    }
    for (_, elector, _) in &electors[..3] {
        elector.leading().wait_for(|l| *l).await.unwrap();
    }
    let members = Members::new(leases.clone(), "web");
    let three = members.observe().await.unwrap();
    assert_eq!(three.shards().collect::<Vec<_>>(), ["a", "b", "c"]);

    let sharder = Sharder::new("web");
    let (a, b, c) = (
        shard(&server, "a"),
        shard(&server, "b"),
        shard(&server, "c"),
    );
    assert_eq!(label(&server, &sharder, &three).await, (0, total));
    assert_eq!(
        label(&server, &sharder, &three).await,
        (0, 0),
        "a second round changes nothing"
    );
    converged(&server, &[("a", &a), ("b", &b), ("c", &c)]).await;

    // Disjoint, complete, fair, and every child with its owner.
    let caches = [cached(&a), cached(&b), cached(&c)];
    assert_eq!(caches.iter().map(BTreeSet::len).sum::<usize>(), total);
    let union: BTreeSet<_> = caches.iter().flatten().collect();
    assert_eq!(union.len(), total, "no object is in two caches");
    for cache in &caches {
        assert!(
            cache.len() > total / 5,
            "a shard holds {} of {total}",
            cache.len()
        );
        for key in cache.iter().filter(|k| k.contains("-child-")) {
            let owner = key.rsplit_once("-child-").unwrap().0;
            assert!(cache.contains(owner), "{key} is not with its owner");
        }
    }

    // A fourth replica joins: only objects that now belong to it move.
    let (e, cancel) = (electors[3].1.clone(), electors[3].2.clone());
    runs.push(tokio::spawn(async move { e.run(cancel).await }));
    electors[3].1.leading().wait_for(|l| *l).await.unwrap();
    let four = members.observe().await.unwrap();
    assert_eq!(four.len(), 4);
    let d = shard(&server, "d");
    // Owners on live shards are drained, not moved; their children follow at once.
    let (drained, children_moved) = label(&server, &sharder, &four).await;
    assert!(drained > 0);
    assert_eq!(children_moved, CHILDREN_PER_OWNER * drained);
    converged(&server, &[("a", &a), ("b", &b), ("c", &c), ("d", &d)]).await;
    assert!(
        cached(&d).iter().all(|k| k.contains("-child-")),
        "an owner reached the new shard before its old shard let go"
    );
    assert_eq!(
        label(&server, &sharder, &four).await,
        (0, 0),
        "nothing more until the old shards let go"
    );
    // The old shards let go: what a sharded controller does once no reconcile of the
    // object runs there.
    let old = [("a", &a), ("b", &b), ("c", &c)];
    let client = server.client().unwrap();
    let acked = acknowledge_all(&client, &old, drained).await;
    assert_eq!(acked, drained);
    assert_eq!(label(&server, &sharder, &four).await, (0, drained));
    converged(&server, &[("a", &a), ("b", &b), ("c", &c), ("d", &d)]).await;
    let moved = cached(&d).len();
    assert_eq!(
        moved,
        drained + children_moved,
        "every move went to the new shard"
    );
    for (before, shard) in caches.iter().zip([&a, &b, &c]) {
        assert!(
            cached(shard).is_subset(before),
            "an old shard gained objects"
        );
    }
    for shard in [&a, &b, &c, &d] {
        let cache = cached(shard);
        for key in cache.iter().filter(|k| k.contains("-child-")) {
            let owner = key.rsplit_once("-child-").unwrap().0;
            assert!(cache.contains(owner), "{key} is not with its owner");
        }
    }
    let share = moved as f64 / total as f64;
    assert!((0.12..0.40).contains(&share), "{moved} of {total} moved");

    for shard in [a, b, c, d] {
        shard.cancel.cancel();
        shard.task.await.unwrap();
    }
    for (_, _, cancel) in &electors {
        cancel.cancel();
    }
    for run in runs {
        run.await.unwrap();
    }
}

/// The sharder's loop on short Leases: objects created while it runs are labelled, and
/// when a replica is killed (its Lease no longer renewed) its objects go to the living
/// ones once its Lease has expired, without a drain (a dead shard reconciles nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sharders_loop_labels_new_objects_and_moves_a_dead_shards_objects() {
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["demo"]))
        .await
        .unwrap();
    let cms = Gvr::core("configmaps");
    let leases = Arc::new(MemoryLeases::default());
    let short = |name: &str| {
        kube_informer_runtime::sharding::shard_lease("web", name)
            .lease_duration(Duration::from_secs(3))
            .renew_deadline(Duration::from_secs(2))
            .retry_period(Duration::from_millis(500))
    };
    let mut replicas = Vec::new();
    for name in ["a", "b", "c"] {
        let elector = LeaderElector::new(leases.clone(), short(name)).unwrap();
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (e, c) = (elector.clone(), cancel.clone());
            async move { e.run(c).await }
        });
        elector.leading().wait_for(|l| *l).await.unwrap();
        replicas.push((name, cancel, task));
    }
    let members = Members::new(leases.clone(), "web");
    let kinds = [ShardedKind::of::<ConfigMap>(
        server.client().unwrap(),
        Some("demo"),
        Placement::Own,
    )];
    let stop = CancellationToken::new();
    let sharder = tokio::spawn({
        let stop = stop.clone();
        async move {
            Sharder::new("web")
                .run(&members, &kinds, Duration::from_millis(100), stop)
                .await;
        }
    });
    for i in 0..60 {
        server
            .create(
                &cms,
                Some("demo"),
                json!({"metadata": {"name": format!("cm-{i}")}}),
            )
            .unwrap();
    }
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let label = shard_label("web");
    let shards_of = || async {
        let mut by_shard = std::collections::BTreeMap::<String, usize>::new();
        for cm in api.list(&Default::default()).await.unwrap().items {
            let shard = cm
                .metadata
                .labels
                .and_then(|mut l| l.remove(&label))
                .unwrap_or_default();
            *by_shard.entry(shard).or_default() += 1;
        }
        by_shard
    };
    let wait_for = |want: &'static [&'static str]| async move {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let by_shard = shards_of().await;
            if by_shard.keys().map(String::as_str).eq(want.iter().copied()) {
                return by_shard;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "shards {by_shard:?}, want {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let three = wait_for(&["a", "b", "c"]).await;
    assert_eq!(three.values().sum::<usize>(), 60);

    // Kill c: its task aborted, its Lease left as it was.
    let (_, _, task) = replicas.pop().unwrap();
    task.abort();
    let _ = task.await;
    let two = wait_for(&["a", "b"]).await;
    assert_eq!(two.values().sum::<usize>(), 60);
    assert!(
        two["a"] >= three["a"] && two["b"] >= three["b"],
        "a living shard lost objects"
    );

    stop.cancel();
    sharder.await.unwrap();
    for (_, cancel, task) in replicas {
        cancel.cancel();
        task.await.unwrap();
    }
}
