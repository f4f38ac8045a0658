//! A fleet sharded over two replicas (two sharded managers on one hub, each with its own
//! fleet of the same two members): the ring's sharder labels the members' objects, each
//! replica's member informers select its own, and a change of each object is reconciled by
//! the replica its label names, and by it only — object by object, or (`pin_clusters`) a
//! whole member on one replica.

use crate::common;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use common::{fleet_member as member, until};
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
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
use tokio::task::JoinSet;

const OBJECTS: usize = 20;

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

async fn replica(
    hub: &FakeApiServer,
    name: &'static str,
    pinned: bool,
    ledger: &Ledger,
    cancel: &CancellationToken,
    tasks: &mut JoinSet<()>,
) -> sources::ClusterSender {
    let lease = LeaderElectionConfig::new("unused")
        .namespace("fleet-system")
        .lease_duration(Duration::from_secs(6))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500));
    let options = ManagerOptions::for_tests()
        .leader_election(lease)
        .sharded("fleet", name)
        .sharding_period(Duration::from_millis(200));
    let mut manager = Manager::new(hub.client().unwrap(), options).await.unwrap();
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    manager.add_fleet(&fleet, source);
    let in_shop = || InformerSpec::new().selectors(Selectors::default().in_namespace("shop"));
    let options = ControllerOptions::default().name("fleet-cms");
    let controller =
        FleetController::<ConfigMap>::new_with(&fleet, in_shop, options).pin_clusters(pinned);
    let ledger = ledger.clone();
    let make_ctx = move |cluster: &Cluster| {
        Arc::new(Ctx {
            replica: name,
            cluster: cluster.name().to_owned(),
            ledger: ledger.clone(),
        })
    };
    manager.add_fleet_controller(controller, make_ctx, reconcile, |_, _, _| Action::Retry);
    let (graceful, force) = (cancel.clone(), CancellationToken::new());
    tasks.spawn(async move {
        manager.run_until(graceful, force).await.unwrap();
    });
    clusters
}

/// Each member object's shard label, by `cluster/name` (`None`: not labelled yet).
fn labels(members: &[(&str, &FakeApiServer)]) -> BTreeMap<String, Option<String>> {
    let key = shard_label("fleet");
    let mut labels = BTreeMap::new();
    for (cluster, server) in members {
        for i in 0..OBJECTS {
            let name = format!("cm-{i:02}");
            let cm = server
                .get(&Gvr::core("configmaps"), Some("shop"), &name)
                .unwrap();
            let label = cm["metadata"]["labels"][&key].as_str().map(str::to_owned);
            labels.insert(format!("{cluster}/{name}"), label);
        }
    }
    labels
}

async fn split(pinned: bool) -> BTreeMap<String, String> {
    let hub = FakeApiServer::start(ServerConfig::default().namespaces(["fleet-system"]))
        .await
        .unwrap();
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("cm-{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (east, west) = (member(&names).await, member(&names).await);
    let members = [("east", &*east), ("west", &*west)];
    let ledger: Ledger = Arc::default();
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let mut senders = Vec::new();
    for name in ["replica-0", "replica-1"] {
        senders.push(replica(&hub, name, pinned, &ledger, &cancel, &mut tasks).await);
    }
    // The sharder is elected before any member is engaged: it has nothing to place until
    // the members' kinds arrive, and must wait for them rather than end.
    let sharder_lease = || {
        let leases = Gvr::new("coordination.k8s.io", "v1", "leases");
        let lease = hub
            .get(&leases, Some("fleet-system"), "fleet-sharder")
            .ok()?;
        lease["spec"]["holderIdentity"].as_str().map(str::to_owned)
    };
    until("a sharder elected", || sharder_lease().is_some()).await;
    let sharder = sharder_lease();
    for clusters in &senders {
        for (cluster, server) in &members {
            clusters.engage(cluster, server.client().unwrap());
        }
    }
    // Where the ring of both replicas puts each object: by `cluster:key`, or by the member.
    let ring = Ring::new(["replica-0", "replica-1"]);
    let expected: BTreeMap<String, Option<String>> = labels(&members)
        .into_keys()
        .map(|object| {
            let (cluster, name) = object.split_once('/').unwrap();
            let mut cm = ConfigMap::default();
            cm.metadata.namespace = Some("shop".into());
            cm.metadata.name = Some(name.into());
            let key = ShardKey::of(&cm, &()).unwrap().in_member(cluster, pinned);
            let shard = ring.shard_for(key.as_str()).map(str::to_owned);
            (object, shard)
        })
        .collect();
    until(
        "every member object labelled where the ring of both puts it",
        || labels(&members) == expected,
    )
    .await;
    // Let the informers see the labels, then change every object once.
    until("each object reconciled by its shard", || {
        let labels = labels(&members);
        let ledger = ledger.lock();
        labels.iter().all(|(object, label)| {
            ledger
                .iter()
                .any(|(replica, seen)| seen == object && Some(replica) == label.as_ref())
        })
    })
    .await;
    ledger.lock().clear();
    for (_, server) in &members {
        for name in &names {
            let patch = json!({"data": {"changed": "yes"}});
            server
                .patch(&Gvr::core("configmaps"), Some("shop"), name, patch)
                .unwrap();
        }
    }
    until("every change reconciled", || {
        ledger.lock().len() >= 2 * OBJECTS
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let labels: BTreeMap<String, String> = labels(&members)
        .into_iter()
        .map(|(k, v)| (k, v.unwrap()))
        .collect();
    for (replica, object) in ledger.lock().iter() {
        assert_eq!(
            Some(replica),
            labels.get(object),
            "{object} reconciled by {replica}, labelled for {:?}",
            labels.get(object)
        );
    }
    // Nothing stopped: the sharder elected first is the sharder still (one that ended its
    // rounds when it had nothing to place would have let its Lease expire to the other).
    assert_eq!(sharder_lease(), sharder, "the sharder never changed");
    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    drop(senders);
    labels
}

/// How many replicas hold objects of each member, by member.
fn replicas_per_member(labels: &BTreeMap<String, String>) -> BTreeMap<&str, usize> {
    let mut held: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for (object, shard) in labels {
        let (cluster, _) = object.split_once('/').unwrap();
        held.entry(cluster).or_default().insert(shard);
    }
    held.into_iter()
        .map(|(c, shards)| (c, shards.len()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_split_every_members_objects() {
    let labels = split(false).await;
    let both = BTreeMap::from([("east", 2), ("west", 2)]);
    assert_eq!(replicas_per_member(&labels), both, "split: {labels:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_a_member_is_held_whole_by_one_replica() {
    let labels = split(true).await;
    let whole = BTreeMap::from([("east", 1), ("west", 1)]);
    assert_eq!(replicas_per_member(&labels), whole, "pinned: {labels:?}");
}
