//! Leader election: two replicas of a manager, one Lease. Only the leader reconciles; when
//! it stops (a rolling update's SIGTERM), it releases the Lease and the other takes over
//! at once, without waiting for the Lease to expire.
//!
//! ```text
//! cargo run -p kube-informer-runtime --example leader_election               # embedded fake-apiserver
//! cargo run -p kube-informer-runtime --example leader_election -- --cluster  # your kubeconfig's cluster
//! cargo run -p kube-informer-runtime --example leader_election -- --print-rbac # the Role a replica needs
//! ```

use std::{sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, ServerConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::{Api, ResourceExt, api::PostParams};
use kube_informer::{FactoryOptions, Selectors};
use kube_informer_runtime::{
    controller::{Action, Cached, ControllerOptions},
    leader_election::LeaderElectionConfig,
    manager::{Manager, ManagerOptions},
};
use serde_json::json;
use tokio::{task::JoinHandle, time::Instant};
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "election-example";

/// One replica: a manager electing itself through the Lease `election-example`.
async fn replica(
    client: kube::Client,
    name: &'static str,
    started: Instant,
) -> Result<(JoinHandle<Result<(), String>>, CancellationToken), Box<dyn std::error::Error>> {
    let election = LeaderElectionConfig::new("election-example")
        .namespace(NAMESPACE)
        .identity(name) // unique per replica (the default: hostname and a random suffix)
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500));
    let options = ManagerOptions::default()
        .no_endpoints()
        .leader_election(election)
        .factory(FactoryOptions::default().selectors(Selectors::default().in_namespace(NAMESPACE)));
    let mut manager = Manager::new(client, options).await?;
    let controller = manager
        .controller::<ConfigMap>(ControllerOptions::default().name("greeter"))
        .resync(Duration::from_secs(1));
    manager.add_controller(
        controller,
        move |cm: Cached<ConfigMap>, _: Arc<()>| async move {
            if let Cached::Present(cm) = cm {
                let at = started.elapsed().as_secs_f32();
                println!("{at:5.1}s  {name} reconciles {}", cm.name_any());
            }
            Ok::<_, kube::Error>(Action::Done)
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
    );
    if std::env::args().any(|a| a == "--print-rbac") {
        // What a replica needs: its caches and the Lease.
        print!("{}", manager.rbac().yaml("election-example"));
        std::process::exit(0);
    }
    let stop = CancellationToken::new();
    let run = manager.run_until(stop.clone(), CancellationToken::new());
    let task = tokio::spawn(async move { run.await.map_err(|e| e.to_string()) });
    Ok((task, stop))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "kube_informer_runtime::leader_election=info".into()),
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
    let cm = serde_json::from_value(json!({"metadata": {"name": "hello"}}))?;
    let _ = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &cm)
        .await;

    let started = Instant::now();
    let (a, stop_a) = replica(client.clone(), "replica-a", started).await?;
    tokio::time::sleep(Duration::from_secs(1)).await; // a campaigns first
    let (b, stop_b) = replica(client, "replica-b", started).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!(
        "{:5.1}s  replica-a is asked to stop",
        started.elapsed().as_secs_f32()
    );
    stop_a.cancel(); // drains, then releases the Lease: b takes over at its next retry
    a.await??;
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop_b.cancel();
    b.await??;
    Ok(())
}
