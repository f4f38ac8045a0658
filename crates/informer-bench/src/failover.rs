//! `informer-bench fleet-failover`: two leader-elected replicas (two managers on one hub,
//! in this process), each with a fleet of the same `members` fake-apiservers of `objects`
//! ConfigMaps and a fleet controller. The leader is killed (its task dropped, its Lease
//! left to expire) and the run measures, on the standby:
//!
//! - the time from the kill to its Lease acquired (the Lease's expiry: configuration);
//! - the time from acquiring to the first reconcile of every member (the warm caches);
//! - the LISTs the members served from the kill to then (zero with warm caches).
//!
//! Then, for comparison, what a replica without warm caches pays on taking over: a fresh
//! fleet controller on the same members, from its start to the first reconcile of every
//! member, and the LISTs that costs.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::factory::FactoryOptions;
use kube_informer_runtime::{
    CancellationToken, Manager, ManagerOptions,
    controller::{Action, Cached, ControllerOptions},
    fleet::{Cluster, Fleet, FleetController, sources},
    leader_election::LeaderElectionConfig,
};
use parking_lot::Mutex;

use crate::fleet::member;

/// What the run was asked for.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) members: usize,
    pub(crate) objects: usize,
    pub(crate) lease: Duration,
}

/// The first reconcile of each member by each replica.
type Firsts = Arc<Mutex<HashMap<(&'static str, String), Instant>>>;

async fn reconcile(
    _: Cached<ConfigMap>,
    ctx: Arc<(&'static str, String, Firsts)>,
) -> Result<Action, kube::Error> {
    let key = (ctx.0, ctx.1.clone());
    ctx.2.lock().entry(key).or_insert_with(Instant::now);
    Ok(Action::Done)
}

pub(crate) fn run(plan: &Plan) -> Result<(), String> {
    crate::fleet::on_two_threads(measure(plan))
}

/// Syncs of ConfigMaps (LISTs, or watches that stream the initial list) every member has
/// served so far.
fn lists(members: &[FakeApiServer]) -> usize {
    let listed = |m: &FakeApiServer| {
        let requests = m.requests();
        requests
            .iter()
            .filter(|r| r.resource.as_deref() == Some("configmaps"))
            .filter(|r| {
                r.verb == Some(Verb::List)
                    || (r.verb == Some(Verb::Watch) && r.param("sendInitialEvents") == Some("true"))
            })
            .count()
    };
    members.iter().map(listed).sum()
}

/// Polls `done` until it holds; an error naming `what` after two minutes (a bench that
/// cannot finish says so instead of hanging).
async fn until(what: &str, mut done: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("never: {what}"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Ok(())
}

/// A replica: a manager electing on `hub`, its fleet of every member, the controller.
async fn replica(
    hub: &FakeApiServer,
    members: &[FakeApiServer],
    name: &'static str,
    lease: Duration,
    firsts: &Firsts,
) -> Result<tokio::task::JoinHandle<()>, String> {
    let election = LeaderElectionConfig::new("fleet-failover")
        .namespace("fleet-system")
        .identity(name)
        .lease_duration(lease)
        .renew_deadline(lease / 2)
        .retry_period(Duration::from_millis(200));
    let options = ManagerOptions::for_tests().leader_election(election);
    let client = hub.client().map_err(|e| e.to_string())?;
    let mut manager = Manager::new(client, options)
        .await
        .map_err(|e| e.to_string())?;
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    for (i, server) in members.iter().enumerate() {
        let client = server.client().map_err(|e| e.to_string())?;
        clusters.engage(&format!("m{i:02}"), client);
    }
    manager.add_fleet(&fleet, source);
    let controller =
        FleetController::<ConfigMap>::new(&fleet, ControllerOptions::default().name("failover"));
    let firsts = firsts.clone();
    let make_ctx =
        move |cluster: &Cluster| Arc::new((name, cluster.name().to_owned(), firsts.clone()));
    manager.add_fleet_controller(controller, make_ctx, reconcile, |_, _, _| Action::Retry);
    Ok(tokio::spawn(async move {
        let _clusters = clusters;
        let _ = manager
            .run_until(CancellationToken::new(), CancellationToken::new())
            .await;
    }))
}

/// Waits until `replica` has reconciled every member once; when it did the last.
async fn every_member(firsts: &Firsts, replica: &str, members: usize) -> Result<Instant, String> {
    let of = |firsts: &Firsts| -> Vec<Instant> {
        let firsts = firsts.lock();
        let mine = firsts.iter().filter(|((by, _), _)| *by == replica);
        mine.map(|(_, at)| *at).collect()
    };
    until(&format!("{replica} reconciled every member"), || {
        of(firsts).len() == members
    })
    .await?;
    Ok(of(firsts).into_iter().max().unwrap_or_else(Instant::now))
}

/// The Lease's holder now.
fn holder(hub: &FakeApiServer) -> Option<String> {
    let leases = Gvr::new("coordination.k8s.io", "v1", "leases");
    let lease = hub
        .get(&leases, Some("fleet-system"), "fleet-failover")
        .ok()?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_owned)
}

async fn measure(plan: &Plan) -> Result<(), String> {
    let hub = FakeApiServer::start(ServerConfig::default().namespaces(["fleet-system"]))
        .await
        .map_err(|e| e.to_string())?;
    let mut members = Vec::new();
    for _ in 0..plan.members {
        members.push(member(plan.objects).await?);
    }
    let firsts: Firsts = Arc::default();
    let mut running = HashMap::new();
    for name in ["replica-0", "replica-1"] {
        let task = replica(&hub, &members, name, plan.lease, &firsts).await?;
        running.insert(name, task);
    }
    until("a leader elected", || holder(&hub).is_some()).await?;
    let leader = holder(&hub).unwrap_or_default();
    let (leader, standby) = if leader == "replica-0" {
        ("replica-0", "replica-1")
    } else {
        ("replica-1", "replica-0")
    };
    every_member(&firsts, leader, plan.members).await?;
    // Both replicas listed each member once; let the standby's caches sync.
    until("both replicas listed every member", || {
        lists(&members) >= 2 * plan.members
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = lists(&members);

    let killed = running.remove(leader).ok_or("no leader task")?;
    killed.abort();
    let _ = killed.await;
    let at = Instant::now();
    until("the standby acquired the Lease", || {
        holder(&hub).as_deref() == Some(standby)
    })
    .await?;
    let acquired = at.elapsed();
    let done = every_member(&firsts, standby, plan.members).await?;
    let relisted = lists(&members) - before;
    let warm = done.saturating_duration_since(at);

    // A replica without warm caches taking over: a fresh fleet controller.
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    for (i, server) in members.iter().enumerate() {
        let client = server.client().map_err(|e| e.to_string())?;
        clusters.engage(&format!("m{i:02}"), client);
    }
    let cancel = CancellationToken::new();
    let before = lists(&members);
    let cold_start = Instant::now();
    let running_fleet = tokio::spawn({
        let (fleet, cancel) = (fleet.clone(), cancel.clone());
        async move { fleet.run(source, cancel).await }
    });
    let controller =
        FleetController::<ConfigMap>::new(&fleet, ControllerOptions::default().name("cold"));
    let make_ctx = {
        let firsts = firsts.clone();
        move |cluster: &Cluster| Arc::new(("cold", cluster.name().to_owned(), firsts.clone()))
    };
    let cold =
        tokio::spawn(controller.run(make_ctx, reconcile, |_, _, _| Action::Retry, cancel.clone()));
    let cold_done = every_member(&firsts, "cold", plan.members).await?;
    let cold_lists = lists(&members) - before;
    cancel.cancel();
    let _ = cold.await;
    let _ = running_fleet.await;
    drop(clusters);

    println!(
        "fleet failover: {} members x {} ConfigMaps, Lease {:?}",
        plan.members, plan.objects, plan.lease
    );
    println!("| | kill → Lease acquired | → every member reconciled once | member LISTs |");
    println!("|---|---:|---:|---:|");
    println!(
        "| warm standby takes over | {acquired:.2?} | {:.2?} (kill → done {warm:.2?}) | {relisted} |",
        warm.saturating_sub(acquired)
    );
    println!(
        "| without warm caches (a fresh controller) | — | {:.2?} | {cold_lists} |",
        cold_done.saturating_duration_since(cold_start)
    );
    for (_, task) in running {
        task.abort();
        let _ = task.await;
    }
    Ok(())
}
