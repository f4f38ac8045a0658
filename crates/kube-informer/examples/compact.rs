//! Compact objects: a cache of Pods kept as their JSON and parsed metadata, a fraction of
//! a typed Pod's memory and decoding cost. Keys, labels and owners are read without
//! decoding; anything else is decoded on demand, with full fidelity.
//!
//! ```text
//! cargo run -p kube-informer --example compact               # embedded fake-apiserver
//! cargo run -p kube-informer --example compact -- --cluster  # your kubeconfig's cluster (all pods)
//! ```

use std::time::Duration;

use fake_apiserver::{FakeApiServer, ServerConfig};
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt, api::PostParams};
use kube_informer::{FactoryOptions, SharedInformerFactory, compact::Compact};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let (client, _server) = if std::env::args().any(|a| a == "--cluster") {
        (kube::Client::try_default().await?, None)
    } else {
        let server = FakeApiServer::start(ServerConfig::default().namespaces(["shop"])).await?;
        let pods: Api<Pod> = Api::namespaced(server.client()?, "shop");
        for n in 0..50 {
            let pod = json!({"metadata": {"name": format!("web-{n}"), "labels": {"app": "web"}},
                "spec": {"nodeName": format!("node-{}", n % 3),
                         "containers": [{"name": "web", "image": "nginx:1.27"}]}});
            pods.create(&PostParams::default(), &serde_json::from_value(pod)?)
                .await?;
        }
        (server.client()?, Some(server))
    };
    // `Compact<Pod>` goes wherever `Pod` does: factories, informers, listers, indexes.
    let factory = SharedInformerFactory::new(client, FactoryOptions::default());
    let pods = factory.informer::<Compact<Pod>>();
    factory.start();
    factory.wait_for_sync(Duration::from_secs(60)).await?;

    let cached = pods.store().list();
    let bytes: usize = cached.iter().map(|p| p.stored_len()).sum();
    println!(
        "{} pods cached as {} KiB of JSON",
        cached.len(),
        bytes / 1024
    );
    if let Some(first) = cached.first() {
        // Metadata: no decoding.
        println!("{} labels {:?}", first.name_any(), first.labels());
        // The rest: one full decode, when needed.
        let pod: Pod = first.decode()?;
        let node = pod.spec.and_then(|s| s.node_name).unwrap_or_default();
        println!("{} runs on {node}", first.name_any());
    }
    factory.shutdown().await;
    Ok(())
}
