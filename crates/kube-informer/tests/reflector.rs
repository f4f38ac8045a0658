//! The reflector against fake-apiserver over loopback HTTP: each behaviour with its fault,
//! the requests the server saw, and the final cache.

use std::{collections::BTreeMap, convert::Infallible, sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, Fault, Gvr, RequestRecord, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_informer::{
    Store,
    fifo::{DeltaQueue, ProcessError, RealFifo},
    informer::apply_deltas,
    list_watch::{ListPage, ListerWatcher},
    reflector::{Reflector, ReflectorError, ReflectorOptions},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn cms() -> Gvr {
    Gvr::core("configmaps")
}

/// A server, a reflector on `demo` config maps feeding a RealFifo, and a loop applying the
/// FIFO to a store (what the informer will do).
struct Harness {
    server: Arc<FakeApiServer>,
    store: Store<ConfigMap>,
    errors: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    reflector: tokio::task::JoinHandle<()>,
}

/// Fast retries for tests; everything else as in production.
fn fast() -> ReflectorOptions {
    ReflectorOptions::default().backoff(
        Duration::from_millis(10),
        Duration::from_millis(50),
        Duration::from_secs(120),
    )
}

async fn server(config: ServerConfig) -> Arc<FakeApiServer> {
    let server = FakeApiServer::start(config.namespaces(["demo"]))
        .await
        .unwrap();
    Arc::new(server)
}

fn seed(server: &FakeApiServer, names: impl IntoIterator<Item = String>) {
    for name in names {
        server
            .create(
                &cms(),
                Some("demo"),
                json!({"metadata": {"name": name}, "data": {"v": "1"}}),
            )
            .unwrap();
    }
}

impl Harness {
    async fn start(server: Arc<FakeApiServer>, options: ReflectorOptions) -> Self {
        let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
        Self::start_with(server, api, options).await
    }

    async fn start_with(
        server: Arc<FakeApiServer>,
        lw: impl ListerWatcher<ConfigMap>,
        options: ReflectorOptions,
    ) -> Self {
        let store = Store::default();
        let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
        let reflector = Arc::new(Reflector::new(lw, fifo.clone(), options));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let seen = errors.clone();
        reflector.set_error_handler(move |e: &ReflectorError| seen.lock().push(e.to_string()));
        let cancel = CancellationToken::new();
        let running = {
            let (reflector, cancel) = (reflector.clone(), cancel.clone());
            tokio::spawn(async move { reflector.run(cancel).await })
        };
        tokio::spawn({
            let (store, fifo) = (store.clone(), fifo.clone());
            async move {
                loop {
                    let popped = fifo
                        .pop(|deltas, initial| {
                            apply_deltas(&store, deltas, initial);
                            Ok::<(), ProcessError<Infallible>>(())
                        })
                        .await;
                    if popped.is_err() {
                        return;
                    }
                }
            }
        });
        Self {
            server,
            store,
            errors,
            cancel,
            reflector: running,
        }
    }

    /// name -> resourceVersion, as the server has them.
    fn truth(&self) -> BTreeMap<String, String> {
        let objects = self.server.list(&cms()).unwrap();
        objects
            .iter()
            .map(|o| {
                (
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                    o["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                )
            })
            .collect()
    }

    fn cached(&self) -> BTreeMap<String, String> {
        let objects = self.store.list();
        objects
            .iter()
            .map(|o| {
                (
                    o.metadata.name.clone().unwrap(),
                    o.metadata.resource_version.clone().unwrap(),
                )
            })
            .collect()
    }

    /// Waits until the cache equals the server's state (the bound only guards a hang).
    async fn converge(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while tokio::time::Instant::now() < deadline {
            if self.cached() == self.truth() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!(
            "never converged:\ncache  {:?}\nserver {:?}\nerrors {:?}",
            self.cached(),
            self.truth(),
            self.errors.lock()
        );
    }

    /// Waits until the reflector has a watch open (the bound only guards a hang).
    async fn watching(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while tokio::time::Instant::now() < deadline {
            if self.server.watch_count(&cms()) > 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!(
            "the reflector never started watching: {:?}",
            self.errors.lock()
        );
    }

    fn requests(&self, verb: Verb) -> Vec<RequestRecord> {
        let all = self.server.requests();
        all.into_iter()
            .filter(|r| r.verb == Some(verb) && r.resource.as_deref() == Some("configmaps"))
            .collect()
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(Duration::from_secs(60), self.reflector)
            .await
            .expect("run returns when cancelled")
            .unwrap();
    }
}

#[path = "reflector/backoff.rs"]
mod backoff;
use crate::common;
#[path = "reflector/faults.rs"]
mod faults;
#[path = "reflector/objects.rs"]
mod objects;
#[path = "reflector/scripted.rs"]
mod scripted;
#[path = "reflector/sync.rs"]
mod sync;
