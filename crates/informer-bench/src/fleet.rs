//! `informer-bench fleet`: one fleet controller over `members` fake-apiservers of `objects`
//! ConfigMaps each, all in this process (with a hub, whose template every member copies).
//!
//! - **Engage**: every member engaged at once; the time until every object of every member
//!   has been reconciled (each reconcile GETs its object through its member's client, as a
//!   reconcile reading the server would), and the resident memory that added per member
//!   (the in-process servers' side of the connections included: an upper bound).
//! - **Latency, healthy**: new objects in the members, one every `period`, round-robin; from
//!   each create to the start of its reconcile.
//! - **Latency, one member stalled**: the same, while member 0's API server holds every GET
//!   (its watch still delivers, so its reconciles start and hang) and a burst of changes
//!   lands in it: with `max_in_flight_per_group`, it holds at most that many workers.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use fake_apiserver::{FakeApiServer, Fault, Gate, Gvr, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt, api::PostParams};
use kube_informer::factory::FactoryOptions;
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, ControllerOptions},
    fleet::{Cluster, Fleet, FleetController, sources},
};
use parking_lot::Mutex;
use serde_json::json;

use crate::measure::rss_kib;

/// What the run was asked for.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) members: usize,
    pub(crate) objects: usize,
    pub(crate) workers: usize,
    pub(crate) per_member: usize,
    pub(crate) changes: usize,
    pub(crate) period: Duration,
}

/// The members' namespace.
pub(crate) const NS: &str = "apps";

/// When each object (`cluster/name`) was created by the run, and when its first reconcile
/// started.
#[derive(Default)]
struct Clock {
    created: Mutex<HashMap<String, Instant>>,
    latencies: Mutex<Vec<Duration>>,
    reconciled: Mutex<std::collections::HashSet<String>>,
}

struct Ctx {
    cluster: String,
    client: kube::Client,
    clock: Arc<Clock>,
}

async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    let Cached::Present(cm) = cm else {
        return Ok(Action::Done);
    };
    let entry = format!("{}/{}", ctx.cluster, cm.name_any());
    if let Some(at) = ctx.clock.created.lock().remove(&entry) {
        ctx.clock.latencies.lock().push(at.elapsed());
    }
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), NS);
    api.get(&cm.name_any()).await?;
    ctx.clock.reconciled.lock().insert(entry);
    Ok(Action::Done)
}

pub(crate) fn run(plan: &Plan) -> Result<(), String> {
    on_two_threads(measure(plan))
}

/// Runs `measure` on a runtime of two worker threads (the machine's cores).
pub(crate) fn on_two_threads(
    measure: impl std::future::Future<Output = Result<(), String>>,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    runtime.block_on(measure)
}

/// A member: a fake-apiserver with `objects` ConfigMaps (two labels, 200 bytes of data).
pub(crate) async fn member(objects: usize) -> Result<FakeApiServer, String> {
    let server = FakeApiServer::start(ServerConfig::default().namespaces([NS]))
        .await
        .map_err(|e| e.to_string())?;
    let seed = (0..objects).map(|i| {
        json!({"metadata": {"name": format!("cm-{i:05}"), "namespace": NS,
            "labels": {"app": "web", "tier": "backend"}},
            "data": {"config": "x".repeat(200)}})
    });
    server
        .seed(&Gvr::core("configmaps"), seed)
        .map_err(|e| e.to_string())?;
    Ok(server)
}

