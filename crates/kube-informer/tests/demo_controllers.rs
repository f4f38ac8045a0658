//! The demo's controllers against fake-apiserver with a seeded churn: the summary
//! ConfigMaps they write end up matching the server's pods exactly.

#[path = "../examples/demo/controllers.rs"]
mod controllers;

use std::time::Duration;

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::Pod;
use kube_informer::{
    Indexers,
    controller::{Controller, ControllerOptions},
    factory::{FactoryOptions, SharedInformerFactory},
    informer::HandlerOptions,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn pod(i: u64, phase: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": format!("p-{i}"), "namespace": format!("team-{}", i % 3)},
        "spec": {"nodeName": format!("node-{}", i % 4)},
        "status": {"phase": phase},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_match_the_server_after_a_seeded_churn() {
    let server = FakeApiServer::start(ServerConfig::default().seed(3))
        .await
        .unwrap();
    let pods = Gvr::core("pods");
    server
        .seed(&pods, (0..60).map(|i| pod(i, "Running")))
        .unwrap();
    let client = server.client().unwrap();
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let informer = factory.informer::<Pod>();
    informer
        .add_indexers(
            Indexers::new()
                .namespace()
                .index(controllers::BY_NODE, controllers::by_node),
        )
        .unwrap();
    let summaries: Controller<String> = Controller::new(ControllerOptions::default().workers(3));
    informer.add_event_handler(
        controllers::enqueue_namespace(summaries.queue().clone()),
        HandlerOptions::default(),
    );
    let queue = summaries.queue().clone();
    factory.start();
    factory.wait_for_cache_sync().await;
    let stop = CancellationToken::new();
    let runner = {
        let (lister, client, stop) = (informer.lister(), client.clone(), stop.clone());
        tokio::spawn(async move {
            summaries
                .run(
                    move |ns: String| {
                        controllers::write_summary(client.clone(), lister.clone(), ns)
                    },
                    stop,
                )
                .await;
        })
    };
    // A seeded churn: creates, phase changes and deletes.
    let mut rng = 0x5EED_u64;
    let mut next = 60;
    for _ in 0..300 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let victim = rng % next;
        let (ns, name) = (format!("team-{}", victim % 3), format!("p-{victim}"));
        let _ = match rng % 4 {
            0 => {
                next += 1;
                server
                    .create(
                        &pods,
                        Some(&format!("team-{}", (next - 1) % 3)),
                        pod(next - 1, "Pending"),
                    )
                    .map(|_| ())
            }
            1 => server.delete(&pods, Some(&ns), &name).map(|_| ()),
            _ => {
                let phase = ["Pending", "Running", "Failed"][(rng / 4 % 3) as usize];
                server
                    .patch(&pods, Some(&ns), &name, json!({"status": {"phase": phase}}))
                    .map(|_| ())
            }
        };
    }
    // Wait until every namespace's summary matches the server (the bound only guards a hang).
    let truth = |ns: &str| {
        let all = server.list(&pods).unwrap();
        let mine: Vec<_> = all
            .iter()
            .filter(|p| p["metadata"]["namespace"] == ns)
            .collect();
        let phase = |ph: &str| {
            mine.iter()
                .filter(|p| p["status"]["phase"] == ph)
                .count()
                .to_string()
        };
        (
            mine.len().to_string(),
            phase("Running"),
            phase("Pending"),
            phase("Failed"),
        )
    };
    let written = |ns: &str| {
        server
            .get(&Gvr::core("configmaps"), Some(ns), controllers::SUMMARY)
            .ok()
            .map(|cm| {
                let d = &cm["data"];
                let s = |k: &str| d[k].as_str().unwrap_or("").to_owned();
                (s("pods"), s("running"), s("pending"), s("failed"))
            })
    };
    let namespaces = ["team-0", "team-1", "team-2"];
    let mut matched = false;
    for _ in 0..2000 {
        if namespaces.iter().all(|ns| written(ns) == Some(truth(ns))) && queue.is_empty() {
            matched = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for ns in namespaces {
        assert!(
            matched,
            "{ns}: summary {:?} vs server {:?}",
            written(ns),
            truth(ns)
        );
    }
    stop.cancel();
    runner.await.unwrap();
    factory.shutdown().await;
}
