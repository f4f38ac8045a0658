//! A network partition longer than the compaction interval: the informer's watch goes
//! silent, the versions it knew are compacted away, and after the partition heals it gets
//! 410, relists, and ends equal to the server, deletes made meanwhile included.

use std::time::Duration;

use e2e::{
    Backend, BackendOptions, Churn, Running, assert_cache_matches, both, churn, ensure_namespace,
    quick,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

const COMPACTION: Duration = Duration::from_secs(2);

fn options() -> BackendOptions {
    BackendOptions {
        compaction: Some(COMPACTION),
        uncached: vec!["configmaps"],
        ..Default::default()
    }
}

async fn a_partition_past_compaction_relists_and_converges(backend: Backend) {
    ensure_namespace(&backend.client(), "partition").await;
    let api: Api<ConfigMap> = Api::namespaced(backend.client(), "partition");
    churn(
        &api,
        Churn {
            writes: 60,
            ..Churn::default()
        },
    )
    .await;
    let informer_options = quick()
        .idle_timeout(Duration::from_secs(3))
        .watch_open_timeout(Duration::from_secs(3))
        .list_timeout(Duration::from_secs(5));
    let running = Running::start(backend.informer_client(), "partition", informer_options).await;
    let before = backend
        .requests_for("configmaps", "partition")
        .iter()
        .filter(|r| r.is_sync())
        .count();
    backend.partition();
    // Longer than the idle limit: the informer gives up on its silent watch and its new
    // requests hang in the partition.
    tokio::time::sleep(Duration::from_secs(4)).await;
    churn(
        &api,
        Churn {
            seed: 9,
            writes: 80,
            ..Churn::default()
        },
    )
    .await;
    backend.compact(COMPACTION).await;
    let fence = churn(
        &api,
        Churn {
            seed: 5,
            writes: 20,
            ..Churn::default()
        },
    )
    .await;
    backend.heal();
    assert_cache_matches(backend.name(), &running.store(), &api, &fence).await;
    let after = backend
        .requests_for("configmaps", "partition")
        .iter()
        .filter(|r| r.is_sync())
        .count();
    assert!(
        after > before,
        "{}: relisted after the partition",
        backend.name()
    );
    let failures = running.failures.lock().clone();
    assert!(
        failures
            .iter()
            .any(|f| f.contains("410") || f.contains("too old") || f.contains("Expired")),
        "{}: the compacted version was reported: {failures:?}",
        backend.name()
    );
    running.stop().await;
}

both!(a_partition_past_compaction_relists_and_converges, options());
