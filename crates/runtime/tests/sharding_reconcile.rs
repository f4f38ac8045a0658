//! A shard's controller through `reconcile_sharded` on fake-apiserver: its own objects are
//! reconciled, a drained one is let go (its labels removed) and not reconciled again, an
//! object that moved to another shard is never taken for a deletion, and a real deletion
//! still reaches the reconcile as `Gone` — on the shard that held the object only.

use crate::common;

use std::sync::Arc;

use common::{Recorded, server, until};
use fake_apiserver::Gvr;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
use kube_informer_runtime::{
    controller::{Action, Cached, Controller, ControllerOptions},
    sharding::{drain_label, holder_annotation, reconcile_sharded, shard_label, shard_selectors},
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_reconciles_its_own_lets_go_of_drained_and_tells_moves_from_deletions() {
    let server = server().await;
    let cms = Gvr::core("configmaps");
    let (label, holder) = (shard_label("web"), holder_annotation("web"));
    for i in 0..6 {
        server
            .create(
                &cms,
                Some("shop"),
                json!({"metadata": {"name": format!("cm-{i}"), "labels": {&label: "a"}, "annotations": {&holder: "a"}}}),
            )
            .unwrap();
    }
    // Not this shard's: never seen.
    server
        .create(
            &cms,
            Some("shop"),
            json!({"metadata": {"name": "other", "labels": {&label: "b"}, "annotations": {&holder: "b"}}}),
        )
        .unwrap();

    let client = server.client().unwrap();
    let factory = SharedInformerFactory::new(
        client.clone(),
        FactoryOptions::default().selectors(shard_selectors("web", "a")),
    );
    let controller = Controller::<ConfigMap>::new(
        &factory,
        ControllerOptions::default().name("web").workers(1),
    );
    let seen = Recorded::default();
    let log = seen.clone();
    let reconcile = reconcile_sharded(
        "web",
        "a",
        client.clone(),
        move |cached: Cached<ConfigMap>, _ctx: Arc<()>| {
            let log = log.clone();
            async move {
                log.push(match &cached {
                    Cached::Present(cm) => format!("present {}", cm.metadata.name.clone().unwrap()),
                    Cached::Gone(key) => format!("gone {key}"),
                });
                Ok::<_, kube::Error>(Action::Done)
            }
        },
    );
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        reconcile,
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    until("the shard's objects", || {
        (0..6).all(|i| seen.count(&format!("present cm-{i}")) == 1)
    })
    .await;
    assert_eq!(seen.count("present other"), 0);

    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "shop");
    let labelled = |cm: &ConfigMap, key: &str| {
        cm.metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(key))
    };
    // The sharder drains cm-0: the shard lets go of it, without reconciling it.
    let drain = json!({"metadata": {"labels": {drain_label("web"): "true"}}});
    api.patch("cm-0", &PatchParams::default(), &Patch::Merge(&drain))
        .await
        .unwrap();
    // Someone moves cm-1 to shard b directly.
    let moved = json!({"metadata": {"labels": {&label: "b"}}});
    api.patch("cm-1", &PatchParams::default(), &Patch::Merge(&moved))
        .await
        .unwrap();
    // And cm-2 is deleted for real.
    api.delete("cm-2", &DeleteParams::default()).await.unwrap();

    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let cm0 = api.get("cm-0").await.unwrap();
        if !labelled(&cm0, &label) && !labelled(&cm0, &drain_label("web")) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "cm-0 was never let go: {:?}",
            cm0.metadata.labels
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    until("the deletion", || seen.count("gone shop/cm-2") == 1).await;
    // Both moves have left the cache by now or soon; let the controller settle on them.
    until("the moves left the cache", || {
        let store = factory.informer::<ConfigMap>().store();
        !store.contains_key("shop/cm-0") && !store.contains_key("shop/cm-1")
    })
    .await;
    // A sentinel change after the moves: with one worker the queue is first in, first
    // out, so once it is reconciled the moves' delete events have been through the wrapper.
    let touch = json!({"data": {"touched": "yes"}});
    api.patch("cm-5", &PatchParams::default(), &Patch::Merge(&touch))
        .await
        .unwrap();
    until("the sentinel", || seen.count("present cm-5") == 2).await;
    assert_eq!(
        seen.count("present cm-0"),
        1,
        "a drained object was reconciled: {:?}",
        seen.all()
    );
    assert_eq!(
        seen.count("gone shop/cm-0"),
        0,
        "a move taken for a deletion: {:?}",
        seen.all()
    );
    assert_eq!(
        seen.count("gone shop/cm-1"),
        0,
        "a move taken for a deletion: {:?}",
        seen.all()
    );
    assert_eq!(seen.count("gone shop/cm-2"), 1);

    cancel.cancel();
    run.await.unwrap().unwrap();
}

