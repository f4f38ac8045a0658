//! Read your own writes, on a paused clock over fake-apiserver's in-memory client with a
//! watch that lags (`Fault::SlowWatch`): a reconcile queued again right after its write
//! reads a cache that has the write. Each test also runs the controller with the wait
//! turned off, to show that the lag breaks it there (the test's condition is real).

use std::{sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, Fault, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{
    Api, ResourceExt,
    api::{Patch, PatchParams, PostParams},
};
use kube_informer::{
    compact::Compact,
    factory::{FactoryOptions, InformerSpec, SharedInformerFactory},
};
use kube_informer_runtime::{
    controller::{Action, Cached, Controller, ControllerOptions, recording_client, wrote},
    finalizer::{Event, finalizer},
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const LAG: Duration = Duration::from_millis(50);
const CHILDREN: usize = 100;

/// A server whose next `watches` watches lag, and a factory on its in-memory client.
async fn lagging(watches: usize) -> (FakeApiServer, SharedInformerFactory) {
    // Decoding on the runtime's threads: nothing runs beside the paused clock.
    let _ = kube_informer::list_watch::set_decoding_threads(0);
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["shop"]))
        .await
        .unwrap();
    for _ in 0..watches {
        server.inject(Fault::SlowWatch { lag: LAG });
    }
    let factory = SharedInformerFactory::new(server.memory_client(), FactoryOptions::default());
    (server, factory)
}

/// Runs `controller` with `reconcile` until `done` holds (polled on the paused clock),
/// then for a further minute, and stops it.
async fn run_until<K, R, Fut, E>(controller: Controller<K>, reconcile: R, done: impl Fn() -> bool)
where
    K: kube::Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
    R: Fn(Cached<K>, Arc<()>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let cancel = CancellationToken::new();
    let running = tokio::spawn(controller.run(
        reconcile,
        |_, _, _| Action::Retry,
        Arc::new(()),
        cancel.clone(),
    ));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3600);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "never done");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
    cancel.cancel();
    running.await.unwrap().unwrap();
}

/// Creates a Secret controlled by the ConfigMap `uid`, recorded with `wrote` unless the
/// client records it.
async fn create_child(secrets: &Api<Secret>, uid: &str, by_client: bool) -> kube::Result<()> {
    let child: Secret = serde_json::from_value(json!({"metadata": {
        "generateName": "child-",
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
                             "uid": uid, "controller": true}],
    }}))
    .unwrap();
    let created = secrets.create(&PostParams::default(), &child).await?;
    if !by_client {
        wrote(&created);
    }
    Ok(())
}

/// How many children the cache shows of the owner with a uid.
type Count = Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// How many of `cached` the object `uid` owns.
fn owned_by<T: kube::Resource>(cached: &[Arc<T>], uid: &str) -> usize {
    cached
        .iter()
        .filter(|s| s.owner_references().iter().any(|o| o.uid == uid))
        .count()
}

/// The Secrets on the server controlled by the ConfigMap `uid`.
fn children_of(server: &FakeApiServer, uid: &str) -> usize {
    server
        .list(&Gvr::core("secrets"))
        .unwrap()
        .iter()
        .filter(|s| s["metadata"]["ownerReferences"][0]["uid"] == uid)
        .count()
}

/// How the controller caches the children: whole Secrets (`owns`), or their metadata only
/// (`owns_metadata`).
#[derive(Clone, Copy, Debug)]
enum Children {
    Whole,
    Metadata,
}

/// The classic duplicate create: a reconcile that counts its children in the cache and
/// creates one when short, requeued at once. With the wait, exactly 100 children over 100
/// rounds, whether the reconcile records its creates with `wrote` or writes through a
/// recording client and records nothing itself; without it, a cache 50 ms behind shows
/// fewer than there are, and it creates more.
#[tokio::test(start_paused = true)]
async fn a_reconcile_never_creates_a_child_twice_from_a_cache_behind_its_writes() {
    for (wait, by_client) in [(false, false), (true, false), (true, true)] {
        check_children(Children::Whole, wait, by_client).await;
    }
}

/// The same with the children cached as metadata only (`owns_metadata`): the reconcile
/// writes the Secret whole and nothing else, and its write is waited for in the
/// `PartialObjectMeta<Secret>` cache. (It was recorded under `Secret`'s type only: no wait,
/// and duplicates.)
#[tokio::test(start_paused = true)]
async fn a_metadata_only_child_is_never_created_twice_from_a_cache_behind_its_writes() {
    for (wait, by_client) in [(false, false), (true, false), (true, true)] {
        check_children(Children::Metadata, wait, by_client).await;
    }
}

