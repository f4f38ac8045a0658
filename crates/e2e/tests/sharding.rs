//! Sharding on both servers: three shard Leases make the ring, the sharder labels each
//! object with its shard (children with their owner's) through guarded merge patches,
//! each shard's informer — a label selector — caches exactly its own objects, and when a
//! fourth shard joins, an owner moves only after its old shard let go of it (drain,
//! acknowledge, assign), the objects that move leave their old shard's cache (the API
//! server sends a DELETED to a watch whose selector an object stops matching), and they
//! reach the new shard only.

use std::{collections::BTreeSet, time::Duration};

use e2e::{Backend, both, ensure_namespace, quick};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::ConfigMap};
use kube::{Api, api::PostParams};
use kube_informer::informer::{InformerOptions, SharedIndexInformer};
use kube_informer_runtime::{
    CancellationToken,
    leader_election::LeaderElector,
    sharding::{
        LiveShards, Placement, Ring, Sharder, Standing, Step, acknowledge_drain, shard_label,
        shard_lease, shard_selectors, standing,
    },
};

const NS: &str = "sharding";
const OWNERS: usize = 40;

struct Shard {
    informer: SharedIndexInformer<ConfigMap>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

fn shard(backend: &Backend, name: &str) -> Shard {
    let api: Api<ConfigMap> = Api::namespaced(backend.informer_client(), NS);
    let informer = SharedIndexInformer::new(
        api,
        InformerOptions::default().reflector(quick().selectors(shard_selectors("web", name))),
    );
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

async fn label(client: &kube::Client, sharder: &Sharder, ring: &Ring) -> (usize, usize) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let all = api.list(&Default::default()).await.unwrap().items;
    let all: Vec<_> = all
        .iter()
        .filter(|cm| cm.metadata.name.as_deref() != Some("kube-root-ca.crt"))
        .collect();
    let (children, owners): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|cm| cm.metadata.owner_references.is_some());
    let mut moves = sharder.plan(ring, owners, &(), Placement::Own);
    moves.extend(sharder.plan(ring, children, &(), Placement::Controller));
    let drains = moves.iter().filter(|m| m.step == Step::Drain).count();
    let applied = sharder
        .apply::<ConfigMap>(client, &(), &moves)
        .await
        .unwrap();
    assert_eq!(applied.stale, 0);
    assert_eq!(applied.labelled, moves.len());
    (drains, moves.len() - drains)
}