type Running =
    tokio::task::JoinHandle<Result<(), kube_informer_runtime::controller::ControllerError>>;

/// Runs one shard's controller of ConfigMaps owning Secrets, recording what it reconciles.
fn run_shard(
    client: &kube::Client,
    shard: &'static str,
    cancel: &CancellationToken,
) -> (Running, Recorded) {
    let factory = SharedInformerFactory::new(
        client.clone(),
        FactoryOptions::default().selectors(shard_selectors("web", shard)),
    );
    let controller = Controller::<ConfigMap>::new(
        &factory,
        ControllerOptions::default().name("web").workers(1),
    )
    .owns::<k8s_openapi::api::core::v1::Secret>();
    let seen = Recorded::default();
    let log = seen.clone();
    let reconcile = reconcile_sharded(
        "web",
        shard,
        client.clone(),
        move |cached: Cached<ConfigMap>, _: Arc<()>| {
            let log = log.clone();
            async move {
                log.push(match &cached {
                    Cached::Present(cm) => format!("present {}", cm.metadata.name.clone().unwrap()),
                    Cached::Gone(key) => format!("gone {key}"),
                });
                Ok::<_, kube::Error>(Action::Done)
            }
        },
    );
    let run = controller.run(
        reconcile,
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    );
    (tokio::spawn(run), seen)
}

/// A deleted owner whose child then moves to another shard (a rebalance, while the
/// garbage collector has not yet removed the child): only the shard that held the owner
/// runs its last reconcile. Found by `sharding_schedules.rs`: the child's arrival made the
/// other shard reconcile the deleted owner too, at the same time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_shard_that_held_a_deleted_object_reconciles_its_deletion() {
    let server = server().await;
    let (cms, secrets) = (Gvr::core("configmaps"), Gvr::core("secrets"));
    let (label, holder) = (shard_label("web"), holder_annotation("web"));
    let owner = server
        .create(
            &cms,
            Some("shop"),
            json!({"metadata": {"name": "owner", "labels": {&label: "a"}, "annotations": {&holder: "a"}}}),
        )
        .unwrap();
    let reference = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                           "uid": owner["metadata"]["uid"], "controller": true});
    server
        .create(
            &secrets,
            Some("shop"),
            json!({"metadata": {"name": "child", "labels": {&label: "a"}, "ownerReferences": [reference]}}),
        )
        .unwrap();
    server
        .create(
            &cms,
            Some("shop"),
            json!({"metadata": {"name": "sentinel", "labels": {&label: "b"}, "annotations": {&holder: "b"}}}),
        )
        .unwrap();
    let client = server.client().unwrap();
    let cancel = CancellationToken::new();
    let (run_a, a) = run_shard(&client, "a", &cancel);
    let (run_b, b) = run_shard(&client, "b", &cancel);
    until("a holds the owner", || a.count("present owner") >= 1).await;
    until("b holds the sentinel", || b.count("present sentinel") == 1).await;

    server.delete(&cms, Some("shop"), "owner").unwrap();
    until("a reconciled the deletion", || {
        a.count("gone shop/owner") == 1
    })
    .await;
    // The orphaned child moves to b, as a sharder moves children with their owner's key.
    server
        .patch(
            &secrets,
            Some("shop"),
            "child",
            json!({"metadata": {"labels": {&label: "b"}, "annotations": {&holder: "b"}}}),
        )
        .unwrap();
    // A sentinel change after the move: b's one worker takes its queue in order.
    server
        .patch(
            &cms,
            Some("shop"),
            "sentinel",
            json!({"data": {"touched": "yes"}}),
        )
        .unwrap();
    until("b's sentinel", || b.count("present sentinel") == 2).await;
    assert_eq!(
        b.count("gone shop/owner"),
        0,
        "b reconciled a's deletion: {:?}",
        b.all()
    );
    assert_eq!(a.count("gone shop/owner"), 1, "{:?}", a.all());

    cancel.cancel();
    run_a.await.unwrap().unwrap();
    run_b.await.unwrap().unwrap();
}

