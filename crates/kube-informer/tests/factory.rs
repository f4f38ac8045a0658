//! The informer factory against fake-apiserver: sharing, dedupe, sync, listers, shutdown.

use crate::common;

use common::until;
use std::time::Duration;

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, Verb};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::{api::ApiResource, core::Selector, discovery::Scope};
use kube_informer::{
    factory::{FactoryOptions, SharedInformerFactory},
    informer::{HandlerFuncs, HandlerOptions},
    list_watch::Selectors,
    reflector::ReflectorOptions,
};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_informer_per_type_shared_synced_listed_and_shut_down() {
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    let cms = Gvr::core("configmaps");
    server
        .seed(&cms, (0..20).map(|i| json!({"metadata": {"name": format!("cm-{i}"), "namespace": "shop", "labels": {"app": if i % 2 == 0 { "web" } else { "db" }}}})))
        .unwrap();
    server
        .seed(
            &cms,
            [json!({"metadata": {"name": "elsewhere", "namespace": "ops"}})],
        )
        .unwrap();
    server
        .seed(
            &Gvr::core("nodes"),
            [json!({"metadata": {"name": "node-1"}})],
        )
        .unwrap();
    server
        .seed(
            &Gvr::core("pods"),
            [json!({"metadata": {"name": "p", "namespace": "shop"}})],
        )
        .unwrap();

    let fast = ReflectorOptions::default().backoff(
        Duration::from_millis(10),
        Duration::from_millis(50),
        Duration::from_secs(60),
    );
    let factory = SharedInformerFactory::new(
        server.client().unwrap(),
        FactoryOptions::default()
            .selectors(Selectors::default().in_namespace("shop"))
            .reflector(fast),
    );
    // Two controllers ask for config maps: one informer.
    let a = factory.informer::<ConfigMap>();
    let b = factory.informer::<ConfigMap>();
    let counted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = counted.clone();
    a.add_event_handler(
        HandlerFuncs::new().on_add(move |_: std::sync::Arc<ConfigMap>, _| {
            c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }),
        HandlerOptions::default(),
    );
    // Cluster-scoped: the factory's namespace does not apply (no 404 URL, no hang).
    let nodes = factory.informer::<Node>();
    let dynamic_pods = factory.dynamic_informer(&ApiResource::erase::<Pod>(&()), Scope::Namespaced);
    let pod_meta = factory.metadata_informer::<Pod>();
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let health = factory.health();
    assert_eq!(health.len(), 4, "{health:?}");
    assert!(health.iter().all(|h| h.synced), "{health:?}");

    assert_eq!(
        b.store().len(),
        20,
        "the namespace limits the informer; b is a's cache"
    );
    until("handler saw the cache", || {
        counted.load(std::sync::atomic::Ordering::Relaxed) == 20
    })
    .await;
    assert_eq!(nodes.store().len(), 1);
    assert_eq!(dynamic_pods.store().len(), 1);
    assert_eq!(
        pod_meta
            .lister()
            .namespaced("shop")
            .get("p")
            .unwrap()
            .metadata
            .name
            .as_deref(),
        Some("p")
    );
    let watches: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == Some(Verb::Watch) && r.resource.as_deref() == Some("configmaps"))
        .collect();
    assert_eq!(watches.len(), 1, "two controllers, one watch");
    assert!(
        watches[0].path.contains("/namespaces/shop/"),
        "{}",
        watches[0].path
    );

    // Listers agree with the server after churn.
    for i in 0..10 {
        server
            .patch(
                &cms,
                Some("shop"),
                &format!("cm-{i}"),
                json!({"metadata": {"labels": {"app": "web"}}}),
            )
            .unwrap();
    }
    for i in 15..20 {
        server
            .delete(&cms, Some("shop"), &format!("cm-{i}"))
            .unwrap();
    }
    let lister = a.lister();
    let web = Selector::from_iter([("app", "web")]);
    let truth = |app: &str| {
        let all = server.list(&cms).unwrap();
        all.iter()
            .filter(|o| {
                o["metadata"]["namespace"] == "shop" && o["metadata"]["labels"]["app"] == app
            })
            .count()
    };
    until("lister agrees with the server", || {
        lister.namespaced("shop").list(&web).len() == truth("web")
            && lister.list(&Selector::default()).len() == 15
    })
    .await;

    tokio::time::timeout(Duration::from_secs(60), factory.shutdown())
        .await
        .expect("shutdown waits and returns");
    // Stopped for good: an informer asked for afterwards, and a late start, run nothing.
    let late = factory.informer::<k8s_openapi::api::core::v1::Secret>();
    factory.start();
    assert!(
        factory.health().is_empty(),
        "a shut-down factory started an informer"
    );
    assert!(!late.has_synced());
}

