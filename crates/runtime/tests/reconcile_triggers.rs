//! Which changes reconcile, and when, on a paused clock over in-memory sources:
//! per-relation predicates and the controller-wide event filter (an update either fails
//! reconciles nothing; one they pass reconciles the owner; adds always do), and the
//! debounce (a burst of changes is one reconcile, once the key has been quiet), the
//! priority of live changes, and a `watches_changes` map that sees old and new at once.

use std::{sync::Arc, time::Duration};

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube_informer::{
    ObjectKey,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
    list_watch::MemorySource,
};
use kube_informer_runtime::{
    CancellationToken,
    controller::{Action, Cached, Change, Controller, ControllerOptions, Relation, predicate},
};
use parking_lot::Mutex;
use serde_json::{Value, json};

fn owner(annotations: Value, data: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": "owner", "namespace": "shop", "uid": "o-1", "annotations": annotations},
        "data": {"v": data}
    }))
    .unwrap()
}

fn child(labels: Value, annotations: Value, data: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": "child", "namespace": "shop", "labels": labels, "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                                          "uid": "o-1", "controller": true}]},
        "stringData": {"v": data}
    }))
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_relations_predicate_and_the_event_filter_drop_the_updates_they_fail() {
    let (owners, children) = (
        MemorySource::<ConfigMap>::default(),
        MemorySource::<Secret>::default(),
    );
    owners.add(owner(json!({}), "1"));
    children.add(child(json!({"tier": "a"}), json!({}), "1"));
    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let factory = SharedInformerFactory::new(
        kube::Client::try_from(nowhere).unwrap(),
        FactoryOptions::default(),
    );
    factory.informer_with::<ConfigMap>(InformerSpec::new().list_watcher(owners.clone()));
    factory.informer_with::<Secret>(InformerSpec::new().list_watcher(children.clone()));
    let reconciles = Arc::new(Mutex::new(0usize));
    let counted = reconciles.clone();
    let controller =
        Controller::<ConfigMap>::new(&factory, ControllerOptions::default().name("filters"))
            // Only a child's label changes matter...
            .owns_with::<Secret>(Relation::new().predicate(predicate::labels()))
            // ...and no update that changes annotations, of any kind.
            .event_filter(|old, new| old.annotations == new.annotations);
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |_: Cached<ConfigMap>, _: Arc<()>| {
            *counted.lock() += 1;
            async { Ok::<_, kube::Error>(Action::Done) }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    // The clock moves only once everything is idle: a second later, every handler and
    // reconcile the change caused has run.
    let after = |change: &'static str| {
        let reconciles = reconciles.clone();
        async move {
            let before = *reconciles.lock();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let now = *reconciles.lock();
            (change, now - before)
        }
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(*reconciles.lock() >= 1, "the initial adds reconcile");

    children.modify(child(json!({"tier": "a"}), json!({}), "2"));
    assert_eq!(after("a child's data").await, ("a child's data", 0));
    children.modify(child(json!({"tier": "b"}), json!({}), "2"));
    assert_eq!(after("a child's labels").await, ("a child's labels", 1));
    owners.modify(owner(json!({}), "2"));
    assert_eq!(after("the owner's data").await, ("the owner's data", 1));
    owners.modify(owner(json!({"note": "x"}), "2"));
    assert_eq!(
        after("the owner's annotations").await,
        ("the owner's annotations", 0)
    );
    children.modify(child(json!({"tier": "c"}), json!({"note": "x"}), "2"));
    assert_eq!(
        after("a child's labels and annotations").await,
        ("a child's labels and annotations", 0),
        "the event filter applies to relations too"
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_debounced_burst_of_changes_is_one_reconcile_after_the_key_is_quiet() {
    let owners = MemorySource::<ConfigMap>::default();
    owners.add(owner(json!({}), "0"));
    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let factory = SharedInformerFactory::new(
        kube::Client::try_from(nowhere).unwrap(),
        FactoryOptions::default(),
    );
    factory.informer_with::<ConfigMap>(InformerSpec::new().list_watcher(owners.clone()));
    let reconciles = Arc::new(Mutex::new(Vec::<String>::new()));
    let counted = reconciles.clone();
    let options = ControllerOptions::default()
        .name("debounced")
        .debounce(Some(Duration::from_secs(1)));
    let controller = Controller::<ConfigMap>::new(&factory, options);
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |cm: Cached<ConfigMap>, _: Arc<()>| {
            if let Cached::Present(cm) = cm {
                let data = cm.data.as_ref().and_then(|d| d.get("v")).cloned();
                counted.lock().push(data.unwrap_or_default());
            }
            async { Ok::<_, kube::Error>(Action::Done) }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    let start = tokio::time::Instant::now();
    // A change every 400 ms, each restarting the key's quiet second.
    for (i, at) in [400, 800, 1200, 1600].into_iter().enumerate() {
        tokio::time::sleep_until(start + Duration::from_millis(at)).await;
        assert!(reconciles.lock().is_empty(), "reconciled during the burst");
        owners.modify(owner(json!({}), &(i + 1).to_string()));
    }
    // Quiet from 1.6 s: not before 2.6 s, then once, with the last state.
    tokio::time::sleep_until(start + Duration::from_millis(2500)).await;
    assert!(
        reconciles.lock().is_empty(),
        "reconciled before a quiet second"
    );
    tokio::time::sleep_until(start + Duration::from_millis(2700)).await;
    assert_eq!(*reconciles.lock(), ["4"]);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(*reconciles.lock(), ["4"], "one reconcile for the burst");
    cancel.cancel();
    run.await.unwrap().unwrap();
}

/// Resyncs are not changes: with a debounce longer than the resync period every key is
/// still reconciled (each resync used to restart the quiet period, so none ever was), and
/// a resync does not postpone a change that is waiting out its quiet period.
#[tokio::test(start_paused = true)]
async fn resyncs_neither_starve_nor_postpone_a_debounced_key() {
    let owners = MemorySource::<ConfigMap>::default();
    let named = |name: &str, v: &str| -> ConfigMap {
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "shop"}, "data": {"v": v}}),
        )
        .unwrap()
    };
    for i in 0..3 {
        owners.add(named(&format!("cm-{i}"), "0"));
    }
    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let factory = SharedInformerFactory::new(
        kube::Client::try_from(nowhere).unwrap(),
        FactoryOptions::default(),
    );
    factory.informer_with::<ConfigMap>(InformerSpec::new().list_watcher(owners.clone()));
    let start = tokio::time::Instant::now();
    // (name, data, milliseconds since the start)
    let reconciles = Arc::new(Mutex::new(Vec::<(String, String, u128)>::new()));
    let counted = reconciles.clone();
    let options = ControllerOptions::default()
        .name("debounced-resyncs")
        .debounce(Some(Duration::from_secs(10)));
    let controller = Controller::<ConfigMap>::new(&factory, options).resync(Duration::from_secs(5));
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |cm: Cached<ConfigMap>, _: Arc<()>| {
            if let Cached::Present(cm) = cm {
                let data = cm.data.as_ref().and_then(|d| d.get("v")).cloned();
                counted.lock().push((
                    cm.metadata.name.clone().unwrap_or_default(),
                    data.unwrap_or_default(),
                    start.elapsed().as_millis(),
                ));
            }
            async { Ok::<_, kube::Error>(Action::Done) }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    tokio::time::sleep_until(start + Duration::from_secs(11)).await;
    for i in 0..3 {
        let name = format!("cm-{i}");
        let first = reconciles.lock().iter().find(|r| r.0 == name).map(|r| r.2);
        assert!(
            first.is_some_and(|at| (10_000..10_500).contains(&at)),
            "{name} first reconciled at {first:?} ms: the initial add's quiet period is 10 s, \
             and resyncs every 5 s must not restart it"
        );
    }
    // A change at 12 s is due at 22 s; the resyncs at 15 s and 20 s leave it there.
    tokio::time::sleep_until(start + Duration::from_secs(12)).await;
    owners.modify(named("cm-0", "1"));
    tokio::time::sleep_until(start + Duration::from_secs(30)).await;
    let changed = reconciles
        .lock()
        .iter()
        .find(|r| r.0 == "cm-0" && r.1 == "1")
        .map(|r| r.2);
    assert!(
        changed.is_some_and(|at| (22_000..22_500).contains(&at)),
        "the change was reconciled at {changed:?} ms, not when its quiet period ended (22 s)"
    );
    cancel.cancel();
    run.await.unwrap().unwrap();
}

/// A restart with a backlog: the initial list's keys wait behind live changes, so an object
/// created while the controller works through 50 listed ones is reconciled next, not last.
/// With `prioritize_live_changes(false)`, it waits its turn in one line.
#[tokio::test(start_paused = true)]
async fn a_live_change_goes_before_the_initial_lists_backlog() {
    for prioritize in [true, false] {
        let owners = MemorySource::<ConfigMap>::default();
        for i in 0..50 {
            let cm = json!({"metadata": {"name": format!("cm-{i:02}"), "namespace": "shop"}});
            owners.add(serde_json::from_value(cm).unwrap());
        }
        let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
        let factory = SharedInformerFactory::new(
            kube::Client::try_from(nowhere).unwrap(),
            FactoryOptions::default(),
        );
        factory.informer_with::<ConfigMap>(InformerSpec::new().list_watcher(owners.clone()));
        let order = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = order.clone();
        let options = ControllerOptions::default()
            .name("backlog")
            .workers(1)
            .prioritize_live_changes(prioritize);
        let controller = Controller::<ConfigMap>::new(&factory, options);
        let cancel = CancellationToken::new();
        let run = tokio::spawn(controller.run(
            move |cm: Cached<ConfigMap>, _: Arc<()>| {
                let log = log.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if let Cached::Present(cm) = cm {
                        log.lock()
                            .push(cm.metadata.name.clone().unwrap_or_default());
                    }
                    Ok::<_, kube::Error>(Action::Done)
                }
            },
            |_, _, _| Action::Retry,
            Arc::new(()),
            cancel.clone(),
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
        let done_by_then = order.lock().len();
        assert!(done_by_then < 15, "the backlog is still there");
        let new = json!({"metadata": {"name": "created-live", "namespace": "shop"}});
        owners.add(serde_json::from_value(new).unwrap());
        tokio::time::sleep(Duration::from_secs(10)).await;
        let order = order.lock().clone();
        assert_eq!(order.len(), 51, "each object once: {order:?}");
        let at = order.iter().position(|k| k == "created-live").unwrap();
        if prioritize {
            assert!(
                // At most the reconcile in flight and one taken at that same instant.
                at <= done_by_then + 2,
                "reconciled {at}th, after {done_by_then}: {order:?}"
            );
        } else {
            assert_eq!(at, 50, "one line: it waits behind the backlog");
        }
        cancel.cancel();
        run.await.unwrap().unwrap();
    }
}

fn router(targets: &[&str]) -> ConfigMap {
    let data: serde_json::Map<String, Value> = targets
        .iter()
        .map(|t| (format!("shop/{t}"), json!("")))
        .collect();
    serde_json::from_value(
        json!({"metadata": {"name": "router", "namespace": "routing"}, "data": data}),
    )
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_change_map_sees_old_and_new_and_reconciles_only_what_changed() {
    let (secrets, routers) = (
        MemorySource::<Secret>::default(),
        MemorySource::<ConfigMap>::default(),
    );
    for name in ["a", "b", "c"] {
        secrets.add(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "shop"}}))
                .unwrap(),
        );
    }
    routers.add(router(&["a"]));
    let nowhere = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
    let factory = SharedInformerFactory::new(
        kube::Client::try_from(nowhere).unwrap(),
        FactoryOptions::default(),
    );
    factory.informer_with::<Secret>(InformerSpec::new().list_watcher(secrets.clone()));
    factory.informer_with::<ConfigMap>(InformerSpec::new().list_watcher(routers.clone()));
    let targets = |cm: &ConfigMap| -> Vec<ObjectKey> {
        cm.data
            .iter()
            .flatten()
            .filter_map(|(k, _)| k.parse().ok())
            .collect()
    };
    let controller =
        Controller::<Secret>::new(&factory, ControllerOptions::default().name("routes"))
            .watches_changes(
                Relation::new(),
                move |change: Change<'_, ConfigMap>| match change {
                    Change::Added(cm) | Change::Deleted(cm) => targets(cm),
                    Change::Updated { old, new } => {
                        let (before, after) = (targets(old), targets(new));
                        let added = after.iter().filter(|k| !before.contains(k));
                        let dropped = before.iter().filter(|k| !after.contains(k));
                        added.chain(dropped).cloned().collect()
                    }
                },
            );
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        move |secret: Cached<Secret>, _: Arc<()>| {
            if let Cached::Present(s) = secret {
                log.lock().push(s.metadata.name.clone().unwrap_or_default());
            }
            async { Ok::<_, kube::Error>(Action::Done) }
        },
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    // The clock moves only once everything is idle: a second later, all has run.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let reconciled = |_: &str| {
        let mut names: Vec<String> = std::mem::take(&mut *seen.lock());
        names.sort_unstable();
        names.join(",")
    };
    assert_eq!(
        reconciled("initial"),
        "a,b,c",
        "every secret once, a's route merged in"
    );

    routers.modify(router(&["a", "b"]));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        reconciled("b added"),
        "b",
        "a was routed before and after: not reconciled"
    );
    routers.modify(router(&["b"]));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(reconciled("a dropped"), "a");
    routers.delete(router(&["b"]));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(reconciled("router deleted"), "b");
    cancel.cancel();
    run.await.unwrap().unwrap();
}