async fn measure(plan: &Plan) -> Result<(), String> {
    let mut members = Vec::new();
    for _ in 0..plan.members {
        members.push(member(plan.objects).await?);
    }
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    let cancel = CancellationToken::new();
    let running_fleet = tokio::spawn({
        let (fleet, cancel) = (fleet.clone(), cancel.clone());
        async move { fleet.run(source, cancel).await }
    });
    let options = ControllerOptions::default()
        .name("fleet-bench")
        .workers(plan.workers)
        .max_in_flight_per_group(Some(plan.per_member));
    let clock = Arc::new(Clock::default());
    let make_ctx = {
        let clock = clock.clone();
        move |cluster: &Cluster| {
            Arc::new(Ctx {
                cluster: cluster.name().to_owned(),
                client: cluster.client().clone(),
                clock: clock.clone(),
            })
        }
    };
    let controller = FleetController::<ConfigMap>::new(&fleet, options);
    let running =
        tokio::spawn(controller.run(make_ctx, reconcile, |_, _, _| Action::Retry, cancel.clone()));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib();
    let started = Instant::now();
    for (i, server) in members.iter().enumerate() {
        clusters.engage(
            &format!("member-{i:02}"),
            server.client().map_err(|e| e.to_string())?,
        );
    }
    let all = plan.members * plan.objects;
    while clock.reconciled.lock().len() < all {
        if started.elapsed() > Duration::from_secs(600) {
            return Err("the members were not reconciled within 10 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let engaged = started.elapsed();
    let after = rss_kib();
    println!(
        "fleet: {} members × {} ConfigMaps, {} workers, at most {} per member",
        plan.members, plan.objects, plan.workers, plan.per_member
    );
    println!("| engage all, every object reconciled | RSS before | RSS after | per member |");
    println!("|---:|---:|---:|---:|");
    println!(
        "| {engaged:.2?} | {} MiB | {} MiB | {:.1} MiB |",
        before / 1024,
        after / 1024,
        after.saturating_sub(before) as f64 / 1024.0 / plan.members as f64
    );

    println!("| members | quiet p50 | quiet p99 | quiet max |");
    println!("|---|---:|---:|---:|");
    let healthy = changes(plan, &members, &clock, "healthy").await?;
    report("all healthy", &healthy);
    // Member 0's server now holds every GET: its reconciles start and hang.
    let gate = Gate::new();
    members[0].inject(Fault::Hold {
        verb: Verb::Get,
        gate: gate.clone(),
        times: usize::MAX,
    });
    let api: Api<ConfigMap> = Api::namespaced(members[0].client().map_err(|e| e.to_string())?, NS);
    for i in 0..200 {
        let cm = serde_json::from_value(json!({"metadata": {"name": format!("stalled-{i}")}}))
            .map_err(|e| e.to_string())?;
        api.create(&PostParams::default(), &cm)
            .await
            .map_err(|e| e.to_string())?;
    }
    let stalled = changes(plan, &members, &clock, "stalled").await?;
    report("member-00 stalled", &stalled);
    gate.open();
    members[0].clear_faults();
    cancel.cancel();
    running.await.map_err(|e| e.to_string())?;
    running_fleet.await.map_err(|e| e.to_string())?;
    Ok(())
}

/// `plan.changes` new objects in members 1.., one every `plan.period`, round-robin; the
/// create-to-reconcile latency of each, sorted.
async fn changes(
    plan: &Plan,
    members: &[FakeApiServer],
    clock: &Clock,
    prefix: &str,
) -> Result<Vec<Duration>, String> {
    clock.latencies.lock().clear();
    let healthy = members.len().saturating_sub(1).max(1);
    for change in 0..plan.changes {
        let i = 1 + change % healthy;
        let i = i.min(members.len() - 1);
        let name = format!("{prefix}-{change:05}");
        let client = members[i].client().map_err(|e| e.to_string())?;
        let api: Api<ConfigMap> = Api::namespaced(client, NS);
        let key = format!("member-{i:02}/{name}");
        clock.created.lock().insert(key, Instant::now());
        let cm = serde_json::from_value(json!({"metadata": {"name": name}}))
            .map_err(|e| e.to_string())?;
        api.create(&PostParams::default(), &cm)
            .await
            .map_err(|e| e.to_string())?;
        tokio::time::sleep(plan.period).await;
    }
    let waited = Instant::now();
    while clock.latencies.lock().len() < plan.changes {
        if waited.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "{} of {} changes reconciled within 2 minutes",
                clock.latencies.lock().len(),
                plan.changes
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut latencies = std::mem::take(&mut *clock.latencies.lock());
    latencies.sort_unstable();
    Ok(latencies)
}

fn report(what: &str, latencies: &[Duration]) {
    let at = |q: f64| {
        let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies.get(i).copied().unwrap_or_default()
    };
    println!(
        "| {what} | {:.1?} | {:.1?} | {:.1?} |",
        at(0.5),
        at(0.99),
        latencies.last().copied().unwrap_or_default()
    );
}