/// A 403 on LIST used to leave the sync wait blocked forever with only a log line;
/// a lasting 503, 504 or 429 was worse: kube's default client retried it out of sight, so
/// the error handler never heard of it and the sync wait could not say why. Now, through
/// that same default client, each answer times out the wait naming the informer and the
/// server's answer, the factory's error handler hears each failure, and the informer's
/// health says it is failing.
async fn a_failing_list_is_reported_and_the_sync_wait_says_so(
    code: u16,
    retry_after_seconds: Option<u32>,
    words: &[&str],
) {
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    for verb in [Verb::List, Verb::Watch] {
        server.inject(fake_apiserver::Fault::Status {
            verb,
            code,
            times: usize::MAX,
            retry_after_seconds,
        });
    }
    let fast = ReflectorOptions::default().backoff(
        Duration::from_millis(5),
        Duration::from_millis(20),
        Duration::from_secs(60),
    );
    let factory = SharedInformerFactory::new(
        server.client().unwrap(), // kube's default Config: its retry layer is on
        FactoryOptions::default()
            .selectors(Selectors::default().in_namespace("shop"))
            .reflector(fast),
    );
    let heard = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let h = heard.clone();
    factory.on_error(move |informer, failure| h.lock().push(format!("{informer}: {failure}")));
    let pods = factory.informer::<Pod>();
    factory.start();
    until("a failure reached the handler", || !heard.lock().is_empty()).await;
    let err = factory
        .wait_for_sync(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_eq!(err.unsynced.len(), 1);
    let message = err.to_string();
    assert!(message.contains("Pod in shop did not sync"), "{message}");
    assert!(
        words.iter().all(|w| message.contains(w)),
        "{code}: {words:?} not in {message}"
    );
    let first = heard.lock()[0].clone();
    assert!(first.starts_with("Pod in shop: "), "{first}");
    assert!(first.contains(&code.to_string()), "{first}");
    // Each answer reached the handler: as many failures heard as the server gave.
    let served = server.fault_counts()[&format!("status:{code}")];
    assert!(
        heard.lock().len() as u64 >= served - 1,
        "{code}: {served} answers, {} heard",
        heard.lock().len()
    );
    let health = pods.health();
    assert!(!health.is_ready() && health.reflector.consecutive_failures > 0);
    assert_eq!(factory.health().len(), 1);
    assert_eq!(
        pods.store().indexer_names(),
        [kube_informer::NAMESPACE_INDEX],
        "factory informers carry the namespace index"
    );
    factory.shutdown().await;
}

#[tokio::test]
async fn a_forbidden_list_is_reported_and_the_sync_wait_says_so() {
    a_failing_list_is_reported_and_the_sync_wait_says_so(403, None, &["403", "Forbidden"]).await;
}

#[tokio::test]
async fn a_lasting_503_is_reported_and_the_sync_wait_says_so() {
    a_failing_list_is_reported_and_the_sync_wait_says_so(503, None, &["503"]).await;
}

#[tokio::test]
async fn a_lasting_504_is_reported_and_the_sync_wait_says_so() {
    a_failing_list_is_reported_and_the_sync_wait_says_so(504, None, &["504"]).await;
}

#[tokio::test]
async fn a_lasting_429_is_reported_and_the_sync_wait_says_so() {
    a_failing_list_is_reported_and_the_sync_wait_says_so(429, Some(1), &["429"]).await;
}

/// An operator watching two namespaces out of three: one informer, one watch per
/// namespace, one cache; factory-wide and per-informer transforms; shared by what it watches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_informer_of_some_namespaces_with_its_own_options() {
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    let cms = Gvr::core("configmaps");
    for ns in ["a", "b", "c"] {
        server
            .seed(&cms, (0..3).map(|i| json!({"metadata": {"name": format!("cm-{i}"), "namespace": ns, "labels": {"keep": "yes"}}})))
            .unwrap();
    }
    let factory = SharedInformerFactory::new(server.client().unwrap(), FactoryOptions::default());
    let keep = Selectors::default().labels("keep=yes");
    let spec = || {
        kube_informer::factory::InformerSpec::<ConfigMap>::new()
            .selectors(keep.clone().in_namespaces(["b", "a"]))
            .transform(|mut cm| {
                cm.data = Some([("seen".to_owned(), "yes".to_owned())].into());
                cm
            })
    };
    let two = factory.informer_with(spec());
    let again = factory.informer_with(spec().selectors(keep.clone().in_namespaces(["a", "b"])));
    let everything = factory.informer::<ConfigMap>();
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(two.store().len(), 6, "namespaces a and b only");
    assert_eq!(
        again.store().len(),
        6,
        "the same informer for the same spec"
    );
    assert_eq!(
        everything.store().len(),
        9,
        "a different informer for all namespaces"
    );
    let cm = two.store().get_by_key("a/cm-0").unwrap();
    assert!(
        cm.metadata.managed_fields.is_none(),
        "managedFields are left out by default"
    );
    assert_eq!(
        cm.data.as_ref().unwrap()["seen"],
        "yes",
        "the informer's own transform ran, after the factory's"
    );
    let watches: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == Some(Verb::Watch) && r.param("labelSelector") == Some("keep=yes"))
        .map(|r| r.path)
        .collect();
    assert_eq!(watches.len(), 2, "one watch per namespace: {watches:?}");
    assert_eq!(factory.health().len(), 2);
    factory.shutdown().await;
}