/// One run of the duplicate-create reconcile: exactly [`CHILDREN`] with the wait, more
/// without it.
async fn check_children(cached: Children, wait: bool, by_client: bool) {
    let (server, factory) = lagging(2).await;
    let parent = json!({"metadata": {"name": "parent"}});
    let parent = server
        .create(&Gvr::core("configmaps"), Some("shop"), parent)
        .unwrap();
    let uid = parent["metadata"]["uid"].as_str().unwrap().to_owned();
    let limit = wait.then_some(Duration::from_secs(60));
    let options = ControllerOptions::default()
        .name("children")
        .read_your_writes(limit);
    let controller = Controller::<ConfigMap>::new(&factory, options);
    // The children the cache shows, by their owner's uid.
    let (controller, owned): (_, Count) = match cached {
        Children::Whole => {
            let store = factory.informer::<Secret>().store();
            let count = move |uid: &str| owned_by(&store.list(), uid);
            (controller.owns::<Secret>(), Arc::new(count))
        }
        Children::Metadata => {
            let store = factory.metadata_informer::<Secret>().store();
            let count = move |uid: &str| owned_by(&store.list(), uid);
            let controller = controller.owns_metadata::<Secret>(InformerSpec::new());
            (controller, Arc::new(count))
        }
    };
    let client = match by_client {
        true => recording_client(server.memory_client()),
        false => server.memory_client(),
    };
    let secrets: Api<Secret> = Api::namespaced(client, "shop");
    let reconcile = move |cm: Cached<ConfigMap>, _: Arc<()>| {
        let (owned, secrets) = (owned.clone(), secrets.clone());
        async move {
            let Cached::Present(parent) = cm else {
                return Ok::<_, kube::Error>(Action::Done);
            };
            let uid = parent.uid().unwrap_or_default();
            if owned(&uid) >= CHILDREN {
                return Ok(Action::Done);
            }
            create_child(&secrets, &uid, by_client).await?;
            Ok(Action::RequeueAfter(Duration::from_millis(1)))
        }
    };
    let children = || children_of(&server, &uid);
    run_until(controller, reconcile, || children() >= CHILDREN).await;
    if wait {
        assert_eq!(
            children(),
            CHILDREN,
            "{cached:?}, by client {by_client}: a child was created twice"
        );
    } else {
        assert!(
            children() > CHILDREN,
            "{cached:?}: without the wait, the lag should have caused duplicates ({})",
            children()
        );
    }
}

/// The same over compact caches (`Compact<K>`: an object's bytes and its parsed metadata,
/// a fraction of a typed object's memory): the controller reads `Compact<ConfigMap>` and
/// owns `Compact<Secret>`, the reconcile decodes its object on demand and creates typed
/// Secrets — recorded by the recording client, or by `wrote(&secret)` — and never creates
/// one twice. (`wrote` of a typed Secret was waited for in `Secret` caches only.)
#[tokio::test(start_paused = true)]
async fn over_compact_caches_a_reconcile_never_creates_a_child_twice() {
    for by_client in [false, true] {
        let (server, factory) = lagging(2).await;
        let parent = json!({"metadata": {"name": "parent"}, "data": {"children": "100"}});
        let parent = server
            .create(&Gvr::core("configmaps"), Some("shop"), parent)
            .unwrap();
        let uid = parent["metadata"]["uid"].as_str().unwrap().to_owned();
        let options = ControllerOptions::default()
            .name("compact-children")
            .read_your_writes(Some(Duration::from_secs(60)));
        let controller =
            Controller::<Compact<ConfigMap>>::new(&factory, options).owns::<Compact<Secret>>();
        let cached = factory.informer::<Compact<Secret>>().store();
        let client = match by_client {
            true => recording_client(server.memory_client()),
            false => server.memory_client(),
        };
        let secrets: Api<Secret> = Api::namespaced(client, "shop");
        let reconcile = move |cm: Cached<Compact<ConfigMap>>, _: Arc<()>| {
            let (cached, secrets) = (cached.clone(), secrets.clone());
            async move {
                let Cached::Present(parent) = cm else {
                    return Ok::<_, kube::Error>(Action::Done);
                };
                // Metadata without decoding; the rest decoded when needed.
                let uid = parent.uid().unwrap_or_default();
                let wanted: usize = parent.decode().unwrap().data.unwrap()["children"]
                    .parse()
                    .unwrap();
                if owned_by(&cached.list(), &uid) >= wanted {
                    return Ok(Action::Done);
                }
                create_child(&secrets, &uid, by_client).await?;
                Ok(Action::RequeueAfter(Duration::from_millis(1)))
            }
        };
        let children = || children_of(&server, &uid);
        run_until(controller, reconcile, || children() >= CHILDREN).await;
        assert_eq!(
            children(),
            CHILDREN,
            "a child was created twice ({by_client})"
        );
    }
}

