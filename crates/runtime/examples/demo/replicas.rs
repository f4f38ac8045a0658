//! The demo's replicas: managers with leader election and the two controllers, their
//! endpoints polled for the progress lines, the leader killed halfway.
#![allow(dead_code, unreachable_pub)]

use std::{net::SocketAddr, path::Path, time::Duration};

use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
use kube_informer_runtime::{
    leader_election::{LeaderElectionConfig, LeaderElector},
    manager::{Manager, ManagerOptions},
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use super::{cluster, controllers, verify};

/// What a simulated run does.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub pods: u64,
    pub seconds: u64,
    pub seed: u64,
}

/// What a real-cluster run does.
#[derive(Debug, Clone)]
pub struct RealPlan {
    pub seconds: u64,
    pub write: bool,
    pub lease_namespace: String,
}

/// One replica: its manager's task, endpoints and elector.
pub struct Replica {
    pub name: String,
    pub addr: SocketAddr,
    pub elector: Option<LeaderElector>,
    pub stop: CancellationToken,
    pub task: tokio::task::JoinHandle<Result<(), kube_informer_runtime::manager::ManagerError>>,
}

/// Starts replica `name`: a manager (endpoints on a free loopback port), leader election on
/// the Lease `demo` in `lease_namespace`, both controllers when `controllers`.
pub async fn start(
    client: kube::Client,
    name: &str,
    lease_namespace: &str,
    controllers: bool,
) -> Result<Replica, String> {
    let election = LeaderElectionConfig::new("demo")
        .namespace(lease_namespace)
        .identity(name)
        .lease_duration(Duration::from_secs(4))
        .renew_deadline(Duration::from_secs(3))
        .retry_period(Duration::from_millis(500));
    let mut options = ManagerOptions::default().bind(([127, 0, 0, 1], 0).into());
    if controllers {
        options = options.leader_election(election);
    }
    let mut manager = Manager::new(client, options)
        .await
        .map_err(|e| e.to_string())?;
    let who = name.to_owned();
    manager
        .factory()
        .on_error(move |informer, failure| eprintln!("{who}: {informer}: {failure}"));
    // The caches the progress lines read exist on every replica, leading or not.
    let _ = manager.factory().informer::<Pod>();
    let _ = manager.factory().informer::<Deployment>();
    if controllers {
        let recorder = manager.recorder("demo.kube-informer.io/ready-pods");
        controllers::install(&mut manager, recorder);
    }
    let mut endpoints = manager.endpoints();
    let elector = manager.elector().cloned();
    let stop = CancellationToken::new();
    let task = tokio::spawn(manager.run_until(stop.clone(), CancellationToken::new()));
    let addr = endpoints
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|addr| *addr)
        .ok_or("the endpoints were not bound")?;
    Ok(Replica {
        name: name.to_owned(),
        addr,
        elector,
        stop,
        task,
    })
}

/// `GET path` on an endpoint: (status, body); (0, "") if unreachable.
pub async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return (0, String::new());
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return (0, String::new());
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    let code = response
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

fn status(replicas: &[Replica], ready: &[u16]) -> String {
    let parts: Vec<String> = replicas
        .iter()
        .zip(ready)
        .map(|(r, code)| {
            let leads = r.elector.as_ref().is_some_and(LeaderElector::is_leading);
            let state = if r.task.is_finished() {
                "dead"
            } else if leads {
                "LEADER"
            } else {
                "standby"
            };
            format!("{} {state} readyz {code}", r.name)
        })
        .collect();
    parts.join(", ")
}

