//! A fleet sharded over two replicas, on three fake-apiservers and on three real
//! kube-apiservers (a hub holding the ring's Leases, two members): the ring's sharder
//! labels every member object for the replica the ring of both puts it on (by
//! `cluster:object`), each change is reconciled by that replica only, and when one replica
//! is killed its share moves to the other, which then reconciles every change. With member
//! `a` partitioned before the sharder is elected, `b` is placed and reconciled all the
//! same (and its share moves when a replica is killed); `a` catches up once healed.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use e2e::{Backend, ensure_namespace, eventually};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use kube_informer::{
    Selectors,
    factory::{FactoryOptions, InformerSpec},
};
use kube_informer_runtime::{
    CancellationToken, Manager, ManagerOptions,
    controller::{Action, Cached, ControllerOptions},
    fleet::{Cluster, Fleet, FleetController, sources},
    leader_election::LeaderElectionConfig,
    sharding::{Ring, ShardKey, shard_label},
};
use parking_lot::Mutex;
use serde_json::json;

const OBJECTS: usize = 12;
const NS: &str = "apps";
const LEASES: &str = "fleet-system";

/// Which replica reconciled which `cluster/name`, in order.
type Ledger = Arc<Mutex<Vec<(String, String)>>>;

struct Ctx {
    replica: &'static str,
    cluster: String,
    ledger: Ledger,
}

async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    if let Cached::Present(cm) = cm {
        let entry = format!("{}/{}", ctx.cluster, cm.name_any());
        ctx.ledger.lock().push((ctx.replica.to_owned(), entry));
    }
    Ok(Action::Done)
}

/// A sharded manager over the hub, with a fleet of `a` and `b` and a fleet controller.
async fn replica(
    hub: &Backend,
    members: &[(&'static str, &Backend)],
    name: &'static str,
    ledger: &Ledger,
) -> tokio::task::JoinHandle<()> {
    let lease = LeaderElectionConfig::new("unused")
        .namespace(LEASES)
        .lease_duration(Duration::from_secs(6))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500));
    let options = ManagerOptions::for_tests()
        .leader_election(lease)
        .sharded("fleet", name)
        .sharding_period(Duration::from_millis(500));
    let mut manager = Manager::new(hub.client(), options).await.unwrap();
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    for (cluster, backend) in members {
        clusters.engage(cluster, backend.new_informer_client());
    }
    manager.add("keep-sender", false, move |cancel| async move {
        cancel.cancelled().await;
        drop(clusters);
        Ok(())
    });
    manager.add_fleet(&fleet, source);
    let in_ns = || InformerSpec::new().selectors(Selectors::default().in_namespace(NS));
    let options = ControllerOptions::default().name("fleet-cms");
    let controller = FleetController::<ConfigMap>::new_with(&fleet, in_ns, options);
    let ledger = ledger.clone();
    let make_ctx = move |cluster: &Cluster| {
        Arc::new(Ctx {
            replica: name,
            cluster: cluster.name().to_owned(),
            ledger: ledger.clone(),
        })
    };
    manager.add_fleet_controller(controller, make_ctx, reconcile, |_, _, _| Action::Retry);
    // Killed by aborting this task: the manager's future is dropped, nothing is released.
    tokio::spawn(async move {
        let _ = manager
            .run_until(CancellationToken::new(), CancellationToken::new())
            .await;
    })
}

