//! A fleet controller under a manager, as an operator runs it: a shutdown (SIGTERM's
//! graceful token) lets a reconcile in flight finish its steps within the drain timeout;
//! the generated RBAC covers the fleet's hub side when its source and hub relations are
//! built on the manager's factory; a dropped `FleetController::run` leaves no handler on
//! the hub's informer.

use crate::common;

use std::{sync::Arc, time::Duration};

use common::{fleet_member as member, until};
use fake_apiserver::{FakeApiServer, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube_informer::{ObjectKey, factory::FactoryOptions};
use kube_informer_runtime::{
    CancellationToken, Manager, ManagerOptions,
    controller::{Action, Cached, ControllerOptions},
    fleet::{Cluster, Fleet, FleetController, sources},
    rbac::Verb,
};
use parking_lot::Mutex;
use serde_json::json;

type Steps = Arc<Mutex<Vec<String>>>;

/// Two steps with an await between them: the second runs only after the shutdown began.
async fn two_steps(
    cm: Cached<ConfigMap>,
    ctx: Arc<(Steps, CancellationToken)>,
) -> Result<Action, kube::Error> {
    if let Cached::Present(cm) = cm {
        let (steps, shutdown) = (&ctx.0, &ctx.1);
        steps.lock().push(format!("{}: step 1", cm.name_any()));
        shutdown.cancelled().await;
        // Work that takes a while after the signal (an aborted reconcile never gets here).
        tokio::time::sleep(Duration::from_millis(200)).await;
        steps.lock().push(format!("{}: step 2", cm.name_any()));
    }
    Ok(Action::Done)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_lets_a_fleet_reconcile_finish_within_the_drain_timeout() {
    let hub = member(&[]).await;
    let east = member(&["job"]).await;
    let mut manager = Manager::new(hub.client().unwrap(), ManagerOptions::for_tests())
        .await
        .unwrap();
    let fleet = Fleet::new(FactoryOptions::default());
    let (clusters, source) = sources::from_code();
    manager.add_fleet(&fleet, source);
    let options = ControllerOptions::default()
        .name("fleet-drain")
        .drain_timeout(Some(Duration::from_secs(20)));
    let steps = Steps::default();
    let graceful = CancellationToken::new();
    let ctx = Arc::new((steps.clone(), graceful.clone()));
    manager.add_fleet_controller(
        FleetController::<ConfigMap>::new(&fleet, options),
        move |_: &Cluster| ctx.clone(),
        two_steps,
        |_, _, _| Action::Retry,
    );
    clusters.engage("east", east.client().unwrap());
    let running = tokio::spawn({
        let graceful = graceful.clone();
        async move { manager.run_until(graceful, CancellationToken::new()).await }
    });
    until("the reconcile's first step", || {
        steps.lock().iter().any(|s| s == "job: step 1")
    })
    .await;
    graceful.cancel(); // SIGTERM
    running.await.unwrap().unwrap();
    assert_eq!(
        *steps.lock(),
        ["job: step 1", "job: step 2"],
        "the reconcile in flight was not drained"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_generated_rbac_covers_the_fleets_hub_side() {
    let hub = FakeApiServer::start(ServerConfig::default().namespaces(["capi", "templates"]))
        .await
        .unwrap();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusters.cluster.x-k8s.io"},
        "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
            "names": {"kind": "Cluster", "plural": "clusters"},
            "versions": [{"name": "v1beta2", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    let crds = fake_apiserver::Gvr::new("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    hub.create(&crds, None, crd).unwrap();
    let mut manager = Manager::new(hub.client().unwrap(), ManagerOptions::for_tests())
        .await
        .unwrap();
    let source = sources::cluster_api(manager.factory(), Some("capi"))
        .await
        .unwrap();
    let fleet = Fleet::new(FactoryOptions::default());
    manager.add_fleet(&fleet, source);
    let templates = manager.factory().informer_with::<ConfigMap>(
        kube_informer::factory::InformerSpec::new()
            .selectors(kube_informer::Selectors::default().in_namespace("templates")),
    );
    let controller = FleetController::<ConfigMap>::new(&fleet, ControllerOptions::default())
        .watches_hub(&templates, |t: &ConfigMap| {
            vec![ObjectKey::new(Some("apps"), &t.name_any())]
        });
    manager.add_fleet_controller(
        controller,
        |_| Arc::new(()),
        |_: Cached<ConfigMap>, _: Arc<()>| async { Ok::<_, kube::Error>(Action::Done) },
        |_, _, _| Action::Retry,
    );
    let rules = manager.rbac().permissions();
    let grants = |resource: &str, namespace: &str| {
        rules.iter().any(|p| {
            p.resource == resource
                && p.reach == kube_informer_runtime::rbac::Reach::Namespace(namespace.into())
                && p.verbs.contains(&Verb::List)
                && p.verbs.contains(&Verb::Watch)
        })
    };
    assert!(grants("clusters", "capi"), "{rules:?}");
    assert!(grants("secrets", "capi"), "{rules:?}");
    assert!(grants("configmaps", "templates"), "{rules:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_fleet_controller_leaves_no_handler_on_the_hub() {
    let hub = member(&["template"]).await;
    let factory = kube_informer::factory::SharedInformerFactory::new(
        hub.client().unwrap(),
        FactoryOptions::default(),
    );
    let templates = factory.informer::<ConfigMap>();
    factory.start();
    let fleet = Fleet::new(FactoryOptions::default());
    let controller = FleetController::<ConfigMap>::new(&fleet, ControllerOptions::default())
        .watches_hub(&templates, |t: &ConfigMap| {
            vec![ObjectKey::new(Some("apps"), &t.name_any())]
        });
    let before = templates.handler_count();
    let run = tokio::spawn(controller.run(
        |_| Arc::new(()),
        |_: Cached<ConfigMap>, _: Arc<()>| async { Ok::<_, kube::Error>(Action::Done) },
        |_, _, _| Action::Retry,
        CancellationToken::new(),
    ));
    until("the hub handler attached", || {
        templates.handler_count() > before
    })
    .await;
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    assert_eq!(templates.handler_count(), before, "a handler left behind");
    factory.shutdown().await;
}