/// The simulated cluster: two replicas, churn, the leader killed halfway, the verdict.
pub async fn simulated_cluster(args: Plan) -> Result<(), String> {
    println!(
        "cluster: simulated by fake-apiserver ({} pods in Deployments on {} nodes, churning)",
        args.pods,
        cluster::NODES
    );
    let server = cluster::simulated(args.pods, args.seed).await?;
    let client = || server.client().map_err(|e| e.to_string());
    let mut replicas = vec![start(client()?, "replica-a", "default", true).await?];
    tokio::time::sleep(Duration::from_millis(300)).await;
    replicas.push(start(client()?, "replica-b", "default", true).await?);
    for r in &replicas {
        println!("{}: http://{}/healthz /readyz /metrics", r.name, r.addr);
    }
    let stop_churn = CancellationToken::new();
    let churn = cluster::churn(server.clone(), args.pods, args.seed, stop_churn.clone());
    let kill_at = (args.seconds / 3).max(1);
    for second in 1..=args.seconds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut ready = Vec::new();
        for r in &replicas {
            ready.push(get(r.addr, "/readyz").await.0);
        }
        println!("[{second:>3}s] {}", status(&replicas, &ready));
        if second == kill_at
            && let Some(leader) = replicas
                .iter()
                .find(|r| r.elector.as_ref().is_some_and(LeaderElector::is_leading))
        {
            leader.task.abort();
            println!(
                "       killed {} (the leader): no release; the standby takes over once its 4 s lease runs out",
                leader.name
            );
        }
    }
    stop_churn.cancel();
    let writes = churn.await.unwrap_or(0);
    println!("\nchurn stopped after {writes} writes; waiting for the controllers to catch up");
    let mut verdict = verify::verify(&server);
    for _ in 0..300 {
        if verdict.mismatches.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        verdict = verify::verify(&server);
    }
    let events = server
        .list(&fake_apiserver::Gvr::new("events.k8s.io", "v1", "events"))
        .map_or(0, |e| e.len());
    println!("events recorded (events.k8s.io/v1): {events}");
    let survivor = replicas.iter().find(|r| !r.task.is_finished());
    if let Some(r) = survivor {
        let (_, metrics) = get(r.addr, "/metrics").await;
        println!("{} (leader at the end) metrics:", r.name);
        let wanted = [
            "controller_runtime_reconcile_total",
            "controller_runtime_reconcile_errors_total",
        ];
        for line in metrics
            .lines()
            .filter(|l| wanted.iter().any(|w| l.starts_with(w)))
        {
            println!("  {line}");
        }
    }
    println!(
        "\nverdict: {} deployments, {} namespaces checked against the server: {}",
        verdict.deployments,
        verdict.namespaces,
        if verdict.mismatches.is_empty() {
            "all match"
        } else {
            "MISMATCH"
        }
    );
    for m in verdict.mismatches.iter().take(20) {
        println!("  {m}");
    }
    for r in &replicas {
        r.stop.cancel();
    }
    for r in replicas {
        let _ = r.task.await;
    }
    match verdict.mismatches.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "{} mismatches with the server",
            verdict.mismatches.len()
        )),
    }
}

/// A real cluster: one replica; read-only (caches and counts) unless `--write`.
pub async fn real_cluster(args: RealPlan, path: &Path) -> Result<(), String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("cannot read kubeconfig {}: {e}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| format!("kubeconfig {} is not usable: {e}", path.display()))?;
    let client =
        kube::Client::try_from(config).map_err(|e| format!("cannot build a client: {e}"))?;
    println!(
        "cluster: {} ({})",
        path.display(),
        if args.write {
            "running the controllers: they write"
        } else {
            "read-only"
        }
    );
    let replica = start(client, "replica-a", &args.lease_namespace, args.write).await?;
    println!(
        "{}: http://{}/healthz /readyz /metrics",
        replica.name, replica.addr
    );
    for second in 1..=args.seconds {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (ready, body) = get(replica.addr, "/readyz?verbose").await;
        let failing: Vec<&str> = body.lines().filter(|l| l.starts_with("[-]")).collect();
        println!("[{second:>3}s] readyz {ready} {}", failing.join(" "));
    }
    replica.stop.cancel();
    replica
        .task
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    Ok(())
}
