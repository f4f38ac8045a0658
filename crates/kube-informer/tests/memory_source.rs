//! The in-memory source with a real informer, no HTTP: it lists, watches from any
//! version, answers 410 after `expire`, and lags on demand.

use crate::common;

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

fn cm_in(namespace: &str, name: &str) -> ConfigMap {
    let mut cm = cm(name, "1");
    cm.metadata.namespace = Some(namespace.into());
    cm
}

/// One informer over two namespaces (one watch each, so two version sequences): the cache
/// never claims a resourceVersion one namespace has not reached. Namespace a races ahead
/// while b's watch lags behind a write: neither wait returns until b's object is cached.
#[tokio::test]
async fn a_two_namespace_cache_never_claims_a_version_one_namespace_has_not_reached() {
    use futures_util::FutureExt;
    let (a, b) = (
        MemorySource::<ConfigMap>::default(),
        MemorySource::default(),
    );
    b.add(cm_in("b", "first"));
    b.add(cm_in("b", "second"));
    let sources = [("a".to_owned(), a.clone()), ("b".to_owned(), b.clone())];
    let informer = SharedIndexInformer::new_in_namespaces(sources, InformerOptions::default());
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    informer
        .wait_for_sync(Duration::from_secs(10))
        .await
        .unwrap();
    let store = informer.store();
    b.hold(); // b's watch lags: the write lands, the cache does not see it yet
    let written = b.add(cm_in("b", "mine"));
    let wrote_at = written.metadata.resource_version.clone().unwrap();
    let mut newest = String::new();
    for n in 0..10 {
        newest = a
            .add(cm_in("a", &format!("other-{n}")))
            .metadata
            .resource_version
            .unwrap();
    }
    until("a's writes are cached", || {
        store.resource_version_in("a").as_deref() == Some(newest.as_str())
    })
    .await;
    assert!(store.get_by_key("b/mine").is_none(), "b's watch is held");
    let claimed = store.resource_version();
    assert!(
        claimed.parse::<u64>().unwrap() < wrote_at.parse::<u64>().unwrap(),
        "the cache claims {claimed}, but b has not reached {wrote_at}"
    );
    assert!(
        store
            .wait_for_resource_version(&wrote_at)
            .now_or_never()
            .is_none(),
        "returned before b's write was cached"
    );
    assert!(
        store
            .wait_for_resource_version_in("b", &wrote_at)
            .now_or_never()
            .is_none(),
        "returned before b's write was cached"
    );
    b.release();
    store
        .wait_for_resource_version_in("b", &wrote_at)
        .await
        .unwrap();
    assert!(store.get_by_key("b/mine").is_some(), "read your write in b");
    store.wait_for_resource_version(&wrote_at).await.unwrap();
    assert_eq!(
        store.wait_for_resource_version_in("c", "1").await,
        Err(kube_informer::store::VersionError::NotWatched("c".into()))
    );
    cancel.cancel();
    task.await.unwrap();
}