async fn converged(name: &str, client: &kube::Client, shards: &[(&str, &Shard)]) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let label = shard_label("web");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let all = api.list(&Default::default()).await.unwrap().items;
        let done = shards.iter().all(|(shard_name, shard)| {
            let want: BTreeSet<String> = all
                .iter()
                .filter(|cm| {
                    cm.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(&label))
                        .map(String::as_str)
                        == Some(*shard_name)
                })
                .map(|cm| format!("{NS}/{}", cm.metadata.name.as_deref().unwrap()))
                .collect();
            cached(shard) == want
        });
        if done {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: the shards' caches never matched the labels"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn three_shards_split_the_objects_and_a_fourth_takes_its_share(backend: Backend) {
    let name = backend.name();
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for i in 0..OWNERS {
        let mut owner = ConfigMap::default();
        owner.metadata.name = Some(format!("owner-{i}"));
        let owner = api.create(&PostParams::default(), &owner).await.unwrap();
        for c in 0..2 {
            let mut child = ConfigMap::default();
            child.metadata.name = Some(format!("owner-{i}-child-{c}"));
            child.metadata.owner_references = Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                    api_version: "v1".into(),
                    kind: "ConfigMap".into(),
                    name: format!("owner-{i}"),
                    uid: owner.metadata.uid.clone().unwrap(),
                    controller: Some(true),
                    ..Default::default()
                },
            ]);
            api.create(&PostParams::default(), &child).await.unwrap();
        }
    }
    let total = OWNERS * 3;

    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);
    let mut shards_running = Vec::new();
    let mut start = |shard_name: &str| {
        let elector = LeaderElector::new(leases.clone(), shard_lease("web", shard_name)).unwrap();
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (e, c) = (elector.clone(), cancel.clone());
            async move { e.run(c).await }
        });
        shards_running.push((cancel, task));
        elector
    };
    for elector in [start("a"), start("b"), start("c")] {
        elector.leading().wait_for(|l| *l).await.unwrap();
    }
    let live = LiveShards::new(leases.clone(), "web");
    let three = live.observe().await.unwrap();
    assert_eq!(
        three.shards().collect::<Vec<_>>(),
        ["a", "b", "c"],
        "{name}"
    );

    let sharder = Sharder::new("web");
    let (a, b, c) = (
        shard(&backend, "a"),
        shard(&backend, "b"),
        shard(&backend, "c"),
    );
    assert_eq!(label(&client, &sharder, &three).await, (0, total), "{name}");
    assert_eq!(
        label(&client, &sharder, &three).await,
        (0, 0),
        "{name}: relabelled"
    );
    converged(name, &client, &[("a", &a), ("b", &b), ("c", &c)]).await;
    let caches = [cached(&a), cached(&b), cached(&c)];
    let union: BTreeSet<_> = caches.iter().flatten().collect();
    assert_eq!(
        union.len(),
        total,
        "{name}: an object is missing or in two caches"
    );
    assert_eq!(
        caches.iter().map(BTreeSet::len).sum::<usize>(),
        total,
        "{name}"
    );
    for cache in &caches {
        assert!(!cache.is_empty(), "{name}: an empty shard");
        for key in cache.iter().filter(|k| k.contains("-child-")) {
            let owner = key.rsplit_once("-child-").unwrap().0;
            assert!(cache.contains(owner), "{name}: {key} is not with its owner");
        }
    }

    let d_elector = start("d");
    d_elector.leading().wait_for(|l| *l).await.unwrap();
    let four = live.observe().await.unwrap();
    assert_eq!(four.len(), 4, "{name}");
    let d = shard(&backend, "d");
    // Owners on live shards are drained, not moved; their children follow at once.
    let (drained, children_moved) = label(&client, &sharder, &four).await;
    assert!(drained > 0, "{name}");
    assert_eq!(children_moved, 2 * drained, "{name}");
    converged(name, &client, &[("a", &a), ("b", &b), ("c", &c), ("d", &d)]).await;
    assert!(
        cached(&d).iter().all(|k| k.contains("-child-")),
        "{name}: an owner reached the new shard before its old shard let go"
    );
    assert_eq!(label(&client, &sharder, &four).await, (0, 0), "{name}");
    // The old shards let go, then the sharder names the new one.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let draining = loop {
        let draining: Vec<_> =
            [("a", &a), ("b", &b), ("c", &c)]
                .iter()
                .flat_map(|(shard_name, shard)| {
                    shard.informer.store().list().into_iter().filter(|cm| {
                        standing(&cm.metadata, "web", shard_name) == Standing::Draining
                    })
                })
                .collect();
        if draining.len() == drained {
            break draining;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: drains never cached"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for cm in draining {
        assert!(
            acknowledge_drain(&client, &(), "web", &*cm).await.unwrap(),
            "{name}"
        );
    }
    assert_eq!(
        label(&client, &sharder, &four).await,
        (0, drained),
        "{name}"
    );
    converged(name, &client, &[("a", &a), ("b", &b), ("c", &c), ("d", &d)]).await;
    let moved = cached(&d).len();
    assert_eq!(
        moved,
        drained + children_moved,
        "{name}: a move went elsewhere"
    );
    for (before, shard) in caches.iter().zip([&a, &b, &c]) {
        assert!(
            cached(shard).is_subset(before),
            "{name}: an old shard gained objects"
        );
    }
    for shard in [&a, &b, &c, &d] {
        let cache = cached(shard);
        for key in cache.iter().filter(|k| k.contains("-child-")) {
            let owner = key.rsplit_once("-child-").unwrap().0;
            assert!(cache.contains(owner), "{name}: {key} is not with its owner");
        }
    }

    for shard in [a, b, c, d] {
        shard.cancel.cancel();
        shard.task.await.unwrap();
    }
    for (cancel, task) in shards_running {
        cancel.cancel();
        task.await.unwrap();
    }
    // Released: nobody is a member any more.
    assert!(live.observe().await.unwrap().is_empty(), "{name}");
}

both!(three_shards_split_the_objects_and_a_fourth_takes_its_share);
