//! An indexed cache: Pods indexed by the node they run on, read by index and through a
//! lister with a label selector — no request to the API server, no scan of the cache.
//!
//! ```text
//! cargo run -p kube-informer --example indexed_cache               # embedded fake-apiserver
//! cargo run -p kube-informer --example indexed_cache -- --cluster  # your kubeconfig's cluster
//! ```

use std::time::Duration;

use fake_apiserver::{FakeApiServer, ServerConfig};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{Api, api::PostParams, core::Selector};
use kube_informer::{FactoryOptions, Indexers, InformerSpec, Selectors, SharedInformerFactory};
use serde_json::json;

const NAMESPACE: &str = "indexed-example";

/// The index function: the node a pod runs on (none while it is pending).
fn node_of(pod: &Pod) -> Vec<String> {
    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
    node.into_iter().collect()
}

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
        let server = FakeApiServer::start(ServerConfig::default().namespaces([NAMESPACE])).await?;
        // Pods as a scheduler would have placed them (the fake runs no scheduler).
        let pods: Api<Pod> = Api::namespaced(server.client()?, NAMESPACE);
        for (name, node, app) in [
            ("web-1", "node-a", "web"),
            ("web-2", "node-b", "web"),
            ("db-1", "node-a", "db"),
        ] {
            let pod = json!({"metadata": {"name": name, "labels": {"app": app}},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}});
            pods.create(&PostParams::default(), &serde_json::from_value(pod)?)
                .await?;
        }
        (server.client()?, Some(server))
    };
    let _ = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
        )
        .await; // 409: it exists

    let factory = SharedInformerFactory::new(client, FactoryOptions::default());
    // The factory adds the namespace index to every namespaced informer; add ours.
    let spec = InformerSpec::new()
        .selectors(Selectors::default().in_namespace(NAMESPACE))
        .indexers(Indexers::new().index("by-node", node_of));
    let pods = factory.informer_with::<Pod>(spec);
    factory.start();
    factory.wait_for_sync(Duration::from_secs(30)).await?;

    let store = pods.store();
    for node in ["node-a", "node-b"] {
        let on_node = store.by_index("by-node", node)?;
        let names: Vec<_> = on_node
            .iter()
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        println!("{node}: {names:?}");
    }
    // A lister: namespaced reads with a label selector, from the same cache.
    let web = Selector::from_iter([("app", "web")]);
    let listed = pods.lister().namespaced(NAMESPACE).list(&web);
    println!("app=web in {NAMESPACE}: {}", listed.len());
    factory.shutdown().await;
    Ok(())
}
