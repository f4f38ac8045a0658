//! The shared informer against fake-apiserver: sharing, ordering, late handlers, removal,
//! panics, transforms.

use crate::common;

use common::until;
use std::{collections::BTreeMap, sync::Arc, time::Duration};

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, Verb};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube_informer::{
    DeletedObject,
    informer::{
        HandlerFuncs, HandlerOptions, InformerOptions, SharedIndexInformer, strip_managed_fields,
    },
    reflector::ReflectorOptions,
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn cms() -> Gvr {
    Gvr::core("configmaps")
}

async fn server() -> Arc<FakeApiServer> {
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["demo"]))
        .await
        .unwrap();
    Arc::new(server)
}

fn informer(server: &FakeApiServer) -> SharedIndexInformer<ConfigMap> {
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let fast = ReflectorOptions::default().backoff(
        Duration::from_millis(10),
        Duration::from_millis(50),
        Duration::from_secs(60),
    );
    SharedIndexInformer::new(api, InformerOptions::default().reflector(fast))
}

fn start(
    informer: &SharedIndexInformer<ConfigMap>,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    (cancel, task)
}

/// (event, name, resourceVersion), in the order a handler saw them.
type Log = Arc<Mutex<Vec<(String, String, u64)>>>;

/// A handler recording what it sees.
fn recorder() -> (HandlerFuncs<ConfigMap>, Log) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let rv = |o: &ConfigMap| {
        o.metadata
            .resource_version
            .as_deref()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let name = |o: &ConfigMap| o.metadata.name.clone().unwrap();
    let (a, u, d) = (log.clone(), log.clone(), log.clone());
    let funcs = HandlerFuncs::new()
        .on_add(move |o: Arc<ConfigMap>, _| a.lock().push(("add".into(), name(&o), rv(&o))))
        .on_update(move |_, n: Arc<ConfigMap>| u.lock().push(("update".into(), name(&n), rv(&n))))
        .on_delete(move |o: DeletedObject<ConfigMap>| {
            d.lock()
                .push(("delete".into(), name(o.object()), rv(o.object())))
        });
    (funcs, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_handlers_share_one_list_and_watch_and_see_every_key_in_order() {
    let server = server().await;
    for i in 0..20 {
        server
            .create(
                &cms(),
                Some("demo"),
                json!({"metadata": {"name": format!("cm-{i}")}}),
            )
            .unwrap();
    }
    let informer = informer(&server);
    let (h1, log1) = recorder();
    let (h2, log2) = recorder();
    let r1 = informer.add_event_handler(h1, HandlerOptions::default().name("one"));
    let r2 = informer.add_event_handler(h2, HandlerOptions::default().name("two"));
    let (cancel, task) = start(&informer);
    until("both handlers synced", || {
        r1.has_synced() && r2.has_synced()
    })
    .await;
    // A burst of updates to few keys.
    for round in 0..30 {
        let name = format!("cm-{}", round % 5);
        server
            .patch(
                &cms(),
                Some("demo"),
                &name,
                json!({"data": {"round": round.to_string()}}),
            )
            .unwrap();
    }
    server.delete(&cms(), Some("demo"), "cm-19").unwrap();
    let last = server.resource_version();
    until("both saw the last write", || {
        [&log1, &log2]
            .iter()
            .all(|l| l.lock().iter().any(|(_, _, rv)| *rv == last))
    })
    .await;
    for log in [&log1, &log2] {
        let mut per_key: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for (_, name, rv) in log.lock().iter() {
            per_key.entry(name.clone()).or_default().push(*rv);
        }
        for (name, rvs) in &per_key {
            assert!(
                rvs.windows(2).all(|w| w[0] < w[1]),
                "{name}: out of order {rvs:?}"
            );
        }
        assert_eq!(per_key.len(), 20);
        assert_eq!(log.lock().iter().filter(|(e, _, _)| e == "add").count(), 20);
    }
    let watches = server
        .requests()
        .iter()
        .filter(|r| r.verb == Some(Verb::Watch))
        .count();
    let lists = server
        .requests()
        .iter()
        .filter(|r| r.verb == Some(Verb::List))
        .count();
    assert_eq!(
        (watches, lists),
        (1, 0),
        "one streaming watch serves both handlers"
    );
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_handler_first_gets_the_whole_cache_then_changes() {
    let server = server().await;
    for i in 0..10 {
        server
            .create(
                &cms(),
                Some("demo"),
                json!({"metadata": {"name": format!("cm-{i}")}}),
            )
            .unwrap();
    }
    let informer = informer(&server);
    let (cancel, task) = start(&informer);
    until("synced", || informer.has_synced()).await;
    let (late, log) = recorder();
    let registration = informer.add_event_handler(late, HandlerOptions::default());
    until("late handler synced", || registration.has_synced()).await;
    assert_eq!(log.lock().len(), 10);
    server
        .create(&cms(), Some("demo"), json!({"metadata": {"name": "after"}}))
        .unwrap();
    until("the change after", || {
        log.lock().iter().any(|(_, n, _)| n == "after")
    })
    .await;
    assert_eq!(log.lock().len(), 11, "nothing twice");
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_handler_is_no_longer_called_and_a_panicking_one_keeps_receiving() {
    let server = server().await;
    let informer = informer(&server);
    let (removed, removed_log) = recorder();
    let registration = informer.add_event_handler(removed, HandlerOptions::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let panicky = HandlerFuncs::new().on_add(move |o: Arc<ConfigMap>, _| {
        let name = o.metadata.name.clone().unwrap();
        if name == "bad" {
            panic!("handler bug");
        }
        s.lock().push(name);
    });
    informer.add_event_handler(panicky, HandlerOptions::default().name("panicky"));
    let (cancel, task) = start(&informer);
    until("synced", || informer.has_synced()).await;
    informer.remove_event_handler(&registration).await.unwrap();
    for name in ["bad", "good"] {
        server
            .create(&cms(), Some("demo"), json!({"metadata": {"name": name}}))
            .unwrap();
    }
    until("after the panic", || {
        seen.lock().contains(&"good".to_owned())
    })
    .await;
    assert!(
        removed_log.lock().is_empty(),
        "removed before any object existed"
    );
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transform_applies_before_the_cache_and_indexes_can_be_added_after_start() {
    let server = server().await;
    // With data: an object with no field to own has no managedFields (as on a real server).
    let cm = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
    server.create(&cms(), Some("demo"), cm).unwrap();
    let informer = informer(&server);
    informer.set_transform(strip_managed_fields).unwrap();
    let (cancel, task) = start(&informer);
    until("synced", || informer.store().len() == 1).await;
    let cached = informer.store().get_by_key("demo/a").unwrap();
    assert!(cached.metadata.managed_fields.is_none());
    assert!(server.get(&cms(), Some("demo"), "a").unwrap()["metadata"]["managedFields"].is_array());
    let refused = informer.set_transform(|o| o).unwrap_err();
    assert!(refused.to_string().contains("already started"), "{refused}");
    // Index functions can be added while running (as client-go allows): built over the
    // cache before the call returns.
    informer
        .add_indexers(kube_informer::Indexers::new().namespace())
        .unwrap();
    let in_demo = informer
        .store()
        .by_index(kube_informer::NAMESPACE_INDEX, "demo");
    assert_eq!(in_demo.unwrap().len(), 1);
    assert!(!informer.last_sync_resource_version().is_empty());
    cancel.cancel();
    task.await.unwrap();
}

/// A static source: a LIST of two objects, then watches that stay open and quiet.
struct Static;

impl kube_informer::list_watch::ListerWatcher<ConfigMap> for Static {
    async fn list(
        &self,
        _: &kube::api::ListParams,
    ) -> Result<kube::api::ObjectList<ConfigMap>, kube::Error> {
        let item =
            |n: &str| json!({"metadata": {"name": n, "namespace": "demo", "resourceVersion": "5"}});
        let list = json!({"metadata": {"resourceVersion": "5"}, "items": [item("a"), item("b")]});
        Ok(serde_json::from_value(list).unwrap())
    }

    async fn watch(
        &self,
        _: &kube::api::WatchParams,
        _: &str,
    ) -> Result<kube_informer::list_watch::WatchStream<ConfigMap>, kube::Error> {
        Ok(Box::pin(futures_util::stream::pending()))
    }
}

/// Counts the resync updates (old and new the same object) a handler gets.
fn resync_counter() -> (HandlerFuncs<ConfigMap>, Arc<Mutex<usize>>) {
    let count = Arc::new(Mutex::new(0));
    let c = count.clone();
    let funcs = HandlerFuncs::new().on_update(move |old: Arc<ConfigMap>, new: Arc<ConfigMap>| {
        if Arc::ptr_eq(&old, &new) {
            *c.lock() += 1;
        }
    });
    (funcs, count)
}

#[tokio::test(start_paused = true)]
async fn resync_updates_reach_only_the_handlers_that_are_due() {
    let options = InformerOptions::default().reflector(
        ReflectorOptions::default()
            .streaming_lists(false)
            .idle_timeout(Duration::from_secs(100_000))
            .resync_period(Duration::from_secs(1)),
    );
    let informer = SharedIndexInformer::new(Static, options);
    let (every_2s, fast) = resync_counter();
    let (every_10s, slow) = resync_counter();
    let (never, none) = resync_counter();
    informer.add_event_handler(
        every_2s,
        HandlerOptions::default().resync(Duration::from_secs(2)),
    );
    informer.add_event_handler(
        every_10s,
        HandlerOptions::default().resync(Duration::from_secs(10)),
    );
    informer.add_event_handler(never, HandlerOptions::default());
    let (cancel, task) = start(&informer);
    // 30 s of paused time: checks every second.
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    cancel.cancel();
    task.await.unwrap();
    let (fast, slow, none) = (*fast.lock(), *slow.lock(), *none.lock());
    // Two objects per resync: ~15 resyncs every 2 s, ~3 every 10 s.
    assert!(
        (26..=30).contains(&fast),
        "every 2 s: {fast} resync updates"
    );
    assert!((4..=6).contains(&slow), "every 10 s: {slow} resync updates");
    assert_eq!(none, 0, "a handler without a resync period gets none");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_can_be_read_as_a_stream_until_the_informer_stops() {
    use futures_util::StreamExt;
    use kube_informer::informer::Notification;
    let server = server().await;
    server
        .create(&cms(), Some("demo"), json!({"metadata": {"name": "a"}}))
        .unwrap();
    let informer = informer(&server);
    let mut stream = informer.stream(HandlerOptions::default());
    let (cancel, task) = start(&informer);
    match stream.next().await.unwrap() {
        Notification::Add {
            object,
            is_in_initial_list,
        } => {
            assert_eq!(object.metadata.name.as_deref(), Some("a"));
            assert!(is_in_initial_list);
        }
        other => panic!("expected the initial add, got {other:?}"),
    }
    server.delete(&cms(), Some("demo"), "a").unwrap();
    assert!(matches!(
        stream.next().await.unwrap(),
        Notification::Delete(_)
    ));
    until("registration synced", || stream.registration().has_synced()).await;
    cancel.cancel();
    task.await.unwrap();
    assert!(
        stream.next().await.is_none(),
        "the stream ends with the informer"
    );
}

/// A relist that replaces every object reaches the cache at once: readers on other threads
/// see the old generation or the new one, never a mix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_see_a_half_applied_relist() {
    use fake_apiserver::Fault;
    const N: usize = 60;
    let server = server().await;
    let make = |generation: &str| {
        for i in 0..N {
            let name = format!("{generation}-{i}");
            server
                .create(
                    &cms(),
                    Some("demo"),
                    json!({"metadata": {"name": name, "labels": {"gen": generation}}}),
                )
                .unwrap();
        }
    };
    make("a");
    let informer = informer(&server);
    let (cancel, task) = start(&informer);
    until("synced on generation a", || informer.store().len() == N).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, stop) = (informer.store(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                // At least one read, however late this thread is first scheduled.
                while reads == 0 || !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let objects = store.list();
                    let a = objects
                        .iter()
                        .filter(|o| o.metadata.name.as_deref().unwrap().starts_with("a-"))
                        .count();
                    assert!(
                        (a, objects.len()) == (N, N) || (a, objects.len()) == (0, N),
                        "a reader saw {a} of generation a among {} objects",
                        objects.len()
                    );
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    // While the watch is down, generation a is replaced by b; the resumed watch is held
    // until the replacement and the compaction are done, so it is too old (410) however
    // slowly this thread runs, and the informer relists and replaces the whole cache.
    let gate = fake_apiserver::Gate::new();
    server.inject(Fault::Hold {
        verb: Verb::Watch,
        gate: gate.clone(),
        times: 1,
    });
    server.restart();
    for i in 0..N {
        server
            .delete(&cms(), Some("demo"), &format!("a-{i}"))
            .unwrap();
    }
    make("b");
    server.compact();
    gate.open();
    until("generation b", || {
        informer
            .store()
            .list()
            .iter()
            .all(|o| o.metadata.name.as_deref().unwrap().starts_with("b-"))
            && informer.store().len() == N
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for reader in readers {
        assert!(reader.join().expect("a reader saw a half-applied relist") > 0);
    }
    cancel.cancel();
    task.await.unwrap();
}

#[cfg(feature = "metrics")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_metrics_report_depth_latency_version_and_backlogs() {
    use kube_informer::metrics::Metrics;
    use prometheus_client::{encoding::text::encode, registry::Registry};
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let server = server().await;
    for i in 0..5 {
        server
            .create(
                &cms(),
                Some("demo"),
                json!({"metadata": {"name": format!("cm-{i}")}}),
            )
            .unwrap();
    }
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let informer = SharedIndexInformer::new(
        api,
        InformerOptions::default().name("cms").metrics(&metrics),
    );
    let (handler, log) = recorder();
    informer.add_event_handler(handler, HandlerOptions::default().name("recorder"));
    let (cancel, task) = start(&informer);
    until("all delivered", || log.lock().len() == 5).await;
    server
        .create(
            &cms(),
            Some("demo"),
            json!({"metadata": {"name": "one-more"}}),
        )
        .unwrap();
    until("the last one", || log.lock().len() == 6).await;
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for expected in [
        r#"informer_fifo_depth{name="cms"} 0"#,
        &format!(
            r#"informer_store_resource_version{{name="cms"}} {}"#,
            server.resource_version()
        ),
        r#"informer_handler_backlog{name="cms",handler="recorder"}"#,
        r#"informer_processing_seconds_count{name="cms"}"#,
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    cancel.cancel();
    task.await.unwrap();
}
