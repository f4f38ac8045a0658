//! `wait::await_condition` over an informer's cache, on a paused clock: it returns when a
//! change meets the condition (not before), at once when the cache already does, `None` for
//! a deletion, and an error when the informer is not running or stops.

use std::time::Duration;

use k8s_openapi::api::{apps::v1::Deployment, batch::v1::Job, core::v1::Pod};
use kube_informer::{
    ObjectKey,
    informer::{InformerOptions, SharedIndexInformer},
    list_watch::MemorySource,
};
use kube_informer_runtime::{
    CancellationToken,
    wait::{Condition, WaitError, await_condition, conditions},
};
use serde_json::json;

fn pod(phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-0", "namespace": "shop", "uid": "u-1"},
        "status": {"phase": phase}
    }))
    .unwrap()
}

/// An informer over `source`, running until the token is cancelled.
fn running(
    source: &MemorySource<Pod>,
) -> (
    SharedIndexInformer<Pod>,
    CancellationToken,
    tokio::task::JoinHandle<()>,
) {
    let informer = SharedIndexInformer::new(source.clone(), InformerOptions::default());
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    (informer, cancel, task)
}

#[tokio::test(start_paused = true)]
async fn it_returns_when_a_change_meets_the_condition_and_not_before() {
    let source = MemorySource::<Pod>::default();
    source.add(pod("Pending"));
    let (informer, cancel, task) = running(&source);
    let key = ObjectKey::new(Some("shop"), "web-0");
    let waiting = tokio::spawn({
        let (informer, key) = (informer.clone(), key.clone());
        async move { await_condition(&informer, &key, conditions::is_pod_running()).await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!waiting.is_finished(), "returned while the pod was Pending");
    source.modify(pod("Running"));
    let found = waiting.await.unwrap().unwrap().expect("the pod");
    assert_eq!(
        found.status.as_ref().unwrap().phase.as_deref(),
        Some("Running")
    );

    // Already met: at once.
    let now = await_condition(&informer, &key, conditions::is_pod_running())
        .await
        .unwrap();
    assert!(now.is_some());

    // A deletion meets `is_deleted`, with no object to return.
    let gone = tokio::spawn({
        let (informer, key) = (informer.clone(), key.clone());
        async move { await_condition(&informer, &key, conditions::is_deleted(Some("u-1".into()))).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!gone.is_finished());
    source.delete(pod("Running"));
    assert!(gone.await.unwrap().unwrap().is_none());
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_informer_not_running_or_stopping_is_an_error_not_a_hang() {
    let source = MemorySource::<Pod>::default();
    let key = ObjectKey::new(Some("shop"), "web-0");
    let idle = SharedIndexInformer::new(source.clone(), InformerOptions::default());
    let error = await_condition(&idle, &key, conditions::is_pod_running()).await;
    assert!(matches!(error, Err(WaitError::NotRunning(_))), "{error:?}");

    let (informer, cancel, task) = running(&source);
    let waiting = tokio::spawn(async move {
        await_condition(&informer, &key, conditions::is_pod_running()).await
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    cancel.cancel();
    task.await.unwrap();
    let error = waiting.await.unwrap();
    assert!(matches!(error, Err(WaitError::Stopped(_))), "{error:?}");
}

#[test]
fn conditions_read_what_kubectl_reads_and_combine() {
    let deployment = |generation: i64, observed: i64, updated: i32, total: i32, available: i32| {
        serde_json::from_value::<Deployment>(json!({
            "metadata": {"name": "web", "generation": generation},
            "spec": {"replicas": 3, "selector": {}, "template": {}},
            "status": {"observedGeneration": observed, "updatedReplicas": updated,
                       "replicas": total, "availableReplicas": available}
        }))
        .unwrap()
    };
    let complete = conditions::is_deployment_complete();
    assert!(complete.matches(Some(&deployment(2, 2, 3, 3, 3))));
    assert!(
        !complete.matches(Some(&deployment(2, 1, 3, 3, 3))),
        "spec not seen yet"
    );
    assert!(
        !complete.matches(Some(&deployment(2, 2, 2, 3, 3))),
        "an old replica left"
    );
    assert!(
        !complete.matches(Some(&deployment(2, 2, 3, 4, 3))),
        "an old replica left"
    );
    assert!(
        !complete.matches(Some(&deployment(2, 2, 3, 3, 2))),
        "one not available"
    );
    assert!(!complete.matches(None));

    let job = |kind: &str, status: &str| {
        serde_json::from_value::<Job>(json!({
            "metadata": {"name": "j"},
            "status": {"conditions": [{"type": kind, "status": status}]}
        }))
        .unwrap()
    };
    assert!(conditions::is_job_completed().matches(Some(&job("Complete", "True"))));
    assert!(!conditions::is_job_completed().matches(Some(&job("Failed", "True"))));

    let crd = |status: &str| {
        serde_json::from_value::<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>(json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"plural": "widgets", "kind": "Widget"},
                     "scope": "Namespaced", "versions": []},
            "status": {"conditions": [{"type": "Established", "status": status}]}
        }))
        .unwrap()
    };
    assert!(conditions::is_crd_established().matches(Some(&crd("True"))));
    assert!(!conditions::is_crd_established().matches(Some(&crd("False"))));

    let running = conditions::is_pod_running();
    let either = conditions::is_pod_running().or(conditions::is_deleted(None));
    assert!(either.matches(None) && !running.matches(None));
    assert!(running.matches(Some(&pod("Running"))));
    let pending = conditions::is_pod_running().not();
    assert!(pending.matches(Some(&pod("Pending"))));
    let both = conditions::is_pod_running()
        .and(|p: Option<&Pod>| p.is_some_and(|p| p.metadata.uid.is_some()));
    assert!(both.matches(Some(&pod("Running"))));
}
