//! Helpers shared by the runtime's integration tests.

#![allow(dead_code)]

pub(crate) mod schedule;

use std::{sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, ServerConfig};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// A fake-apiserver with the namespace `shop`.
pub(crate) async fn server() -> Arc<FakeApiServer> {
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["shop"]))
        .await
        .unwrap();
    Arc::new(server)
}

/// `GET path` on a manager's endpoints: the status and the body.
pub(crate) async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let code = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (code, body)
}

/// Runs `fleet` from `source` until `cancel`, as a task of `tasks`.
pub(crate) fn run_fleet(
    tasks: &mut tokio::task::JoinSet<()>,
    fleet: &kube_informer_runtime::fleet::Fleet,
    source: impl futures_util::Stream<Item = kube_informer_runtime::fleet::ClusterEvent>
    + Send
    + 'static,
    cancel: &tokio_util::sync::CancellationToken,
) {
    let (fleet, cancel) = (fleet.clone(), cancel.clone());
    tasks.spawn(async move { fleet.run(source, cancel).await });
}

/// A member cluster for the fleet tests: a fake-apiserver with the namespace `shop` and
/// the ConfigMaps `objects` in it.
pub(crate) async fn fleet_member(objects: &[&str]) -> Arc<FakeApiServer> {
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["shop"]))
        .await
        .unwrap();
    for name in objects {
        let cm = json!({"metadata": {"name": name}});
        let configmaps = fake_apiserver::Gvr::core("configmaps");
        server.create(&configmaps, Some("shop"), cm).unwrap();
    }
    Arc::new(server)
}

/// A Deployment `name` with `replicas`.
pub(crate) fn deployment(name: &str, replicas: i32) -> Value {
    json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    })
}

/// A Pod `name`, controlled by the Deployment `owner` if given.
pub(crate) fn pod(name: &str, owner: Option<&str>) -> Value {
    let owners: Vec<Value> = owner
        .map(|o| json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": o, "uid": format!("uid-{o}"), "controller": true}))
        .into_iter()
        .collect();
    json!({
        "metadata": {"name": name, "ownerReferences": owners},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    })
}

/// Lines recorded by handlers and reconciles, shared across tasks.
#[derive(Clone, Default)]
pub(crate) struct Recorded(Arc<Mutex<Vec<String>>>);

impl Recorded {
    pub(crate) fn push(&self, line: String) {
        self.0.lock().push(line);
    }

    pub(crate) fn all(&self) -> Vec<String> {
        self.0.lock().clone()
    }

    pub(crate) fn count(&self, line: &str) -> usize {
        self.0.lock().iter().filter(|l| *l == line).count()
    }

    pub(crate) fn clear(&self) {
        self.0.lock().clear();
    }
}

/// Waits until `done` holds, polling every 5 ms; panics naming `what` after 60 s (the bound
/// only guards a hang, it never decides a verdict).
pub(crate) async fn until(what: &str, mut done: impl FnMut() -> bool) {
    // A minute on the test's clock (paused or real), not a count of polls: a hang guard,
    // never a verdict on how fast a loaded machine gets there.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("timed out waiting for: {what}");
}
