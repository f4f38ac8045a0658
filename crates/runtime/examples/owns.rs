//! A controller with `owns`: every ConfigMap labelled `example.com/copy=yes` gets a Secret
//! copy of its data, owned by it. Deleting the Secret wakes the ConfigMap's reconcile (the
//! owner reference leads back to it), which puts the copy back.
//!
//! ```text
//! cargo run -p kube-informer-runtime --example owns               # embedded fake-apiserver
//! cargo run -p kube-informer-runtime --example owns -- --cluster  # your kubeconfig's cluster
//! RUST_LOG=info cargo run -p kube-informer-runtime --example owns  # the runtime's logs
//! cargo run -p kube-informer-runtime --example owns -- --print-rbac # the Role it needs
//! ```

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, ServerConfig};
use k8s_openapi::{
    ByteString,
    api::core::v1::{ConfigMap, Namespace, Secret},
    apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, PostParams},
};
use kube_informer::{FactoryOptions, Selectors};
use kube_informer_runtime::{
    controller::{Action, Cached, ControllerOptions},
    manager::{Manager, ManagerOptions},
    rbac::Verb,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "owns-example";

struct Ctx {
    client: kube::Client,
}

async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
    // Deleted: the Secret goes with it (garbage collection follows the owner reference).
    let Cached::Present(cm) = cm else {
        return Ok(Action::Done);
    };
    if cm.labels().get("example.com/copy").map(String::as_str) != Some("yes") {
        return Ok(Action::Done);
    }
    let owner = OwnerReference {
        api_version: ConfigMap::api_version(&()).into_owned(),
        kind: ConfigMap::kind(&()).into_owned(),
        name: cm.name_any(),
        uid: cm.uid().unwrap_or_default(),
        controller: Some(true),
        ..OwnerReference::default()
    };
    let data: BTreeMap<String, ByteString> = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), ByteString(v.clone().into_bytes())))
        .collect();
    let mut copy = Secret::default();
    copy.metadata.name = Some(format!("{}-copy", cm.name_any()));
    copy.metadata.owner_references = Some(vec![owner]);
    copy.data = Some(data);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), NAMESPACE);
    match secrets.create(&PostParams::default(), &copy).await {
        Ok(_) => println!("reconcile {}: created its copy", cm.name_any()),
        Err(kube::Error::Api(status)) if status.code == 409 => {} // already there
        Err(err) => return Err(err),
    }
    Ok(Action::Done)
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
        let server = FakeApiServer::start(ServerConfig::default()).await?;
        (server.client()?, Some(server))
    };
    let ns = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?;
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await; // 409: it exists

    // Endpoints on a free loopback port; caches of this namespace only.
    let options = ManagerOptions::default()
        .bind(([127, 0, 0, 1], 0).into())
        .factory(FactoryOptions::default().selectors(Selectors::default().in_namespace(NAMESPACE)));
    let mut manager = Manager::new(client.clone(), options).await?;
    let controller = manager
        .controller::<ConfigMap>(ControllerOptions::default().name("copies"))
        .owns::<Secret>()
        .writes::<Secret>(&[Verb::Create]);
    // The manager's client records each write a reconcile makes, so the next reconcile of
    // the key waits until the cache holds it (read your own writes): no `wrote` call.
    let ctx = Arc::new(Ctx {
        client: manager.client().clone(),
    });
    manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, ctx);
    if std::env::args().any(|a| a == "--print-rbac") {
        // What the controller needs (the example's own setup creates the namespace).
        print!("{}", manager.rbac().yaml("owns-example"));
        return Ok(());
    }
    let mut endpoints = manager.endpoints();
    let (stop, force) = (CancellationToken::new(), CancellationToken::new());
    let running = tokio::spawn(manager.run_until(stop.clone(), force));
    if let Ok(addr) = endpoints.wait_for(Option::is_some).await {
        println!("/healthz, /readyz and /metrics on {}", addr.unwrap());
    }

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(client, NAMESPACE);
    let cm = json!({"metadata": {"name": "settings", "labels": {"example.com/copy": "yes"}},
                    "data": {"mode": "fast"}});
    let _ = config_maps
        .create(&PostParams::default(), &serde_json::from_value(cm)?)
        .await;
    let copied = until(|| async { secrets.get_opt("settings-copy").await.ok().flatten() }).await;
    println!("copy: {:?}", copied.map(|s| s.data));
    // Delete the child: `owns` maps it back to its owner, whose reconcile restores it.
    secrets
        .delete("settings-copy", &DeleteParams::default())
        .await?;
    println!("deleted the copy");
    let restored = until(|| async { secrets.get_opt("settings-copy").await.ok().flatten() }).await;
    println!("restored: {}", restored.is_some());
    stop.cancel(); // as SIGTERM would: drain, then stop
    running.await??;
    Ok(())
}

/// Polls `check` every 100 ms for at most 30 s.
async fn until<T, F, Fut>(check: F) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..300 {
        if let Some(found) = check().await {
            return Some(found);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}
