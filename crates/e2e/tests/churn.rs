//! Creates, updates and deletes at a steady rate while the informer runs: at the end the
//! cache equals a fresh LIST, key for key, resourceVersion for resourceVersion.

use e2e::{Backend, Churn, Running, assert_cache_matches, both, churn, ensure_namespace, quick};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

async fn churn_converges_exactly(backend: Backend) {
    ensure_namespace(&backend.client(), "churn").await;
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), "churn");
    let running = Running::start(backend.informer_client(), "churn", quick()).await;
    let fence = churn(
        &api,
        Churn {
            writes: 200,
            ..Churn::default()
        },
    )
    .await;
    assert_cache_matches(backend.name(), &running.store(), &api, &fence).await;
    let failures = running.failures.lock().clone();
    assert!(failures.is_empty(), "{}: {failures:?}", backend.name());
    running.stop().await;
}

both!(churn_converges_exactly);