/// A finalizer's cleanup runs once per object, with another writer changing each object
/// during its cleanup (its event queues the key again, and the cache is 50 ms behind the
/// finalizer's removal): 20 objects, one worker, every cleanup once. Without the wait, a
/// cleanup runs again from the stale copy that still has the finalizer.
#[tokio::test(start_paused = true)]
async fn a_finalizer_cleans_up_once_under_a_concurrent_writer_and_a_lagging_cache() {
    const OBJECTS: usize = 20;
    const FINALIZER: &str = "example.com/once";
    for wait in [false, true] {
        let (server, factory) = lagging(1).await;
        let cms = Gvr::core("configmaps");
        for i in 0..OBJECTS {
            let cm = json!({"metadata": {"name": format!("cm-{i}"), "finalizers": [FINALIZER]}});
            server.create(&cms, Some("shop"), cm).unwrap();
        }
        let limit = wait.then_some(Duration::from_secs(60));
        let options = ControllerOptions::default()
            .name("cleanup")
            .workers(1)
            .read_your_writes(limit);
        let controller = Controller::<ConfigMap>::new(&factory, options);
        let api: Api<ConfigMap> = Api::namespaced(server.memory_client(), "shop");
        let cleanups = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = cleanups.clone();
        let reconcile = move |cm: Cached<ConfigMap>, _: Arc<()>| {
            let (api, log) = (api.clone(), log.clone());
            async move {
                let Cached::Present(cm) = cm else {
                    return Ok(Action::Done);
                };
                let writer = api.clone();
                finalizer(&api, FINALIZER, cm, |event| async move {
                    if let Event::Cleanup(cm) = event {
                        log.lock().push(cm.name_any());
                        // Someone else writes the object meanwhile (a label, an annotation).
                        let patch = json!({"metadata": {"annotations": {"touched": "yes"}}});
                        let params = PatchParams::default();
                        writer
                            .patch(&cm.name_any(), &params, &Patch::Merge(&patch))
                            .await?;
                    }
                    Ok::<_, kube::Error>(Action::Done)
                })
                .await
            }
        };
        // Every object terminating, held by the finalizer, before the controller starts.
        for i in 0..OBJECTS {
            server
                .delete(&cms, Some("shop"), &format!("cm-{i}"))
                .unwrap();
        }
        run_until(controller, reconcile, || {
            server.list(&cms).unwrap().is_empty()
        })
        .await;
        let mut counts = std::collections::BTreeMap::<String, usize>::new();
        for name in cleanups.lock().iter() {
            *counts.entry(name.clone()).or_default() += 1;
        }
        assert_eq!(counts.len(), OBJECTS, "every object cleaned up: {counts:?}");
        let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
        if wait {
            assert!(twice.is_empty(), "cleaned up more than once: {twice:?}");
        } else {
            assert!(
                !twice.is_empty(),
                "without the wait, the lag should have run a cleanup twice"
            );
        }
    }
}

/// A child created from a task the reconcile spawns (no `carry_writes`), through the
/// manager's client: the write is made off the reconcile's task, given to its owner's key
/// all the same, and the next reconcile waits for it — exactly 100 children. Through a plain
/// recording client (no manager to give it to) the same reconcile creates duplicates.
#[tokio::test(start_paused = true)]
async fn a_child_created_from_a_spawned_task_is_never_created_twice() {
    use kube_informer_runtime::manager::{Manager, ManagerOptions};

    for through_manager in [false, true] {
        let (server, _) = lagging(2).await;
        let parent = json!({"metadata": {"name": "parent"}});
        let parent = server
            .create(&Gvr::core("configmaps"), Some("shop"), parent)
            .unwrap();
        let uid = parent["metadata"]["uid"].as_str().unwrap().to_owned();
        let mut manager = Manager::new(server.memory_client(), ManagerOptions::for_tests())
            .await
            .unwrap();
        let options = ControllerOptions::default()
            .name("spawning")
            .read_your_writes(Some(Duration::from_secs(60)));
        let controller = manager.controller::<ConfigMap>(options).owns::<Secret>();
        let cached = manager.factory().informer::<Secret>().store();
        let client = match through_manager {
            true => manager.client().clone(),
            false => recording_client(server.memory_client()),
        };
        let secrets: Api<Secret> = Api::namespaced(client, "shop");
        let reconcile = move |cm: Cached<ConfigMap>, _: Arc<()>| {
            let (cached, secrets) = (cached.clone(), secrets.clone());
            async move {
                let Cached::Present(parent) = cm else {
                    return Ok::<_, kube::Error>(Action::Done);
                };
                let uid = parent.uid().unwrap_or_default();
                if owned_by(&cached.list(), &uid) >= CHILDREN {
                    return Ok(Action::Done);
                }
                // Work handed to a task of its own, joined before the reconcile returns.
                let task = tokio::spawn(async move { create_child(&secrets, &uid, true).await });
                task.await.expect("the task ran")?;
                Ok(Action::RequeueAfter(Duration::from_millis(1)))
            }
        };
        manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
        let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
        let running = tokio::spawn(manager.run_until(graceful.clone(), force));
        let children = || children_of(&server, &uid);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3600);
        while children() < CHILDREN {
            assert!(tokio::time::Instant::now() < deadline, "never done");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
        graceful.cancel();
        running.await.unwrap().unwrap();
        if through_manager {
            assert_eq!(children(), CHILDREN, "a child was created twice");
        } else {
            assert!(
                children() > CHILDREN,
                "off the reconcile's task and without a manager, the lag should have caused \
                 duplicates ({})",
                children()
            );
        }
    }
}
