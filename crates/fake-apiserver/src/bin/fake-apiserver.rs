//! Runs fake-apiserver standalone, for kubectl or any other client:
//!
//! ```text
//! fake-apiserver --port 8080 --seed-pods 100 --namespaces 3
//! kubectl --server http://127.0.0.1:8080 get pods -A
//! ```

use std::{process::ExitCode, time::Duration};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use serde_json::json;

const USAGE: &str = "usage: fake-apiserver [--port PORT] [--seed-pods N] [--namespaces N] [--nodes N] [--seed S] [--bookmark-interval-secs S]";

struct Args {
    port: u16,
    pods: usize,
    namespaces: usize,
    nodes: usize,
    seed: u64,
    bookmark_interval: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        port: 8080,
        pods: 0,
        namespaces: 1,
        nodes: 3,
        seed: 0,
        bookmark_interval: 5,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_owned());
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let number = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: {v:?} is not a number\n{USAGE}"))
        };
        match flag.as_str() {
            "--port" => {
                args.port = u16::try_from(number(&value)?)
                    .map_err(|_| format!("--port: {value} is out of range"))?
            }
            "--seed-pods" => args.pods = number(&value)? as usize,
            "--namespaces" => args.namespaces = (number(&value)? as usize).max(1),
            "--nodes" => args.nodes = (number(&value)? as usize).max(1),
            "--seed" => args.seed = number(&value)?,
            "--bookmark-interval-secs" => args.bookmark_interval = number(&value)?.max(1),
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn seed(server: &FakeApiServer, args: &Args) -> Result<(), fake_apiserver::Error> {
    let nodes = (0..args.nodes).map(|i| json!({"metadata": {"name": format!("node-{i}")}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
    server.seed(&Gvr::core("nodes"), nodes)?;
    let pods = (0..args.pods).map(|i| {
        json!({
            "metadata": {"name": format!("pod-{i}"), "namespace": format!("ns-{}", i % args.namespaces), "labels": {"app": format!("app-{}", i % 10)}},
            "spec": {"nodeName": format!("node-{}", i % args.nodes), "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
            "status": {"phase": "Running"},
        })
    });
    server.seed(&Gvr::core("pods"), pods)
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