/// Each member object's shard label, by `cluster/name`.
async fn labels(members: &[(&'static str, &Backend)]) -> BTreeMap<String, Option<String>> {
    let key = shard_label("fleet");
    let mut labels = BTreeMap::new();
    for (cluster, backend) in members {
        let api: Api<ConfigMap> = Api::namespaced(backend.client(), NS);
        for cm in api.list(&ListParams::default()).await.unwrap() {
            let label = cm.labels().get(&key).cloned();
            labels.insert(format!("{cluster}/{}", cm.name_any()), label);
        }
    }
    labels
}

/// Where the ring of `shards` puts each object.
fn placed(
    objects: impl Iterator<Item = String>,
    shards: &[&str],
) -> BTreeMap<String, Option<String>> {
    let ring = Ring::new(shards);
    objects
        .map(|object| {
            let (cluster, name) = object.split_once('/').unwrap();
            let mut cm = ConfigMap::default();
            cm.metadata.namespace = Some(NS.into());
            cm.metadata.name = Some(name.into());
            let key = ShardKey::of(&cm, &()).unwrap().in_member(cluster, false);
            (object, ring.shard_for(key.as_str()).map(str::to_owned))
        })
        .collect()
}

async fn until_labels(
    what: &str,
    members: &[(&'static str, &Backend)],
    want: &BTreeMap<String, Option<String>>,
) {
    for _ in 0..600 {
        if &labels(members).await == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never: {what}: {:?}", labels(members).await);
}

/// Changes every member object once; waits until each change is reconciled, then checks
/// each was reconciled by the replica its label names, and only by it.
async fn change_all(members: &[(&'static str, &Backend)], ledger: &Ledger, round: &str) {
    ledger.lock().clear();
    for (_, backend) in members {
        let api: Api<ConfigMap> = Api::namespaced(backend.client(), NS);
        for i in 0..OBJECTS {
            let patch = Patch::Merge(json!({"data": {"round": round}}));
            api.patch(&format!("cm-{i:02}"), &PatchParams::default(), &patch)
                .await
                .unwrap();
        }
    }
    let objects = members.len() * OBJECTS;
    eventually("every change reconciled", || {
        let seen: BTreeSet<String> = ledger.lock().iter().map(|(_, o)| o.clone()).collect();
        seen.len() == objects
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let labels = labels(members).await;
    for (replica, object) in ledger.lock().iter() {
        assert_eq!(
            labels.get(object).cloned().flatten().as_deref(),
            Some(replica.as_str()),
            "{object} reconciled by {replica} in round {round}"
        );
    }
}

/// The hub's Lease namespace, and `OBJECTS` ConfigMaps in each member.
async fn prepare(hub: &Backend, members: [&Backend; 2]) {
    ensure_namespace(&hub.client(), LEASES).await;
    for member in members {
        ensure_namespace(&member.client(), NS).await;
        let api: Api<ConfigMap> = Api::namespaced(member.client(), NS);
        for i in 0..OBJECTS {
            let cm = serde_json::from_value(json!({"metadata": {"name": format!("cm-{i:02}")}}))
                .unwrap();
            api.create(&PostParams::default(), &cm).await.unwrap();
        }
    }
}

async fn two_replicas_split_a_fleet(hub: Backend, a: Backend, b: Backend) {
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_test_writer()
        .try_init();
    prepare(&hub, [&a, &b]).await;
    let members = [("a", &a), ("b", &b)];
    let ledger: Ledger = Arc::default();
    let first = replica(&hub, &members, "replica-0", &ledger).await;
    let second = replica(&hub, &members, "replica-1", &ledger).await;

    let objects = || (0..OBJECTS).flat_map(|i| ["a", "b"].map(|c| format!("{c}/cm-{i:02}")));
    let both = placed(objects(), &["replica-0", "replica-1"]);
    for cluster in ["a", "b"] {
        let shards: BTreeSet<_> = both
            .iter()
            .filter(|(o, _)| o.starts_with(cluster))
            .map(|(_, s)| s.clone())
            .collect();
        assert_eq!(
            shards.len(),
            2,
            "the ring splits member {cluster}: {both:?}"
        );
    }
    until_labels("each object on its replica", &members, &both).await;
    change_all(&members, &ledger, "1").await;

    // replica-1 killed: once its Lease expires, its objects are replica-0's.
    second.abort();
    let _ = second.await;
    let alone = placed(objects(), &["replica-0"]);
    until_labels("every object on the surviving replica", &members, &alone).await;
    change_all(&members, &ledger, "2").await;
    first.abort();
    let _ = first.await;
}

e2e::three!(two_replicas_split_a_fleet);

async fn a_partitioned_member_holds_back_only_itself(hub: Backend, a: Backend, b: Backend) {
    prepare(&hub, [&a, &b]).await;
    a.partition(); // before either replica, and so the sharder, starts
    let members = [("a", &a), ("b", &b)];
    let ledger: Ledger = Arc::default();
    let first = replica(&hub, &members, "replica-0", &ledger).await;
    let second = replica(&hub, &members, "replica-1", &ledger).await;
    let objects = |c: &'static str| (0..OBJECTS).map(move |i| format!("{c}/cm-{i:02}"));
    until_labels(
        "b's objects on their replicas while a is cut off",
        &[("b", &b)],
        &placed(objects("b"), &["replica-0", "replica-1"]),
    )
    .await;
    change_all(&[("b", &b)], &ledger, "1").await;

    second.abort();
    let _ = second.await;
    until_labels(
        "b's objects on the survivor",
        &[("b", &b)],
        &placed(objects("b"), &["replica-0"]),
    )
    .await;
    a.heal();
    until_labels(
        "a caught up after healing",
        &[("a", &a)],
        &placed(objects("a"), &["replica-0"]),
    )
    .await;
    change_all(&members, &ledger, "2").await;
    first.abort();
    let _ = first.await;
}

e2e::three!(a_partitioned_member_holds_back_only_itself);
