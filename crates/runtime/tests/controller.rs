//! The runtime's controller against fake-apiserver: owner mapping (orphans, deleted children,
//! deleted owners), predicates that skip status-only updates but never adds and deletes,
//! watched objects mapped to keys, the error policy, and finalizers under conflicts.

use crate::common;

use std::sync::Arc;

use common::{Recorded, deployment, pod, server, until};
use fake_apiserver::Gvr;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Pod},
};
use kube::Api;
use kube_informer::{
    ObjectKey,
    factory::{FactoryOptions, SharedInformerFactory},
};
use kube_informer_runtime::{
    controller::{Action, Cached, Controller, ControllerOptions, predicate},
    finalizer::{Event, finalizer},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Runs a Deployment controller owning Pods; every reconcile is recorded.
fn run_deployments(
    factory: &SharedInformerFactory,
    configure: impl FnOnce(Controller<Deployment>) -> Controller<Deployment>,
) -> (Recorded, CancellationToken) {
    let seen = Recorded::default();
    let controller = configure(
        Controller::<Deployment>::new(factory, ControllerOptions::default().name("deployments"))
            .owns::<Pod>(),
    );
    let cancel = CancellationToken::new();
    let log = seen.clone();
    tokio::spawn(controller.run(
        move |cached: Cached<Deployment>, _ctx: Arc<()>| {
            let log = log.clone();
            async move {
                log.push(match &cached {
                    Cached::Present(d) => format!("present {}", d.metadata.name.clone().unwrap()),
                    Cached::Gone(key) => format!("gone {key}"),
                });
                Ok::<_, kube::Error>(Action::Done)
            }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    (seen, cancel)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_reconcile_their_controller_owner_and_orphans_nothing() {
    let server = server().await;
    let (deploys, pods) = (Gvr::new("apps", "v1", "deployments"), Gvr::core("pods"));
    server
        .create(&deploys, Some("shop"), deployment("web", 1))
        .unwrap();
    let factory = SharedInformerFactory::new(server.client().unwrap(), FactoryOptions::default());
    let (seen, cancel) = run_deployments(&factory, |c| c);
    until("the initial reconcile", || seen.count("present web") == 1).await;
    seen.clear();
    server
        .create(&pods, Some("shop"), pod("web-1", Some("web")))
        .unwrap();
    server
        .create(&pods, Some("shop"), pod("stray", None))
        .unwrap();
    until("the owner of the new pod", || {
        seen.count("present web") >= 1
    })
    .await;
    server.delete(&pods, Some("shop"), "web-1").unwrap();
    until("the owner of the deleted pod", || {
        seen.count("present web") >= 2
    })
    .await;
    server.delete(&deploys, Some("shop"), "web").unwrap();
    until("the owner is gone", || seen.count("gone shop/web") >= 1).await;
    let all = seen.all();
    assert!(
        all.iter().all(|s| s.ends_with("web")),
        "the orphan reconciled nothing: {all:?}"
    );
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generation_predicate_skips_status_updates_never_adds_or_deletes() {
    let server = server().await;
    let deploys = Gvr::new("apps", "v1", "deployments");
    server
        .create(&deploys, Some("shop"), deployment("web", 1))
        .unwrap();
    let factory = SharedInformerFactory::new(server.client().unwrap(), FactoryOptions::default());
    let (seen, cancel) = run_deployments(&factory, |c| c.predicate(predicate::generation()));
    until("the add", || seen.count("present web") == 1).await;
    // Labels only: no new generation, no reconcile. Then a spec change: one.
    server
        .patch(
            &deploys,
            Some("shop"),
            "web",
            json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .unwrap();
    server
        .patch(
            &deploys,
            Some("shop"),
            "web",
            json!({"spec": {"replicas": 5}}),
        )
        .unwrap();
    until("the spec change", || seen.count("present web") == 2).await;
    server
        .create(&deploys, Some("shop"), deployment("api", 1))
        .unwrap();
    server.delete(&deploys, Some("shop"), "web").unwrap();
    until("the add and the delete", || {
        seen.count("present api") == 1 && seen.count("gone shop/web") == 1
    })
    .await;
    assert_eq!(
        seen.count("present web"),
        2,
        "the label change was skipped: {:?}",
        seen.all()
    );
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_objects_map_to_keys() {
    let server = server().await;
    let (deploys, cms) = (
        Gvr::new("apps", "v1", "deployments"),
        Gvr::core("configmaps"),
    );
    server
        .create(&deploys, Some("shop"), deployment("web", 1))
        .unwrap();
    let factory = SharedInformerFactory::new(server.client().unwrap(), FactoryOptions::default());
    // A config map names the deployment it configures in a label.
    let (seen, cancel) = run_deployments(&factory, |c| {
        c.watches::<ConfigMap>(|cm| {
            let target = cm
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("configures"));
            let ns = cm.metadata.namespace.as_deref();
            target.map(|t| ObjectKey::new(ns, t)).into_iter().collect()
        })
    });
    until("the add", || seen.count("present web") == 1).await;
    let cm = json!({"metadata": {"name": "settings", "labels": {"configures": "web"}}});
    server.create(&cms, Some("shop"), cm).unwrap();
    until("the mapped key", || seen.count("present web") == 2).await;
    cancel.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_are_added_cleaned_up_and_removed_once_even_under_conflicts() {
    let server = server().await;
    let cms = Gvr::core("configmaps");
    server
        .create(&cms, Some("shop"), json!({"metadata": {"name": "a"}}))
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "shop");
    let fetch = || async { Arc::new(api.get("a").await.unwrap()) };
    let log = Recorded::default();
    let run = |cm: Arc<ConfigMap>| {
        let log = log.clone();
        let api = api.clone();
        async move {
            finalizer(&api, "example.com/cleanup", cm, |event| async move {
                log.push(match event {
                    Event::Apply(cm) => format!("apply {:?}", cm.metadata.finalizers),
                    Event::Cleanup(_) => "cleanup".to_owned(),
                });
                Ok::<_, kube::Error>(Action::Done)
            })
            .await
        }
    };
    let stale = fetch().await;
    run(stale.clone()).await.unwrap();
    assert_eq!(log.all(), [r#"apply Some(["example.com/cleanup"])"#]);
    // A retry with the stale object: its write is refused (409), nothing is doubled.
    let conflict = run(stale).await.unwrap_err();
    assert!(conflict.is_conflict(), "{conflict}");
    run(fetch().await).await.unwrap();
    let finalizers = fetch().await.metadata.finalizers.clone().unwrap();
    assert_eq!(finalizers, ["example.com/cleanup"], "added once");
    // Deleting: the object stays until the cleanup ran and the finalizer is removed.
    server.delete(&cms, Some("shop"), "a").unwrap();
    let deleting = fetch().await;
    assert!(deleting.metadata.deletion_timestamp.is_some());
    run(deleting.clone()).await.unwrap();
    assert_eq!(log.count("cleanup"), 1);
    assert!(
        api.get_opt("a").await.unwrap().is_none(),
        "gone once the finalizer was removed"
    );
    // A retry with the old object (a stale cache) runs the cleanup again (so keep
    // cleanups idempotent); its removal finds the object gone, which is success.
    run(deleting).await.unwrap();
    assert_eq!(log.count("cleanup"), 2);
}

/// The removal names the object by its name, and a name outlives an object: deleted and
/// made again (a user's `kubectl replace --force`, a GitOps tool) while a cleanup ran,
/// the new object's finalizer must stay, for its own cleanup to run. The removal tests the
/// UID, and a retry that reads a different UID has nothing left to do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removal_never_strips_the_finalizer_of_a_new_object_of_the_same_name() {
    const OURS: &str = "example.com/cleanup";
    let server = server().await;
    let cms = Gvr::core("configmaps");
    let old = json!({"metadata": {"name": "a", "finalizers": ["example.com/other", OURS]}});
    server.create(&cms, Some("shop"), old).unwrap();
    server.delete(&cms, Some("shop"), "a").unwrap();
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "shop");
    // The controller's view of the terminating object...
    let seen = Arc::new(api.get("a").await.unwrap());
    assert!(seen.metadata.deletion_timestamp.is_some());
    // ...then, while its cleanup runs, the object goes and another of its name comes.
    let cleanups = Recorded::default();
    let log = cleanups.clone();
    let server_in_cleanup = server.clone();
    let result = finalizer(&api, OURS, seen, |event| async move {
        if let Event::Cleanup(cm) = event {
            log.push(format!(
                "cleanup {}",
                cm.metadata.uid.clone().unwrap_or_default()
            ));
        }
        let cms = Gvr::core("configmaps");
        let unblock = json!({"metadata": {"finalizers": null}});
        server_in_cleanup
            .patch(&cms, Some("shop"), "a", unblock)
            .unwrap();
        let new = json!({"metadata": {"name": "a", "finalizers": [OURS]}});
        server_in_cleanup.create(&cms, Some("shop"), new).unwrap();
        Ok::<_, kube::Error>(Action::Done)
    })
    .await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(cleanups.all().len(), 1);
    let new = api.get("a").await.unwrap();
    assert!(
        !cleanups.all()[0].ends_with(new.metadata.uid.as_deref().unwrap()),
        "the cleanup was the old object's"
    );
    assert_eq!(
        new.metadata.finalizers.as_deref(),
        Some(&[OURS.to_owned()][..]),
        "the new object's finalizer was removed without its cleanup"
    );
}
