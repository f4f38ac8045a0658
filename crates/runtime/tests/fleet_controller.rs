//! A fleet controller on fake-apiservers: one reconcile, written as for one cluster, runs
//! for every member with that member's context; a member added while running is reconciled;
//! a member removed has its hung reconcile cancelled; and a member whose reconciles hang
//! holds at most its share of the workers, so the other members' changes go on.

use crate::common;

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use common::{fleet_member as member, run_fleet, until};
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube_informer::factory::FactoryOptions;
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, ControllerOptions},
    fleet::{Fleet, FleetController, sources},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio::task::JoinSet;

/// A single cluster's context: its name and client (here, the record of what it did).
struct Ctx {
    cluster: String,
    seen: Arc<Mutex<Vec<String>>>,
    cancelled: Arc<AtomicBool>,
}

/// Sets its flag when dropped before it finished: the reconcile was cancelled.
struct Cancelled(Arc<AtomicBool>, bool);

impl Drop for Cancelled {
    fn drop(&mut self) {
        if !self.1 {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

/// A reconcile as for one cluster: objects named `hang*` never finish.
async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let Cached::Present(cm) = cm else {
        return Ok(Action::Done);
    };
    ctx.seen
        .lock()
        .push(format!("{}/{}", ctx.cluster, cm.name_any()));
    if cm.name_any().starts_with("hang") {
        let mut guard = Cancelled(ctx.cancelled.clone(), false);
        std::future::pending::<()>().await;
        guard.1 = true;
    }
    Ok(Action::Done)
}

struct Running {
    fleet: Fleet,
    clusters: sources::ClusterSender,
    seen: Arc<Mutex<Vec<String>>>,
    cancelled: Arc<AtomicBool>,
    cancel: CancellationToken,
    tasks: JoinSet<()>,
}

fn start(options: ControllerOptions) -> Running {
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    let (seen, cancelled) = (Arc::default(), Arc::new(AtomicBool::new(false)));
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    run_fleet(&mut tasks, &fleet, source, &cancel);
    let controller = FleetController::<ConfigMap>::new(&fleet, options);
    let make_ctx = {
        let (seen, cancelled) = (Arc::clone(&seen), Arc::clone(&cancelled));
        move |cluster: &kube_informer_runtime::fleet::Cluster| {
            Arc::new(Ctx {
                cluster: cluster.name().to_owned(),
                seen: Arc::clone(&seen),
                cancelled: Arc::clone(&cancelled),
            })
        }
    };
    tasks.spawn(controller.run(make_ctx, reconcile, |_, _, _| Action::Retry, cancel.clone()));
    Running {
        fleet,
        clusters,
        seen,
        cancelled,
        cancel,
        tasks,
    }
}

impl Running {
    fn saw(&self, entry: &str) -> bool {
        self.seen.lock().iter().any(|s| s == entry)
    }

    async fn stop(mut self) {
        self.cancel.cancel();
        while let Some(done) = self.tasks.join_next().await {
            done.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_reconcile_runs_for_every_member_and_follows_them_in_and_out() {
    let (east, west) = (member(&["e1", "hang-e"]).await, member(&["w1"]).await);
    // Four workers: by default a member holds at most half (two), so east's hung
    // reconcile leaves it one for e1.
    let running = start(ControllerOptions::default().name("fleet-cms").workers(4));
    running.clusters.engage("east", east.client().unwrap());
    running.clusters.engage("west", west.client().unwrap());
    until("both members reconciled", || {
        running.saw("east/e1") && running.saw("west/w1") && running.saw("east/hang-e")
    })
    .await;

    // A member added while running.
    let north = member(&["n1"]).await;
    running.clusters.engage("north", north.client().unwrap());
    until("north reconciled", || running.saw("north/n1")).await;
    // A change in one member reconciles there only.
    west.create(
        &Gvr::core("configmaps"),
        Some("shop"),
        json!({"metadata": {"name": "w2"}}),
    )
    .unwrap();
    until("west's change", || running.saw("west/w2")).await;
    assert!(!running.saw("east/w2") && !running.saw("north/w2"));

    // East removed while its reconcile of hang-e hangs: cancelled, and east let go.
    assert!(!running.cancelled.load(Ordering::SeqCst));
    running.clusters.remove("east");
    until("east's hung reconcile cancelled", || {
        running.cancelled.load(Ordering::SeqCst)
    })
    .await;
    until("east disengaged", || {
        running.fleet.cluster("east").is_none()
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_reconciles_hang_cannot_take_every_worker() {
    let stuck = member(&["hang-1", "hang-2", "hang-3"]).await;
    let healthy = member(&["a", "b", "c", "d", "e"]).await;
    let options = ControllerOptions::default()
        .name("fleet-isolation")
        .workers(2)
        .max_in_flight_per_group(Some(1));
    let running = start(options);
    running.clusters.engage("stuck", stuck.client().unwrap());
    until("a stuck reconcile", || {
        running.saw("stuck/hang-1") || running.saw("stuck/hang-2") || running.saw("stuck/hang-3")
    })
    .await;
    running
        .clusters
        .engage("healthy", healthy.client().unwrap());
    until("every healthy object reconciled", || {
        ["a", "b", "c", "d", "e"]
            .iter()
            .all(|n| running.saw(&format!("healthy/{n}")))
    })
    .await;
    let hung = running
        .seen
        .lock()
        .iter()
        .filter(|s| s.starts_with("stuck/"))
        .count();
    assert_eq!(hung, 1, "one worker at most for the stuck member");
    running.stop().await;
}

/// The context of the copying reconcile: a member's client and the hub's templates.
struct Copier {
    client: kube::Client,
    templates: kube_informer::ReadOnlyStore<ConfigMap>,
}

/// Makes the member's `shop/<name>` hold the data of the hub's `templates/<name>`.
async fn copy(cm: Cached<ConfigMap>, ctx: Arc<Copier>) -> Result<Action, kube::Error> {
    let name = match &cm {
        Cached::Present(cm) => cm.name_any(),
        Cached::Gone(key) => key.name().to_owned(),
    };
    let Some(template) = ctx.templates.get_by_key(&format!("templates/{name}")) else {
        return Ok(Action::Done);
    };
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(ctx.client.clone(), "shop");
    let pp = kube::api::PostParams::default();
    match api.get_opt(&name).await? {
        None => {
            let mut copy = ConfigMap::default();
            copy.metadata.name = Some(name);
            copy.data = template.data.clone();
            api.create(&pp, &copy).await?;
        }
        Some(mut copy) if copy.data != template.data => {
            copy.data = template.data.clone();
            api.replace(&name, &pp, &copy).await?;
        }
        Some(_) => {}
    }
    Ok(Action::Done)
}

fn color(server: &FakeApiServer, name: &str) -> Option<String> {
    let cm = server
        .get(&Gvr::core("configmaps"), Some("shop"), name)
        .ok()?;
    cm["data"]["color"].as_str().map(str::to_owned)
}

/// A hub object maps to an object in every member: each converges to it, after a change
/// too, and a member that joins later gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_object_converges_in_every_member_also_one_that_joins_later() {
    let hub = FakeApiServer::start(ServerConfig::default().namespaces(["templates"]))
        .await
        .unwrap();
    let configmaps = Gvr::core("configmaps");
    hub.create(
        &configmaps,
        Some("templates"),
        json!({"metadata": {"name": "settings"}, "data": {"color": "blue"}}),
    )
    .unwrap();
    let hub_factory = kube_informer::factory::SharedInformerFactory::new(
        hub.client().unwrap(),
        FactoryOptions::default(),
    );
    let templates = hub_factory.informer::<ConfigMap>();
    hub_factory.start();
    let (east, west, north) = (member(&[]).await, member(&[]).await, member(&[]).await);

    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    run_fleet(&mut tasks, &fleet, source, &cancel);
    let controller =
        FleetController::<ConfigMap>::new(&fleet, ControllerOptions::default().name("copies"))
            .watches_hub(&templates, |template: &ConfigMap| {
                vec![kube_informer::ObjectKey::new(
                    Some("shop"),
                    &template.name_any(),
                )]
            });
    let store = templates.store();
    let make_ctx = move |cluster: &kube_informer_runtime::fleet::Cluster| {
        Arc::new(Copier {
            client: cluster.client().clone(),
            templates: store.clone(),
        })
    };
    tasks.spawn(controller.run(make_ctx, copy, |_, _, _| Action::Retry, cancel.clone()));
    clusters.engage("east", east.client().unwrap());
    clusters.engage("west", west.client().unwrap());
    until("both members have the copy", || {
        color(&east, "settings").as_deref() == Some("blue")
            && color(&west, "settings").as_deref() == Some("blue")
    })
    .await;

    hub.patch(
        &configmaps,
        Some("templates"),
        "settings",
        json!({"data": {"color": "red"}}),
    )
    .unwrap();
    until("both members follow the change", || {
        color(&east, "settings").as_deref() == Some("red")
            && color(&west, "settings").as_deref() == Some("red")
    })
    .await;

    clusters.engage("north", north.client().unwrap());
    until("the member that joined later has it", || {
        color(&north, "settings").as_deref() == Some("red")
    })
    .await;

    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    hub_factory.shutdown().await;
}

/// Counts reconciles per `cluster/name`.
struct Counter {
    cluster: String,
    counts: Arc<Mutex<std::collections::BTreeMap<String, usize>>>,
}

async fn count(cm: Cached<ConfigMap>, ctx: Arc<Counter>) -> Result<Action, kube::Error> {
    if let Cached::Present(cm) = cm {
        let entry = format!("{}/{}", ctx.cluster, cm.name_any());
        *ctx.counts.lock().entry(entry).or_default() += 1;
    }
    Ok(Action::Done)
}

/// A plain controller's relations work within each member: a Secret's change reconciles
/// its owning ConfigMap in the Secret's cluster, not in the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_childs_change_reconciles_its_owner_in_its_own_member() {
    let (east, west) = (member(&["parent"]).await, member(&["parent"]).await);
    for server in [&east, &west] {
        let parent = server
            .get(&Gvr::core("configmaps"), Some("shop"), "parent")
            .unwrap();
        let owner = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
            "uid": parent["metadata"]["uid"], "controller": true}]);
        server
            .create(
                &Gvr::core("secrets"),
                Some("shop"),
                json!({"metadata": {"name": "child", "ownerReferences": owner}}),
            )
            .unwrap();
    }
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    let cancel = CancellationToken::new();
    let mut tasks = JoinSet::new();
    run_fleet(&mut tasks, &fleet, source, &cancel);
    let counts: Arc<Mutex<std::collections::BTreeMap<String, usize>>> = Arc::default();
    let controller =
        FleetController::<ConfigMap>::new(&fleet, ControllerOptions::default().name("owners"))
            .owns::<k8s_openapi::api::core::v1::Secret>();
    let make_ctx = {
        let counts = counts.clone();
        move |cluster: &kube_informer_runtime::fleet::Cluster| {
            Arc::new(Counter {
                cluster: cluster.name().to_owned(),
                counts: counts.clone(),
            })
        }
    };
    tasks.spawn(controller.run(make_ctx, count, |_, _, _| Action::Retry, cancel.clone()));
    clusters.engage("east", east.client().unwrap());
    clusters.engage("west", west.client().unwrap());
    let seen = |entry: &str| counts.lock().get(entry).copied().unwrap_or(0);
    until("both parents reconciled", || {
        seen("east/parent") >= 1 && seen("west/parent") >= 1
    })
    .await;
    let (east_before, west_before) = (seen("east/parent"), seen("west/parent"));
    east.patch(
        &Gvr::core("secrets"),
        Some("shop"),
        "child",
        json!({"data": {"k": "dg=="}}),
    )
    .unwrap();
    until("east's parent reconciled for its child", || {
        seen("east/parent") > east_before
    })
    .await;
    // West's child did not change: a reconcile of west's parent now would be a leak across
    // members. A change in west afterwards proves west was still being watched.
    assert_eq!(seen("west/parent"), west_before, "west's parent untouched");
    west.patch(
        &Gvr::core("secrets"),
        Some("shop"),
        "child",
        json!({"data": {"k": "dw=="}}),
    )
    .unwrap();
    until("west's parent reconciled for its child", || {
        seen("west/parent") > west_before
    })
    .await;
    cancel.cancel();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

/// A member removed leaves nothing of the fleet controller behind: its controller's
/// handlers, its informers and its reconcile (hung, cancelled) all end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_member_leaves_no_task_of_the_controller() {
    let (east, west) = (member(&["e1"]).await, member(&["hang-w"]).await);
    let options = ControllerOptions::default()
        .name("fleet-tasks")
        .workers(4)
        .max_in_flight_per_group(Some(2))
        .reconcile_timeout(Some(std::time::Duration::from_secs(5)))
        .backoff(
            std::time::Duration::from_millis(100),
            std::time::Duration::from_secs(2),
        );
    let running = start(options);
    running.clusters.engage("east", east.client().unwrap());
    until("east reconciled", || running.saw("east/e1")).await;
    let metrics = tokio::runtime::Handle::current().metrics();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let before = metrics.num_alive_tasks();
    running.clusters.engage("west", west.client().unwrap());
    until("west's reconcile hangs", || running.saw("west/hang-w")).await;
    running.clusters.remove("west");
    until("west's reconcile cancelled", || {
        running.cancelled.load(Ordering::SeqCst)
    })
    .await;
    until("west's tasks ended", || metrics.num_alive_tasks() <= before).await;
    running.stop().await;
}
