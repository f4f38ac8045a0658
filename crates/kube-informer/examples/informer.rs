//! A shared informer: one LIST+WATCH of ConfigMaps, a local cache, and a handler told of
//! every change.
//!
//! ```text
//! cargo run -p kube-informer --example informer               # on an embedded fake-apiserver
//! cargo run -p kube-informer --example informer -- --cluster  # on your kubeconfig's cluster
//! RUST_LOG=debug cargo run -p kube-informer --example informer  # the informer's own logs
//! ```

use std::time::Duration;

use fake_apiserver::{FakeApiServer, ServerConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
};
use kube_informer::{
    FactoryOptions, HandlerFuncs, InformerSpec, Selectors, SharedInformerFactory,
    informer::HandlerOptions,
};
use serde_json::json;

const NAMESPACE: &str = "informer-example";

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    // fake-apiserver unless asked for the real cluster (kept alive until the end).
    let (client, _server) = if std::env::args().any(|a| a == "--cluster") {
        (kube::Client::try_default().await?, None)
    } else {
        let server = FakeApiServer::start(ServerConfig::default()).await?;
        (server.client()?, Some(server))
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    let _ = namespaces.create(&PostParams::default(), &ns).await; // 409: it exists

    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    factory.on_error(|informer, failure| eprintln!("{informer}: {failure}"));
    let config_maps = factory.informer_with::<ConfigMap>(
        InformerSpec::new().selectors(Selectors::default().in_namespace(NAMESPACE)),
    );
    config_maps.add_event_handler(
        HandlerFuncs::new()
            .on_add(|cm: std::sync::Arc<ConfigMap>, initial| {
                let when = if initial { "listed" } else { "added" };
                println!("{when}: {}", cm.metadata.name.as_deref().unwrap_or("?"));
            })
            .on_update(|_old, new: std::sync::Arc<ConfigMap>| {
                println!(
                    "updated: {} {:?}",
                    new.metadata.name.as_deref().unwrap_or("?"),
                    new.data
                );
            })
            .on_delete(|gone: kube_informer::DeletedObject<ConfigMap>| {
                let name = gone.object().metadata.name.clone().unwrap_or_default();
                println!("deleted: {name}");
            }),
        HandlerOptions::default(),
    );
    factory.start();
    factory.wait_for_sync(Duration::from_secs(30)).await?;

    // Write through the API server; the cache follows through the watch.
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let cm =
        serde_json::from_value(json!({"metadata": {"name": "settings"}, "data": {"mode": "a"}}))?;
    let created = api.create(&PostParams::default(), &cm).await?;
    let mut changed = created.clone();
    changed.data = Some([("mode".to_owned(), "b".to_owned())].into());
    let changed = api
        .replace("settings", &PostParams::default(), &changed)
        .await?;
    // Read-your-writes: wait until the cache holds this version, then read it locally.
    let version = changed.metadata.resource_version.unwrap_or_default();
    let store = config_maps.store();
    tokio::time::timeout(
        Duration::from_secs(30),
        store.wait_for_resource_version(&version),
    )
    .await??;
    let cached = store
        .get_by_key(&format!("{NAMESPACE}/settings"))
        .expect("cached");
    println!(
        "cached: {:?} ({} objects in the cache)",
        cached.data,
        store.len()
    );
    api.delete("settings", &DeleteParams::default()).await?;
    tokio::time::sleep(Duration::from_millis(500)).await; // let the delete arrive
    factory.shutdown().await;
    Ok(())
}
