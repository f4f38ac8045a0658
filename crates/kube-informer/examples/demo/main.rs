//! The kube-informer demo: one SharedInformerFactory, one pod informer shared by two
//! controllers, live progress, then a summary.
//!
//! ```text
//! cargo run --release --example demo                        # a simulated cluster (fake-apiserver)
//! cargo run --release --example demo -- --kubeconfig PATH   # a real cluster (read-only unless --write)
//! ```
//!
//! Controller A counts pods per node through the informer's node index. Controller B keeps a
//! `pod-summary` ConfigMap per namespace up to date through the API (on a real cluster only
//! with `--write`). The simulated cluster churns pods (create, update, delete) at a steady
//! rate while the controllers run.

mod controllers;

use std::{
    process::ExitCode,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::Pod;
use kube_informer::{
    Indexers,
    controller::{Controller, ControllerOptions},
    factory::{FactoryOptions, SharedInformerFactory},
    informer::{HandlerFuncs, HandlerOptions, strip_managed_fields},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct Args {
    kubeconfig: Option<String>,
    seconds: u64,
    pods: usize,
    write: bool,
    seed: u64,
}

const USAGE: &str =
    "usage: demo [--kubeconfig PATH | --fake] [--seconds N] [--pods N] [--seed S] [--write]";

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        kubeconfig: std::env::var("KUBECONFIG").ok().filter(|k| !k.is_empty()),
        seconds: 15,
        pods: 2000,
        write: false,
        seed: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        let number = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{v:?} is not a number\n{USAGE}"))
        };
        match flag.as_str() {
            "--kubeconfig" => args.kubeconfig = Some(value()?),
            "--seconds" => args.seconds = number(value()?)?.max(1),
            "--pods" => args.pods = number(value()?)? as usize,
            "--seed" => args.seed = number(value()?)?,
            "--write" => args.write = true,
            "--fake" => args.kubeconfig = None,
            "-h" | "--help" => return Err(USAGE.to_owned()),
            other => return Err(format!("unknown argument {other}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn pod(i: u64, nodes: u64, phase: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": format!("web-{i}"), "namespace": format!("team-{}", i % 5), "labels": {"app": "web"}},
        "spec": {"nodeName": format!("node-{}", i % nodes), "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
        "status": {"phase": phase},
    })
}

/// A simulated cluster: nodes, pods, and a churn of pod creates, updates and deletes.
async fn simulated(args: &Args) -> Result<(Arc<FakeApiServer>, kube::Client), String> {
    let server = FakeApiServer::start(ServerConfig::default().seed(args.seed))
        .await
        .map_err(|e| e.to_string())?;
    let nodes = 20u64;
    server
        .seed(
            &Gvr::core("nodes"),
            (0..nodes).map(|i| json!({"metadata": {"name": format!("node-{i}")}})),
        )
        .map_err(|e| e.to_string())?;
    server
        .seed(
            &Gvr::core("pods"),
            (0..args.pods as u64).map(|i| pod(i, nodes, "Running")),
        )
        .map_err(|e| e.to_string())?;
    let client = server.client().map_err(|e| e.to_string())?;
    Ok((Arc::new(server), client))
}

fn churn(
    server: Arc<FakeApiServer>,
    start: u64,
    seed: u64,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let pods = Gvr::core("pods");
        let (mut next, mut rng, mut writes) = (start, seed | 1, 0u64);
        let mut tick = tokio::time::interval(Duration::from_millis(2));
        while !cancel.is_cancelled() {
            tick.tick().await;
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let victim = rng % next.max(1);
            let ns = format!("team-{}", victim % 5);
            let name = format!("web-{victim}");
            let done = match rng % 4 {
                0 => server
                    .create(
                        &pods,
                        Some(&format!("team-{}", next % 5)),
                        pod(next, 20, "Pending"),
                    )
                    .map(|_| next += 1),
                1 => server.delete(&pods, Some(&ns), &name).map(|_| ()),
                _ => {
                    let phase =
                        ["Pending", "Running", "Succeeded", "Failed"][(rng / 4 % 4) as usize];
                    server
                        .patch(&pods, Some(&ns), &name, json!({"status": {"phase": phase}}))
                        .map(|_| ())
                }
            };
            writes += u64::from(done.is_ok());
        }
        writes
    })
}

async fn real_cluster(path: &str) -> Result<kube::Client, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("cannot read kubeconfig {path}: {e}"))?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|e| format!("kubeconfig {path} is not usable: {e}"))?;
    kube::Client::try_from(config).map_err(|e| format!("cannot build a client for {path}: {e}"))
}

