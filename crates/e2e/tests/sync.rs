//! First sync, both ways, against both servers: the cache equals a fresh LIST, and the
//! requests are the ones client-go 1.36 would make.

use e2e::{
    Backend, Churn, Running, assert_cache_matches, both, churn, config_map, ensure_namespace, quick,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

async fn seed(backend: &Backend, namespace: &str, n: usize) -> Api<ConfigMap> {
    ensure_namespace(&backend.client(), namespace).await;
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), namespace);
    for i in 0..n {
        api.create(
            &PostParams::default(),
            &config_map(&format!("seed-{i}"), "0"),
        )
        .await
        .expect("a create");
    }
    api
}

/// A streaming list (`sendInitialEvents`) and no LIST at all.
async fn first_sync_by_streaming_list(backend: Backend) {
    let api = seed(&backend, "streaming", 30).await;
    let running = Running::start(backend.informer_client(), "streaming", quick()).await;
    let requests = backend.requests_for("configmaps", "streaming");
    let syncs: Vec<_> = requests.iter().filter(|r| r.is_sync()).collect();
    assert_eq!(syncs.len(), 1, "{}: {syncs:?}", backend.name());
    assert!(
        syncs[0].send_initial_events,
        "{}: {syncs:?}",
        backend.name()
    );
    assert!(
        !requests.iter().any(|r| r.verb == "list"),
        "{}: no LIST",
        backend.name()
    );
    let fence = churn(
        &api,
        Churn {
            writes: 0,
            ..Churn::default()
        },
    )
    .await;
    assert_cache_matches(backend.name(), &running.store(), &api, &fence).await;
    running.stop().await;
}

both!(first_sync_by_streaming_list);

/// Streaming off and a consistent first list: LIST pages of 10 with continue tokens.
async fn first_sync_by_paged_list(backend: Backend) {
    let api = seed(&backend, "paged", 35).await;
    let options = quick()
        .streaming_lists(false)
        .consistent_first_list(true)
        .page_size(10);
    let running = Running::start(backend.informer_client(), "paged", options).await;
    let lists: Vec<_> = backend
        .requests_for("configmaps", "paged")
        .into_iter()
        .filter(|r| r.verb == "list")
        .collect();
    assert_eq!(
        lists.len(),
        4,
        "{}: 35 objects in pages of 10: {lists:?}",
        backend.name()
    );
    assert!(lists.iter().all(|l| l.limit == Some(10)), "{lists:?}");
    assert_eq!(lists.iter().filter(|l| l.continued).count(), 3, "{lists:?}");
    let fence = churn(
        &api,
        Churn {
            writes: 0,
            ..Churn::default()
        },
    )
    .await;
    assert_cache_matches(backend.name(), &running.store(), &api, &fence).await;
    running.stop().await;
}

both!(first_sync_by_paged_list);

/// Read-your-writes on one informer over two namespaces (one watch each, so two version
/// sequences): after a write in b, waiting for its version in b (or for the cache's, once
/// a has moved past it) means the write is cached; the cache's version is never one a
/// namespace has not reached.
async fn read_your_writes_across_two_namespaces(backend: Backend) {
    use kube_informer::{FactoryOptions, InformerSpec, Selectors, SharedInformerFactory};
    let name = backend.name();
    let (a, b) = (
        seed(&backend, "ryw-a", 3).await,
        seed(&backend, "ryw-b", 3).await,
    );
    let factory = SharedInformerFactory::new(backend.informer_client(), FactoryOptions::default());
    let informer = factory.informer_with::<ConfigMap>(
        InformerSpec::new().selectors(Selectors::default().in_namespaces(["ryw-a", "ryw-b"])),
    );
    factory.start();
    factory
        .wait_for_sync(std::time::Duration::from_secs(60))
        .await
        .expect("synced");
    let store = informer.store();
    for round in 0..10 {
        let mine = b
            .create(
                &PostParams::default(),
                &config_map(&format!("mine-{round}"), "0"),
            )
            .await
            .expect("a create");
        let at = mine.metadata.resource_version.clone().unwrap();
        // Well under the real server's one-minute bookmark period: a wait that only the
        // next bookmark ends (the bug this scenario caught) fails instead of passing slowly.
        let hang_guard = std::time::Duration::from_secs(20);
        tokio::time::timeout(hang_guard, store.wait_for_resource_version_in("ryw-b", &at))
            .await
            .expect("b's watch reached the write")
            .unwrap();
        let cached = store.get_by_key(&format!("ryw-b/mine-{round}"));
        assert!(
            cached.is_some(),
            "{name}: round {round}: the write is not cached"
        );
        // a moves past it: then every namespace has reached it.
        a.create(
            &PostParams::default(),
            &config_map(&format!("other-{round}"), "0"),
        )
        .await
        .expect("a create");
        tokio::time::timeout(hang_guard, store.wait_for_resource_version(&at))
            .await
            .expect("every namespace reached the write")
            .unwrap();
        let claimed: u64 = store.resource_version().parse().unwrap();
        let reached = |ns: &str| -> u64 { store.resource_version_in(ns).unwrap().parse().unwrap() };
        assert_eq!(
            claimed,
            reached("ryw-a").min(reached("ryw-b")),
            "{name}: the minimum"
        );
    }
    // The race the cache-wide wait must win without help: a write in b, then one in a, and
    // nobody waits on b first. Waiting for b's write's version needs both watches: a's
    // reaches it with a's later write, b's with b's own. a's watch may deliver first; the
    // wait must still not return before b's write is cached.
    for round in 0..10 {
        let in_b = format!("raced-b-{round}");
        let written = b
            .create(&PostParams::default(), &config_map(&in_b, "0"))
            .await
            .expect("b create");
        a.create(
            &PostParams::default(),
            &config_map(&format!("raced-a-{round}"), "0"),
        )
        .await
        .expect("a create");
        let at = written.metadata.resource_version.clone().unwrap();
        tokio::time::timeout(
            std::time::Duration::from_secs(20),
            store.wait_for_resource_version(&at),
        )
        .await
        .expect("every namespace reached b's write")
        .unwrap();
        assert!(
            store.get_by_key(&format!("ryw-b/{in_b}")).is_some(),
            "{name}: round {round}: the cache claimed {at} before b's write at {at} was cached"
        );
    }
    factory.shutdown().await;
}

both!(read_your_writes_across_two_namespaces);
