//! The in-memory source with a real informer, no HTTP: it lists, watches from any
//! version, answers 410 after `expire`, and lags on demand.

mod common;

use std::time::Duration;

use common::until;
use k8s_openapi::api::core::v1::ConfigMap;
use kube_informer::{
    informer::{InformerOptions, SharedIndexInformer},
    list_watch::MemorySource,
    reflector::ReflectorOptions,
};
use tokio_util::sync::CancellationToken;

fn cm(name: &str, v: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.namespace = Some("demo".into());
    cm.data = Some([("v".to_owned(), v.to_owned())].into());
    cm
}

#[tokio::test]
async fn an_informer_follows_a_memory_source_through_expiry_and_lag() {
    let source = MemorySource::<ConfigMap>::default();
    source.add(cm("a", "1"));
    let fast = ReflectorOptions::default().backoff(
        Duration::from_millis(5),
        Duration::from_millis(20),
        Duration::from_secs(60),
    );
    let informer =
        SharedIndexInformer::new(source.clone(), InformerOptions::default().reflector(fast));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    informer
        .wait_for_sync(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(informer.store().len(), 1);
    // Lag: writes land in the source, the cache sees them on release.
    source.hold();
    source.add(cm("b", "1"));
    source.modify(cm("a", "2"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(informer.store().len(), 1, "held back");
    source.release();
    until("released", || informer.store().len() == 2).await;
    // History gone while disconnected: the informer relists and converges, deletes included.
    source.close_watches();
    source.expire();
    let a = source.get("demo/a").unwrap();
    source.delete(a);
    source.add(cm("c", "1"));
    until("converged after the 410", || {
        let keys = informer.store().list_keys();
        keys.len() == 2 && !informer.store().contains_key("demo/a")
    })
    .await;
    assert_eq!(
        informer.store().resource_version(),
        source.resource_version()
    );
    cancel.cancel();
    task.await.unwrap();
}