/// A sharded controller on a factory limited to namespaces has its kinds placed in those
/// namespaces only (a namespaced operator needs no cluster-wide list or patch); on an
/// unlimited factory, everywhere.
#[tokio::test]
async fn a_sharded_controller_places_its_kinds_in_its_factorys_namespaces() {
    use kube_informer::Selectors;
    use kube_informer_runtime::sharding::Placement;

    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let client = kube::Client::try_from(nowhere).unwrap();
    let placed = |selectors: Selectors| {
        let factory = SharedInformerFactory::new(
            client.clone(),
            FactoryOptions::default().selectors(selectors),
        );
        let controller = Controller::<ConfigMap>::new(
            &factory,
            ControllerOptions::default()
                .name("web")
                .sharded("web", "s0"),
        )
        .owns::<k8s_openapi::api::core::v1::Secret>();
        controller
            .sharded_kinds()
            .iter()
            .map(|k| {
                (
                    k.kind().to_owned(),
                    k.namespace().map(str::to_owned),
                    k.placement(),
                )
            })
            .collect::<Vec<_>>()
    };
    let (own, child) = (Placement::Own, Placement::Controller);
    let ns = |n: &str| Some(n.to_owned());
    assert_eq!(
        placed(Selectors::default().in_namespaces(["a", "b"])),
        [
            ("ConfigMap".to_owned(), ns("a"), own),
            ("ConfigMap".to_owned(), ns("b"), own),
            ("Secret".to_owned(), ns("a"), child),
            ("Secret".to_owned(), ns("b"), child),
        ]
    );
    assert_eq!(
        placed(Selectors::default()),
        [
            ("ConfigMap".to_owned(), None, own),
            ("Secret".to_owned(), None, child),
        ]
    );
}

/// A sharded controller of a scoped primary caches the objects its spec selects *and* its
/// shard holds: the spec's label selector and the shard label both apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_scoped_controller_selects_its_spec_and_its_shard() {
    use kube_informer::{Selectors, factory::InformerSpec};

    let server = server().await;
    let cms = Gvr::core("configmaps");
    let shard = shard_label("web");
    for (name, labels) in [
        ("web-mine", json!({"app": "web", &shard: "s0"})),
        ("web-other-shard", json!({"app": "web", &shard: "s1"})),
        ("not-web-mine", json!({"app": "db", &shard: "s0"})),
    ] {
        let object = json!({"metadata": {"name": name, "labels": labels}});
        server.create(&cms, Some("shop"), object).unwrap();
    }
    let client = server.client().unwrap();
    let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
    let spec =
        InformerSpec::new().selectors(Selectors::default().in_namespace("shop").labels("app=web"));
    let controller = Controller::<ConfigMap>::new_with(
        &factory,
        spec,
        ControllerOptions::default()
            .name("web")
            .sharded("web", "s0"),
    );
    let store = controller.informer().store();
    let placed: Vec<_> = controller
        .sharded_kinds()
        .iter()
        .map(|k| k.namespace().map(str::to_owned))
        .collect();
    assert_eq!(
        placed,
        [Some("shop".to_owned())],
        "placed in the spec's namespace"
    );
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        |_: Cached<ConfigMap>, _: Arc<()>| async { Ok::<_, kube::Error>(Action::Done) },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    until("the cache synced", || !store.is_empty()).await;
    let keys: Vec<String> = store
        .list_keys()
        .into_iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(keys, ["shop/web-mine"]);
    cancel.cancel();
    run.await.unwrap().unwrap();
}
