//! `informer-bench fairness`: one controller of ConfigMaps on fake-apiserver, shared by
//! tenants (namespaces). One tenant's `burst` objects are created at once, at server speed,
//! while each of `quiet` other tenants changes one object every `period`; a reconcile takes
//! `work` (an await, as a reconcile waiting on the API server). For each worker count, with
//! fairness off and on: the throughput (every reconcile, the burst's and the quiet
//! tenants', per second from the burst to the last reconcile: the same work either way) and
//! the quiet tenants' latency (their change's create to the start of its reconcile: median,
//! p99 and worst).

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, ResourceExt, api::PostParams};
use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, Controller, ControllerOptions, Fairness},
};
use parking_lot::Mutex;
use serde_json::json;

/// What the run was asked for.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub(crate) burst: usize,
    pub(crate) quiet: usize,
    pub(crate) period: Duration,
    pub(crate) work: Duration,
    pub(crate) workers: Vec<usize>,
}

const BULK: &str = "tenant-bulk";

/// One run's outcome.
struct Outcome {
    per_sec: f64,
    /// Create-to-reconcile of the quiet tenants' changes, sorted.
    latencies: Vec<Duration>,
}

pub(crate) fn run(plan: &Plan) -> Result<(), String> {
    crate::fleet::on_two_threads(async {
        println!(
            "fairness: a burst of {} ConfigMaps in one namespace, {} quiet namespaces changing \
             one object every {:?}, {:?} per reconcile",
            plan.burst, plan.quiet, plan.period, plan.work
        );
        println!("| workers | fairness | reconciles/s | quiet p50 | quiet p99 | quiet max |");
        println!("|---:|---|---:|---:|---:|---:|");
        for &workers in &plan.workers {
            for fair in [false, true] {
                let outcome = once(plan, workers, fair).await?;
                let at = |q: f64| {
                    let i = ((outcome.latencies.len() as f64 - 1.0) * q).round() as usize;
                    outcome.latencies.get(i).copied().unwrap_or_default()
                };
                println!(
                    "| {workers} | {} | {:.0} | {:.1?} | {:.1?} | {:.1?} |",
                    if fair { "by namespace" } else { "off" },
                    outcome.per_sec,
                    at(0.5),
                    at(0.99),
                    outcome.latencies.last().copied().unwrap_or_default(),
                );
            }
        }
        Ok(())
    })
}

async fn once(plan: &Plan, workers: usize, fair: bool) -> Result<Outcome, String> {
    let quiet: Vec<String> = (0..plan.quiet).map(|i| format!("tenant-{i:03}")).collect();
    let config = ServerConfig::default().namespaces(quiet.iter().cloned().chain([BULK.into()]));
    let server = FakeApiServer::start(config)
        .await
        .map_err(|e| e.to_string())?;
    let client = server.client().map_err(|e| e.to_string())?;
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let fairness = if fair {
        Fairness::ByNamespace
    } else {
        Fairness::Off
    };
    let options = ControllerOptions::default()
        .name("fairness")
        .workers(workers)
        .fairness(fairness);
    let controller = Controller::<ConfigMap>::new(&factory, options);
    // When each quiet change was created, and when its reconcile started.
    let created: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    // Reconciles of the burst, and of everything with the time of the last one.
    let burst_done: Arc<Mutex<(usize, usize, Option<Instant>)>> = Arc::default();
    let work = plan.work;
    let reconcile = {
        let (created, latencies, burst_done) =
            (created.clone(), latencies.clone(), burst_done.clone());
        move |cm: Cached<ConfigMap>, _: Arc<()>| {
            let (created, latencies, burst_done) =
                (created.clone(), latencies.clone(), burst_done.clone());
            async move {
                let bulk = cm
                    .present()
                    .is_some_and(|cm| cm.namespace().as_deref() == Some(BULK));
                if let Cached::Present(cm) = &cm
                    && !bulk
                    && let Some(at) = created.lock().remove(&cm.name_any())
                {
                    latencies.lock().push(at.elapsed());
                }
                if !work.is_zero() {
                    tokio::time::sleep(work).await;
                }
                let mut done = burst_done.lock();
                done.0 += usize::from(bulk);
                done.1 += 1;
                done.2 = Some(Instant::now());
                Ok::<_, kube::Error>(Action::Done)
            }
        }
    };
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        reconcile,
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(60))
        .await
        .map_err(|e| e.to_string())?;

    let started = Instant::now();
    let burst = (0..plan.burst).map(|i| {
        json!({"metadata": {"name": format!("cm-{i:06}"), "namespace": BULK}, "data": {"i": i.to_string()}})
    });
    // Seeding is synchronous: off the runtime's worker, or the tasks queued on that worker
    // (the controller's) stall until it returns.
    tokio::task::block_in_place(|| server.seed(&Gvr::core("configmaps"), burst))
        .map_err(|e| e.to_string())?;
    // The quiet tenants change one object each, in turn, until the burst is reconciled.
    let mut change = 0usize;
    while burst_done.lock().0 < plan.burst {
        let ns = &quiet[change % quiet.len()];
        let name = format!("change-{change:06}");
        created.lock().insert(name.clone(), Instant::now());
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
        let cm = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        api.create(&PostParams::default(), &cm)
            .await
            .map_err(|e| e.to_string())?;
        change += 1;
        tokio::time::sleep(plan.period).await;
        if started.elapsed() > Duration::from_secs(600) {
            return Err("the burst was not reconciled within 10 minutes".into());
        }
    }
    // Every quiet change made is reconciled, the last ones too.
    while !created.lock().is_empty() || burst_done.lock().1 < plan.burst + change {
        if started.elapsed() > Duration::from_secs(600) {
            return Err("the quiet changes were not reconciled within 10 minutes".into());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, reconciles, last) = *burst_done.lock();
    let last = last.unwrap_or_else(Instant::now);
    cancel.cancel();
    running
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    factory.shutdown().await;
    let mut latencies = std::mem::take(&mut *latencies.lock());
    latencies.sort_unstable();
    Ok(Outcome {
        per_sec: reconciles as f64 / (last - started).as_secs_f64(),
        latencies,
    })
}