async fn run(args: Args) -> Result<(), String> {
    let (server, client) = match &args.kubeconfig {
        Some(path) => {
            println!(
                "cluster: {path} (read-only{})",
                if args.write {
                    ", writing summaries"
                } else {
                    ""
                }
            );
            (None, real_cluster(path).await?)
        }
        None => {
            println!(
                "cluster: simulated by fake-apiserver ({} pods on 20 nodes, churning)",
                args.pods
            );
            let (server, client) = simulated(&args).await?;
            (Some(server), client)
        }
    };
    let write = args.write || server.is_some();

    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let pods = factory.informer::<Pod>();
    pods.add_indexers(
        Indexers::new()
            .namespace()
            .index(controllers::BY_NODE, controllers::by_node),
    )
    .map_err(|e| e.to_string())?;
    pods.set_transform(strip_managed_fields)
        .map_err(|e| e.to_string())?;
    let events = Arc::new(AtomicU64::new(0));
    let e = events.clone();
    let count = move || {
        e.fetch_add(1, Ordering::Relaxed);
    };
    let (c1, c2, c3) = (count.clone(), count.clone(), count);
    pods.add_event_handler(
        HandlerFuncs::new()
            .on_add(move |_, _| c1())
            .on_update(move |_, _| c2())
            .on_delete(move |_| c3()),
        HandlerOptions::default().name("event-counter"),
    );
    let summaries: Controller<String> = Controller::new(
        ControllerOptions::default()
            .name("pod-summaries")
            .workers(4),
    );
    pods.add_event_handler(
        controllers::enqueue_namespace(summaries.queue().clone()),
        HandlerOptions::default().name("summary-queue"),
    );

    factory.start();
    let started = Instant::now();
    let synced = tokio::time::timeout(Duration::from_secs(30), factory.wait_for_cache_sync()).await;
    if !matches!(&synced, Ok(s) if s.values().all(|v| *v)) {
        factory.shutdown().await;
        return Err("the pod cache did not sync within 30 s: is the API server reachable, and may this user list and watch pods?".into());
    }
    println!(
        "synced {} pods in {:.2?}",
        pods.store().len(),
        started.elapsed()
    );

    let summary_queue = summaries.queue().clone();
    let (stop_controller, stop_churn) = (CancellationToken::new(), CancellationToken::new());
    let written = Arc::new(AtomicUsize::new(0));
    let runner = {
        let (lister, client, cancel, written) = (
            pods.lister(),
            client.clone(),
            stop_controller.clone(),
            written.clone(),
        );
        tokio::spawn(async move {
            summaries
                .run(
                    move |namespace: String| {
                        let (lister, client, written) =
                            (lister.clone(), client.clone(), written.clone());
                        async move {
                            if !write {
                                return Ok(kube_informer::controller::Action::Done);
                            }
                            let action =
                                controllers::write_summary(client, lister, namespace).await?;
                            written.fetch_add(1, Ordering::Relaxed);
                            Ok::<_, kube::Error>(action)
                        }
                    },
                    cancel,
                )
                .await;
        })
    };
    let churning = server
        .clone()
        .map(|s| churn(s, args.pods as u64, args.seed, stop_churn.clone()));

    let mut last = events.load(Ordering::Relaxed);
    for second in 1..=args.seconds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = events.load(Ordering::Relaxed);
        let busiest = controllers::pods_per_node(&pods.store());
        println!(
            "[{second:>3}s] {:>6} events/s | cache {:>6} pods on {:>3} nodes (busiest {} with {}) | summary queue {:>3} | summaries written {}",
            now - last,
            pods.store().len(),
            busiest.len(),
            busiest.first().map_or("-", |b| b.0.as_str()),
            busiest.first().map_or(0, |b| b.1),
            summary_queue.len(),
            written.load(Ordering::Relaxed),
        );
        last = now;
    }
    // Stop the churn, let the cache and the controller catch up, then stop them.
    stop_churn.cancel();
    let churned = match churning {
        Some(task) => task.await.unwrap_or(0),
        None => 0,
    };
    if let Some(server) = &server {
        let total = server
            .list(&Gvr::core("pods"))
            .map_err(|e| e.to_string())?
            .len();
        for _ in 0..1000 {
            if pods.store().len() == total && summary_queue.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    stop_controller.cancel();
    let _ = runner.await;
    factory.shutdown().await;

    println!("\nsummary after {:.1?}:", started.elapsed());
    println!(
        "  events delivered to handlers: {}",
        events.load(Ordering::Relaxed)
    );
    if server.is_some() {
        println!("  simulated writes: {churned}");
    }
    for (node, n) in controllers::pods_per_node(&pods.store()).iter().take(3) {
        println!("  {node}: {n} pods");
    }
    if let Some(server) = &server {
        let truth = server.list(&Gvr::core("pods")).map_err(|e| e.to_string())?;
        let mut agree = true;
        for ns in (0..5).map(|i| format!("team-{i}")) {
            let expected = truth
                .iter()
                .filter(|p| p["metadata"]["namespace"] == ns.as_str())
                .count();
            let written = server
                .get(&Gvr::core("configmaps"), Some(&ns), controllers::SUMMARY)
                .ok();
            let said = written
                .as_ref()
                .and_then(|cm| cm["data"]["pods"].as_str())
                .unwrap_or("-")
                .to_owned();
            agree &= said == expected.to_string();
            println!("  {ns}: {expected} pods on the server, summary says {said}");
        }
        println!(
            "  summaries match the server: {}",
            if agree { "yes" } else { "NO" }
        );
        if !agree {
            return Err("the summaries do not match the server".into());
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}