/// Metadata and dynamic informers take an `InformerSpec` like typed ones: their own
/// namespaces and selectors decide what they list, and a different spec is a different
/// informer; the same spec shares one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_and_dynamic_informers_follow_their_spec() {
    use kube_informer::factory::InformerSpec;
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    let pods = Gvr::core("pods");
    for (ns, name, team) in [
        ("shop", "a", "payments"),
        ("shop", "b", "search"),
        ("ops", "c", "payments"),
    ] {
        server
            .seed(
                &pods,
                [json!({"metadata": {"name": name, "namespace": ns, "labels": {"team": team}}})],
            )
            .unwrap();
    }
    let factory = SharedInformerFactory::new(server.client().unwrap(), FactoryOptions::default());
    let payments = || {
        InformerSpec::new().selectors(
            Selectors::default()
                .in_namespaces(["shop"])
                .labels("team=payments"),
        )
    };
    let meta = factory.metadata_informer_with::<Pod>(payments());
    let again = factory.metadata_informer_with::<Pod>(payments());
    let all_meta = factory.metadata_informer::<Pod>();
    let dynamic = factory.dynamic_informer_with(
        &ApiResource::erase::<Pod>(&()),
        Scope::Namespaced,
        InformerSpec::new().selectors(Selectors::default().in_namespace("ops")),
    );
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(factory.health().len(), 3, "one spec, one informer");
    let keys = |k: Vec<kube_informer::ObjectKey>| {
        let mut k: Vec<String> = k.iter().map(|k| k.as_str().to_owned()).collect();
        k.sort();
        k
    };
    assert_eq!(
        keys(meta.store().list_keys()),
        keys(again.store().list_keys())
    );
    assert_eq!(keys(meta.store().list_keys()), ["shop/a"]);
    assert_eq!(
        keys(all_meta.store().list_keys()),
        ["ops/c", "shop/a", "shop/b"]
    );
    assert_eq!(keys(dynamic.store().list_keys()), ["ops/c"]);
    let watched: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some("pods") && r.verb == Some(Verb::Watch))
        .map(|r| (r.path, r.query.get("labelSelector").cloned()))
        .collect();
    assert!(
        watched.contains(&(
            "/api/v1/namespaces/shop/pods".to_owned(),
            Some("team=payments".to_owned())
        )),
        "the server filters, not the cache: {watched:?}"
    );
    factory.shutdown().await;
}

