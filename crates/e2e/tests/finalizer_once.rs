//! A controller's finalizer cleans up exactly once per object, with another writer
//! changing each object between the reconcile's read and the finalizer's patch: once
//! while the finalizer is added (the add's resourceVersion check refuses it, the
//! reconcile is retried) and once while the object is deleted (its event queues the key
//! again before the cache has the removal). Seen on the real server before the controller
//! read its own writes: a cleanup ran twice.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use e2e::{Backend, both, ensure_namespace};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
};
use kube_informer::{
    Selectors,
    factory::{FactoryOptions, SharedInformerFactory},
};
use kube_informer_runtime::{
    controller::{Action, Cached, Controller, ControllerOptions},
    finalizer::{Event, finalizer},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NS: &str = "rt-finalizer-once";
const FINALIZER: &str = "e2e.example.com/once";
const OBJECTS: usize = 20;

/// Another writer: an annotation, as a person or another controller would add.
async fn touch(api: &Api<ConfigMap>, name: &str, key: &str) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {"annotations": {key: "yes"}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

async fn a_controllers_cleanup_runs_once_per_object_under_a_concurrent_writer(backend: Backend) {
    let name = backend.name();
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for i in 0..OBJECTS {
        let cm = json!({"metadata": {"name": format!("cm-{i}"), "labels": {"app": "once"}}});
        let cm: ConfigMap = serde_json::from_value(cm).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let selectors = Selectors::default().in_namespace(NS).labels("app=once");
    let factory = SharedInformerFactory::new(
        client.clone(),
        FactoryOptions::default().selectors(selectors),
    );
    let options = ControllerOptions::default().name("once").workers(1);
    let controller = Controller::<ConfigMap>::new(&factory, options);
    let cleanups = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
    let reconcile = {
        let (api, cleanups) = (api.clone(), cleanups.clone());
        move |cm: Cached<ConfigMap>, _: Arc<()>| {
            let (api, cleanups) = (api.clone(), cleanups.clone());
            async move {
                let Cached::Present(cm) = cm else {
                    return Ok(Action::Done);
                };
                let object = cm.name_any();
                // Between this read and the finalizer's add: the add is refused (409) and
                // the reconcile retried with the fresh object.
                if !cm.finalizers().iter().any(|f| f == FINALIZER)
                    && !cm.annotations().contains_key("raced-add")
                {
                    touch(&api, &object, "raced-add")
                        .await
                        .map_err(|e| e.to_string())?;
                }
                let writer = api.clone();
                finalizer(&api, FINALIZER, cm, |event| async move {
                    if let Event::Cleanup(cm) = event {
                        *cleanups.lock().entry(cm.name_any()).or_default() += 1;
                        // Between the cleanup's read and the finalizer's removal.
                        touch(&writer, &cm.name_any(), "raced-delete").await?;
                    }
                    Ok::<_, kube::Error>(Action::Done)
                })
                .await
                .map_err(|e| e.to_string())
            }
        }
    };
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        reconcile,
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    factory.start();
    let all = ListParams::default().labels("app=once");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let finalized = |list: &[ConfigMap]| {
        list.len() == OBJECTS
            && list
                .iter()
                .all(|cm| cm.finalizers().iter().any(|f| f == FINALIZER))
    };
    while !finalized(&api.list(&all).await.unwrap().items) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: the finalizers were never all added"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..OBJECTS {
        api.delete(&format!("cm-{i}"), &DeleteParams::default())
            .await
            .unwrap();
    }
    while !api.list(&all).await.unwrap().items.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: the objects were never all gone"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Anything still queued (the last touches' events) runs before the verdict.
    tokio::time::sleep(Duration::from_secs(2)).await;
    cancel.cancel();
    running.await.unwrap().unwrap();
    factory.shutdown().await;
    let cleanups = cleanups.lock().clone();
    assert_eq!(cleanups.len(), OBJECTS, "{name}: {cleanups:?}");
    let twice: Vec<_> = cleanups.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        twice.is_empty(),
        "{name}: cleaned up more than once: {twice:?}"
    );
}

both!(a_controllers_cleanup_runs_once_per_object_under_a_concurrent_writer);

/// The answer to the write that removes a terminating object's last finalizer (and so
/// deletes it): the object as written, at the resourceVersion it was stored with, not the
/// delete's. Read-your-own-writes relies on it (only the object's absence from the cache
/// shows the deletion was seen), and fake-apiserver answers as kube-apiserver does.
async fn the_last_finalizers_removal_is_answered_at_the_stored_version(backend: Backend) {
    let name = backend.name();
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let api: Api<ConfigMap> = Api::namespaced(client, NS);
    let cm = json!({"metadata": {"name": "last-finalizer", "finalizers": [FINALIZER]}});
    let cm: ConfigMap = serde_json::from_value(cm).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    api.delete("last-finalizer", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = api.get("last-finalizer").await.unwrap();
    let remove = json!({"metadata": {"finalizers": null}});
    let answer = api
        .patch(
            "last-finalizer",
            &PatchParams::default(),
            &Patch::Merge(&remove),
        )
        .await
        .unwrap();
    assert_eq!(
        answer.resource_version(),
        terminating.resource_version(),
        "{name}"
    );
    assert!(answer.finalizers().is_empty(), "{name}");
    assert!(answer.metadata.deletion_timestamp.is_some(), "{name}");
    assert!(
        api.get_opt("last-finalizer").await.unwrap().is_none(),
        "{name}"
    );
}

both!(the_last_finalizers_removal_is_answered_at_the_stored_version);
