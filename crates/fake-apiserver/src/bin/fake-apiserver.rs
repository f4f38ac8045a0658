//! Runs fake-apiserver standalone, for kubectl or any other client:
//!
//! ```text
//! fake-apiserver --port 8090 --seed-pods 100 --namespaces 3
//! kubectl --server http://127.0.0.1:8090 get pods -A
//! ```

use std::{process::ExitCode, time::Duration};

use clap::Parser;
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use serde_json::json;

/// An in-process Kubernetes API server over plain HTTP on loopback, answering as
/// kube-apiserver 1.36 does; for kubectl, controllers under development and tests.
#[derive(Debug, Parser)]
#[command(name = "fake-apiserver", version)]
struct Args {
    /// The loopback port to listen on (0 picks a free one). Not 8080, where many
    /// tools (and controllers' metrics) listen
    #[arg(long, default_value_t = 8090)]
    port: u16,
    /// Pods to create at start, spread over the namespaces and nodes
    #[arg(long = "seed-pods", default_value_t = 0, value_name = "N")]
    pods: usize,
    /// Namespaces the seeded pods go to (ns-0, ns-1, ...)
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    namespaces: u16,
    /// Nodes to create at start (node-0, node-1, ...)
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    nodes: u16,
    /// Seed of the generated uids and names (the same seed gives the same ones)
    #[arg(long, default_value_t = 0, value_name = "S")]
    seed: u64,
    /// Seconds between the bookmarks sent to watches that asked for them (60: the real
    /// server's cadence)
    #[arg(long = "bookmark-interval-secs", default_value_t = 60, value_name = "S", value_parser = clap::value_parser!(u64).range(1..))]
    bookmark_interval: u64,
}

fn seed(server: &FakeApiServer, args: &Args) -> Result<(), fake_apiserver::Error> {
    let (namespaces, node_count) = (usize::from(args.namespaces), usize::from(args.nodes));
    let nodes = (0..node_count).map(|i| json!({"metadata": {"name": format!("node-{i}")}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
    server.seed(&Gvr::core("nodes"), nodes)?;
    let pods = (0..args.pods).map(|i| {
        json!({
            "metadata": {"name": format!("pod-{i}"), "namespace": format!("ns-{}", i % namespaces), "labels": {"app": format!("app-{}", i % 10)}},
            "spec": {"nodeName": format!("node-{}", i % node_count), "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
            "status": {"phase": "Running"},
        })
    });
    server.seed(&Gvr::core("pods"), pods)
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let config = ServerConfig::default()
        .port(args.port)
        .seed(args.seed)
        .bookmark_interval(Duration::from_secs(args.bookmark_interval));
    let server = match FakeApiServer::start(config).await {
        Ok(server) => server,
        Err(err) => {
            eprintln!("{err}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(err) = seed(&server, &args) {
        eprintln!("seeding failed: {err}");
        return ExitCode::FAILURE;
    }
    println!("fake-apiserver listening on {}", server.url());
    println!("try: kubectl --server {} get pods -A", server.url());
    let _ = tokio::signal::ctrl_c().await;
    server.shutdown().await;
    ExitCode::SUCCESS
}