/// The factory's metrics survive a later `reflector(..)`, and each informer's reflector is
/// named after it, whatever name the shared reflector options carry.
#[cfg(feature = "metrics")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn factory_metrics_and_reflector_names_do_not_depend_on_setter_order() {
    use kube_informer::metrics::Metrics;
    use prometheus_client::{encoding::text::encode, registry::Registry};
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["shop"]))
        .await
        .unwrap();
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let options = FactoryOptions::default()
        .metrics(&metrics)
        .reflector(ReflectorOptions::default().page_size(100).name("shared"));
    let factory = SharedInformerFactory::new(server.client().unwrap(), options);
    factory.informer::<ConfigMap>();
    factory.informer::<Pod>();
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    for name in ["ConfigMap", "Pod"] {
        assert!(
            text.contains(&format!("reflector_watches_total{{name=\"{name}\"}}")),
            "{name}'s reflector is not recorded under its own name:\n{text}"
        );
    }
    assert!(!text.contains("name=\"shared\""), "{text}");
    factory.shutdown().await;
}

/// A list served whole (a server without streaming lists, so the first LIST is at "0" and
/// unpaged) is decoded in shares on the decoding threads: every object arrives once, the
/// same over JSON and protobuf, from one LIST request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_list_decoded_in_shares_is_every_object_once() {
    const COUNT: usize = 2_500;
    let server = FakeApiServer::start(ServerConfig::default().namespaces(["bulk"]))
        .await
        .unwrap();
    server
        .seed(
            &Gvr::core("configmaps"),
            (0..COUNT).map(|i| {
                json!({"metadata": {"name": format!("cm-{i}"), "namespace": "bulk"},
                       "data": {"i": i.to_string()}})
            }),
        )
        .unwrap();
    for protobuf in [false, true] {
        server.clear_requests();
        let options = FactoryOptions::default()
            .protobuf(protobuf)
            .reflector(ReflectorOptions::default().streaming_lists(false));
        let factory = SharedInformerFactory::new(server.client().unwrap(), options);
        let informer = factory.informer::<ConfigMap>();
        factory.start();
        factory
            .wait_for_sync(Duration::from_secs(60))
            .await
            .unwrap();
        let store = informer.store();
        assert_eq!(store.len(), COUNT, "protobuf {protobuf}");
        for i in [0, COUNT / 3, COUNT / 2, COUNT - 1] {
            let cm = store.get_by_key(&format!("bulk/cm-{i}")).expect("cached");
            assert_eq!(cm.data.as_ref().unwrap()["i"], i.to_string());
        }
        let lists: Vec<_> = server
            .requests()
            .into_iter()
            .filter(|r| r.verb == Some(Verb::List))
            .collect();
        assert_eq!(lists.len(), 1, "one LIST: {lists:?}");
        assert_eq!(lists[0].param("limit"), None, "served whole");
        factory.shutdown().await;
    }
}
