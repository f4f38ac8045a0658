//! The demo's simulated cluster: namespaces, nodes, Deployments and the pods they own, on
//! fake-apiserver, and a steady churn of pod and Deployment changes.
#![allow(dead_code, unreachable_pub)]

use std::{sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The simulated cluster's shape.
pub const NAMESPACES: u64 = 5;
pub const NODES: u64 = 20;
/// Pods per Deployment, on average.
pub const PODS_PER_DEPLOYMENT: u64 = 10;

fn pods() -> Gvr {
    Gvr::core("pods")
}

fn deployments() -> Gvr {
    Gvr::new("apps", "v1", "deployments")
}

fn namespace_of(i: u64) -> String {
    format!("team-{}", i % NAMESPACES)
}

/// Deployment `i`.
fn deployment(i: u64) -> Value {
    json!({
        "metadata": {"name": format!("app-{i}"), "uid": format!("uid-app-{i}")},
        "spec": {"replicas": PODS_PER_DEPLOYMENT, "selector": {"matchLabels": {"app": format!("app-{i}")}},
                 "template": {"metadata": {"labels": {"app": format!("app-{i}")}},
                              "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}},
    })
}

/// Pod `i` of Deployment `owner` (both in `owner`'s namespace).
fn pod(i: u64, owner: u64, phase: &str) -> Value {
    json!({
        "metadata": {"name": format!("app-{owner}-{i}"), "labels": {"app": format!("app-{owner}")},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": format!("app-{owner}"),
                                          "uid": format!("uid-app-{owner}"), "controller": true}]},
        "spec": {"nodeName": format!("node-{}", i % NODES), "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
        "status": {"phase": phase},
    })
}

/// Starts fake-apiserver with `pods` pods in Deployments of about ten.
pub async fn simulated(pods_wanted: u64, seed: u64) -> Result<Arc<FakeApiServer>, String> {
    let server = FakeApiServer::start(ServerConfig::default().seed(seed))
        .await
        .map_err(|e| e.to_string())?;
    let err = |e: fake_apiserver::Error| e.to_string();
    for n in 0..NAMESPACES {
        let ns = json!({"metadata": {"name": format!("team-{n}")}});
        server
            .create(&Gvr::core("namespaces"), None, ns)
            .map_err(err)?;
    }
    let nodes = (0..NODES).map(|i| json!({"metadata": {"name": format!("node-{i}")}}));
    server.seed(&Gvr::core("nodes"), nodes).map_err(err)?;
    let owners = pods_wanted.div_ceil(PODS_PER_DEPLOYMENT);
    for d in 0..owners {
        server
            .create(&deployments(), Some(&namespace_of(d)), deployment(d))
            .map_err(err)?;
    }
    for i in 0..pods_wanted {
        let owner = i % owners.max(1);
        server
            .create(
                &pods(),
                Some(&namespace_of(owner)),
                pod(i, owner, "Running"),
            )
            .map_err(err)?;
    }
    Ok(Arc::new(server))
}

/// Changes the cluster every 2 ms until `cancel`: new pods, deleted pods, phase changes,
/// and now and then a Deployment deleted (its pods with it) or created. Returns the writes.
pub fn churn(
    server: Arc<FakeApiServer>,
    pods_start: u64,
    seed: u64,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut owners = pods_start.div_ceil(PODS_PER_DEPLOYMENT).max(1);
        let (mut next, mut rng, mut writes) = (pods_start, seed | 1, 0u64);
        let mut tick = tokio::time::interval(Duration::from_millis(2));
        while !cancel.is_cancelled() {
            tick.tick().await;
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let owner = rng % owners;
            let ns = namespace_of(owner);
            let victim = format!("app-{owner}-{}", (rng >> 8) % next.max(1));
            let done = match rng % 50 {
                0 => {
                    // A Deployment goes, its pods with it (there is no garbage collector).
                    let gone = server.delete(&deployments(), Some(&ns), &format!("app-{owner}"));
                    for p in server.list(&pods()).unwrap_or_default() {
                        let owned =
                            p["metadata"]["ownerReferences"][0]["name"] == format!("app-{owner}");
                        if owned && p["metadata"]["namespace"] == ns.as_str() {
                            let name = p["metadata"]["name"]
                                .as_str()
                                .unwrap_or_default()
                                .to_owned();
                            let _ = server.delete(&pods(), Some(&ns), &name);
                        }
                    }
                    gone.map(|_| ())
                }
                1 => {
                    owners += 1;
                    let d = owners - 1;
                    server
                        .create(&deployments(), Some(&namespace_of(d)), deployment(d))
                        .map(|_| ())
                }
                2..=13 => {
                    next += 1;
                    server
                        .create(&pods(), Some(&ns), pod(next, owner, "Pending"))
                        .map(|_| ())
                }
                14..=25 => server.delete(&pods(), Some(&ns), &victim).map(|_| ()),
                _ => {
                    let phase =
                        ["Pending", "Running", "Running", "Failed"][(rng >> 20) as usize % 4];
                    server
                        .patch(
                            &pods(),
                            Some(&ns),
                            &victim,
                            json!({"status": {"phase": phase}}),
                        )
                        .map(|_| ())
                }
            };
            writes += u64::from(done.is_ok());
        }
        writes
    })
}
