//! The whole informer: time to synced from fake-apiserver (10k and 100k pods), resident
//! memory per cached pod, and events/s from a source of pre-decoded events through FIFO,
//! cache and distribution to K = 1 and K = 10 counting handlers.
//!
//! `cargo bench -p kube-informer --bench informer` (`-- --quick`: 10k pods only)

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, fixtures::realistic_pod};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{ListParams, ObjectList, WatchEvent, WatchParams},
};
use kube_informer::{
    informer::{HandlerFuncs, HandlerOptions, InformerOptions, SharedIndexInformer},
    list_watch::{ListerWatcher, WatchStream},
    reflector::ReflectorOptions,
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// Resident memory of this process, in bytes (Linux).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    kb * 1024
}

fn counting(count: &Arc<AtomicUsize>) -> HandlerFuncs<Pod> {
    let (a, u, d) = (count.clone(), count.clone(), count.clone());
    HandlerFuncs::new()
        .on_add(move |_, _| {
            a.fetch_add(1, Ordering::Relaxed);
        })
        .on_update(move |_, _| {
            u.fetch_add(1, Ordering::Relaxed);
        })
        .on_delete(move |_| {
            d.fetch_add(1, Ordering::Relaxed);
        })
}

async fn time_to_synced(n: usize) {
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    server
        .seed(&Gvr::core("pods"), (0..n).map(realistic_pod))
        .unwrap();
    let before = rss();
    let informer = SharedIndexInformer::new(
        Api::<Pod>::all(server.client().unwrap()),
        InformerOptions::default(),
    );
    let count = Arc::new(AtomicUsize::new(0));
    let registration = informer.add_event_handler(counting(&count), HandlerOptions::default());
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    while !registration.has_synced() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    let per_pod = rss().saturating_sub(before) as f64 / n as f64;
    println!(
        "{n} pods: synced in {took:.2?} ({:.0} pods/s); resident memory +{:.1} KB per cached pod (typed Pod, managedFields kept)",
        n as f64 / took.as_secs_f64(),
        per_pod / 1024.0
    );
    cancel.cancel();
    task.await.unwrap();
    server.shutdown().await;
}

/// A source that lists nothing and then streams `events` from memory.
struct Replay(Mutex<Option<Vec<WatchEvent<Pod>>>>);

impl ListerWatcher<Pod> for Replay {
    async fn list(&self, _: &ListParams) -> Result<ObjectList<Pod>, kube::Error> {
        Ok(serde_json::from_value(
            serde_json::json!({"metadata": {"resourceVersion": "1"}, "items": []}),
        )
        .unwrap())
    }

    async fn watch(&self, _: &WatchParams, _: &str) -> Result<WatchStream<Pod>, kube::Error> {
        match self.0.lock().take() {
            Some(events) => Ok(futures_util::stream::iter(events.into_iter().map(Ok))
                .chain(futures_util::stream::pending())
                .boxed()),
            None => Ok(futures_util::stream::pending().boxed()),
        }
    }
}

/// 10% ADDED, 80% MODIFIED, 10% DELETED over `n` pods.
fn events(n: usize) -> Vec<WatchEvent<Pod>> {
    let pods: Vec<Pod> = (0..n / 10)
        .map(|i| serde_json::from_value(realistic_pod(i)).unwrap())
        .collect();
    let mut out = Vec::with_capacity(n);
    for (i, pod) in pods.iter().enumerate() {
        let mut pod = pod.clone();
        pod.metadata.resource_version = Some(format!("{}", 10 + i));
        out.push(WatchEvent::Added(pod));
    }
    for round in 0..8 {
        for (i, pod) in pods.iter().enumerate() {
            let mut pod = pod.clone();
            pod.metadata.resource_version = Some(format!("{}", 1_000_000 * (round + 1) + i));
            out.push(WatchEvent::Modified(pod));
        }
    }
    for pod in &pods {
        out.push(WatchEvent::Deleted(pod.clone()));
    }
    out
}

async fn events_per_second(n: usize, handlers: usize) {
    let source = Replay(Mutex::new(Some(events(n))));
    let options =
        InformerOptions::default().reflector(ReflectorOptions::default().streaming_lists(false));
    let informer = SharedIndexInformer::new(source, options);
    let count = Arc::new(AtomicUsize::new(0));
    for _ in 0..handlers {
        informer.add_event_handler(counting(&count), HandlerOptions::default());
    }
    let cancel = CancellationToken::new();
    let started = Instant::now();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    while count.load(Ordering::Relaxed) < n * handlers {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = started.elapsed();
    println!(
        "{n} pre-decoded events to K={handlers} counting handlers: {took:.2?} = {:.0} events/s ({:.0} handler calls/s)",
        n as f64 / took.as_secs_f64(),
        (n * handlers) as f64 / took.as_secs_f64()
    );
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    for &n in if quick {
        &[10_000][..]
    } else {
        &[10_000, 100_000][..]
    } {
        time_to_synced(n).await;
    }
    let n = if quick { 20_000 } else { 100_000 };
    for k in [1, 10] {
        events_per_second(n, k).await;
    }
}
