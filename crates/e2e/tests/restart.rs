//! The API server restarts mid-churn: the informer relists at the last synced version
//! (never a consistent "" read after its first sync: kubernetes/kubernetes#86430) and ends
//! equal to the server.

use e2e::{
    Backend, Churn, Request, Running, assert_cache_matches, both, churn, ensure_namespace, quick,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

async fn a_restart_relists_at_the_last_synced_version(mut backend: Backend) {
    ensure_namespace(&backend.client(), "restart").await;
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), "restart");
    let running = Running::start(backend.informer_client(), "restart", quick()).await;
    churn(
        &api,
        Churn {
            writes: 100,
            ..Churn::default()
        },
    )
    .await;
    backend.restart().await;
    let fence = churn(
        &api,
        Churn {
            seed: 2,
            writes: 100,
            ..Churn::default()
        },
    )
    .await;
    running
        .store()
        .wait_for_resource_version(&fence)
        .await
        .unwrap();
    // The informer's requests (before the comparison's own LIST).
    let syncs: Vec<_> = backend
        .requests_for("configmaps", "restart")
        .into_iter()
        .filter(Request::is_sync)
        .collect();
    assert_cache_matches(backend.name(), &running.store(), &api, &fence).await;
    assert!(
        syncs.len() >= 2,
        "{}: a relist after the restart: {syncs:?}",
        backend.name()
    );
    let later = &syncs[1..];
    assert!(
        later.iter().all(|s| s
            .resource_version
            .as_deref()
            .is_some_and(|rv| !rv.is_empty())),
        "{}: a relist read \"\" after the first sync: {later:?}",
        backend.name()
    );
    running.stop().await;
}

both!(a_restart_relists_at_the_last_synced_version);
