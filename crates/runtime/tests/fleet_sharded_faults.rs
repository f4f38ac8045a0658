//! A sharded fleet with a member down, as production has one: two sharded replicas, three
//! members — `up`, healthy; `cut`, partitioned (a TCP proxy holding every byte) before the
//! sharder is elected; `mute`, whose server takes every PATCH and never answers. The
//! sharder places each member on its own, so `up`'s objects are labelled where the ring
//! puts them and reconciled by their replica, its new object too; a killed replica's share
//! of `up` moves to the survivor; once `cut` heals, its objects are labelled and reconciled
//! too. `mute`'s unanswered writes hold back `mute` alone.

use crate::common;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use common::{fleet_member as member, until};
use fake_apiserver::{FakeApiServer, Fault, Gate, Gvr, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube_envtest::TcpProxy;
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

const OBJECTS: usize = 6;

/// Which replica reconciled which `cluster/name`.
type Ledger = Arc<Mutex<Vec<(&'static str, String)>>>;

async fn reconcile(
    cm: Cached<ConfigMap>,
    ctx: Arc<(&'static str, String, Ledger)>,
) -> Result<Action, kube::Error> {
    if let Cached::Present(cm) = cm {
        let entry = format!("{}/{}", ctx.1, cm.name_any());
        ctx.2.lock().push((ctx.0, entry));
    }
    Ok(Action::Done)
}

/// A sharded replica with its fleet of `members` (name, client), running until aborted.
async fn replica(
    hub: &FakeApiServer,
    name: &'static str,
    members: &[(&str, kube::Client)],
    ledger: &Ledger,
) -> tokio::task::JoinHandle<()> {
    let lease = LeaderElectionConfig::new("unused")
        .namespace("fleet-system")
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(2))
        .retry_period(Duration::from_millis(300));
    let options = ManagerOptions::for_tests()
        .leader_election(lease)
        .sharded("fleet", name)
        .sharding_period(Duration::from_millis(200));
    let mut manager = Manager::new(hub.client().unwrap(), options).await.unwrap();
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    manager.add_fleet(&fleet, source);
    let in_shop = || InformerSpec::new().selectors(Selectors::default().in_namespace("shop"));
    let options = ControllerOptions::default().name("fleet-cms").workers(4);
    let controller = FleetController::<ConfigMap>::new_with(&fleet, in_shop, options);
    let ledger = ledger.clone();
    let make_ctx =
        move |cluster: &Cluster| Arc::new((name, cluster.name().to_owned(), ledger.clone()));
    manager.add_fleet_controller(controller, make_ctx, reconcile, |_, _, _| Action::Retry);
    for (member, client) in members {
        clusters.engage(member, client.clone());
    }
    tokio::spawn(async move {
        let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
        let _clusters = clusters; // the source lives as long as the manager
        manager.run_until(graceful, force).await.unwrap();
    })
}

/// Each of `member`'s objects, by name, with its shard label (`None`: not labelled).
fn labels(member: &FakeApiServer) -> BTreeMap<String, Option<String>> {
    let key = shard_label("fleet");
    let listed = member.list(&Gvr::core("configmaps")).unwrap();
    listed
        .iter()
        .filter(|cm| cm["metadata"]["namespace"] == "shop")
        .map(|cm| {
            let name = cm["metadata"]["name"].as_str().unwrap().to_owned();
            let label = cm["metadata"]["labels"][&key].as_str().map(str::to_owned);
            (name, label)
        })
        .collect()
}

/// Where `ring` puts `cluster`'s object `name`.
fn placed(ring: &Ring, cluster: &str, name: &str) -> String {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some("shop".into());
    cm.metadata.name = Some(name.into());
    let key = ShardKey::of(&cm, &()).unwrap().in_member(cluster, false);
    ring.shard_for(key.as_str()).unwrap().to_owned()
}

/// Whether every object of `member` is labelled as `ring` says and was reconciled there.
fn settled(member: &FakeApiServer, cluster: &str, ring: &Ring, ledger: &Ledger) -> bool {
    let ledger = ledger.lock();
    labels(member).iter().all(|(name, label)| {
        let shard = placed(ring, cluster, name);
        let entry = format!("{cluster}/{name}");
        label.as_deref() == Some(shard.as_str())
            && ledger
                .iter()
                .any(|(by, seen)| *by == shard && *seen == entry)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_member_and_a_mute_one_hold_back_only_themselves() {
    let hub = FakeApiServer::start(ServerConfig::default().namespaces(["fleet-system"]))
        .await
        .unwrap();
    let names: Vec<String> = (0..OBJECTS).map(|i| format!("cm-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (up, cut, mute) = (
        member(&names).await,
        member(&names).await,
        member(&names).await,
    );
    let proxy = TcpProxy::start(cut.addr().port()).await.unwrap();
    let through_proxy = format!("http://127.0.0.1:{}", proxy.port());
    let cut_client =
        kube::Client::try_from(kube::Config::new(through_proxy.parse().unwrap())).unwrap();
    // Partitioned before anything starts; mute takes every PATCH and never answers.
    proxy.partition();
    let never = Gate::new();
    mute.inject(Fault::Hold {
        verb: Verb::Patch,
        gate: never.clone(),
        times: usize::MAX,
    });
    let members = [
        ("up", up.client().unwrap()),
        ("cut", cut_client),
        ("mute", mute.client().unwrap()),
    ];
    let ledger: Ledger = Arc::default();
    let mut replicas = BTreeMap::new();
    for name in ["replica-0", "replica-1"] {
        replicas.insert(name, replica(&hub, name, &members, &ledger).await);
    }

    let both = Ring::new(["replica-0", "replica-1"]);
    until(
        "up's objects placed and reconciled by both replicas",
        || settled(&up, "up", &both, &ledger),
    )
    .await;
    up.create(
        &Gvr::core("configmaps"),
        Some("shop"),
        json!({"metadata": {"name": "late"}}),
    )
    .unwrap();
    until("up's new object placed and reconciled", || {
        settled(&up, "up", &both, &ledger)
    })
    .await;
    assert!(
        labels(&mute).values().all(Option::is_none),
        "mute answered a PATCH"
    );

    // replica-1 killed: once its Lease expires, up is replica-0's whole.
    let killed = replicas.remove("replica-1").unwrap();
    killed.abort();
    assert!(killed.await.unwrap_err().is_cancelled());
    let survivor = Ring::new(["replica-0"]);
    until("replica-1's share of up moved", || {
        settled(&up, "up", &survivor, &ledger)
    })
    .await;

    // cut heals: its objects are placed on the survivor and reconciled.
    proxy.heal();
    until("cut caught up after healing", || {
        settled(&cut, "cut", &survivor, &ledger)
    })
    .await;

    never.open();
    for (_, replica) in replicas {
        replica.abort();
        let _ = replica.await;
    }
}
