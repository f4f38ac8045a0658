//! An informer of config maps running for a scenario, reading protobuf where the server
//! speaks it.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::{
    ReadOnlyStore,
    informer::{InformerOptions, SharedIndexInformer},
    list_watch::ClientListerWatcher,
    reflector::ReflectorOptions,
};
use parking_lot::Mutex;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// A running informer of the config maps of one namespace, with the failures it reported.
pub struct Running {
    /// The informer.
    pub informer: SharedIndexInformer<ConfigMap>,
    /// Every failure it reported, as text.
    pub failures: Arc<Mutex<Vec<String>>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running")
            .field("informer", &self.informer)
            .finish()
    }
}

/// Reflector options for scenarios: production defaults but quick backoff, so a scenario
/// recovers in seconds.
pub fn quick() -> ReflectorOptions {
    ReflectorOptions::default().backoff(
        Duration::from_millis(100),
        Duration::from_secs(2),
        Duration::from_secs(60),
    )
}

impl Running {
    /// Starts an informer on `namespace` through `client` and waits for its first sync.
    pub async fn start(
        client: kube::Client,
        namespace: &str,
        options: ReflectorOptions,
    ) -> Running {
        // Protobuf, which both servers speak for ConfigMaps (the JSON path is the default
        // informers' and is covered by the other scenarios).
        let source =
            ClientListerWatcher::<ConfigMap>::new(client, Some(namespace), &()).protobuf(true);
        let informer =
            SharedIndexInformer::new(source, InformerOptions::default().reflector(options));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let seen = failures.clone();
        informer.on_error(move |f| seen.lock().push(f.to_string()));
        let cancel = CancellationToken::new();
        let task = tokio::spawn({
            let (informer, cancel) = (informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        if let Err(err) = informer.wait_for_sync(Duration::from_secs(60)).await {
            panic!("the informer did not sync: {err}");
        }
        Running {
            informer,
            failures,
            cancel,
            task,
        }
    }

    /// The cache.
    pub fn store(&self) -> ReadOnlyStore<ConfigMap> {
        self.informer.store()
    }

    /// Stops the informer.
    pub async fn stop(self) {
        self.cancel.cancel();
        self.task.await.expect("the informer's task ends");
    }
}
