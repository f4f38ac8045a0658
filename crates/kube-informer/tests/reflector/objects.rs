//! Other object kinds and list shapes: dynamic and metadata-only objects, early-closing watches, resync, paged and undecodable first lists.

use super::*;

/// Runs a reflector over `lw` into a fresh store until it holds `n` objects, then stops it.
async fn sync_objects<K>(lw: impl ListerWatcher<K>, n: usize) -> Store<K>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
{
    let store: Store<K> = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
    let reflector = Arc::new(Reflector::new(lw, fifo.clone(), fast()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (reflector, cancel) = (reflector.clone(), cancel.clone());
        async move { reflector.run(cancel).await }
    });
    while store.len() < n {
        fifo.pop(|deltas, _| {
            store
                .insert(deltas.key().clone(), deltas.newest().object().clone())
                .unwrap();
            Ok::<(), ProcessError<Infallible>>(())
        })
        .await
        .unwrap();
    }
    cancel.cancel();
    run.await.unwrap();
    store
}

#[tokio::test]
async fn dynamic_objects_of_a_custom_resource_sync_too() {
    use fake_apiserver::ResourceType;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    let widgets = Gvr::new("example.com", "v1", "widgets");
    let server = server(
        ServerConfig::default().resource(ResourceType::namespaced(widgets.clone(), "Widget")),
    )
    .await;
    for i in 0..5 {
        server
            .create(
                &widgets,
                Some("demo"),
                json!({"metadata": {"name": format!("w-{i}")}, "spec": {"size": i}}),
            )
            .unwrap();
    }
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(server.client().unwrap(), "demo", &resource);
    let store = sync_objects(api, 5).await;
    let w3 = store.get_by_key("demo/w-3").unwrap();
    assert_eq!(w3.data["spec"]["size"], 3);
}

/// A source whose LIST is empty and whose every watch ends at once, without events.
struct ClosesAtOnce {
    watches: Arc<Mutex<usize>>,
}

impl ListerWatcher<ConfigMap> for ClosesAtOnce {
    async fn list(
        &self,
        _: &kube::api::ListParams,
    ) -> Result<kube::api::ObjectList<ConfigMap>, kube::Error> {
        let list = json!({"metadata": {"resourceVersion": "7"}, "items": []});
        Ok(serde_json::from_value(list).unwrap())
    }

    async fn watch(
        &self,
        _: &kube::api::WatchParams,
        _: &str,
    ) -> Result<kube_informer::list_watch::WatchStream<ConfigMap>, kube::Error> {
        *self.watches.lock() += 1;
        Ok(Box::pin(futures_util::stream::empty()))
    }
}

#[tokio::test(start_paused = true)]
async fn a_watch_ending_at_once_without_events_is_reported_and_backed_off() {
    let watches = Arc::new(Mutex::new(0));
    let store: Store<ConfigMap> = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store)));
    let source = ClosesAtOnce {
        watches: watches.clone(),
    };
    let reflector = Reflector::new(
        source,
        fifo,
        ReflectorOptions::default().streaming_lists(false),
    );
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    reflector.set_error_handler(move |e: &ReflectorError| seen.lock().push(e.to_string()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    tokio::time::sleep(Duration::from_secs(60)).await;
    cancel.cancel();
    run.await.unwrap();
    let watches = *watches.lock();
    assert!(
        (2..=75).contains(&watches),
        "{watches} watches in 60 s: not a hot loop, still retrying"
    );
    assert!(
        errors
            .lock()
            .iter()
            .all(|e| e.contains("with 0 events; backing off")),
        "{:?}",
        errors.lock()
    );
    assert_eq!(errors.lock().len(), watches);
}

/// Records what reaches the sink.
#[derive(Default)]
struct Recording {
    resyncs: Mutex<usize>,
    replaced: Mutex<usize>,
}

impl kube_informer::fifo::DeltaSink<ConfigMap> for Recording {
    fn add(&self, _: Arc<ConfigMap>) -> Result<(), kube_informer::KeyError> {
        Ok(())
    }
    fn update(&self, _: Arc<ConfigMap>) -> Result<(), kube_informer::KeyError> {
        Ok(())
    }
    fn delete(&self, _: Arc<ConfigMap>) -> Result<(), kube_informer::KeyError> {
        Ok(())
    }
    fn replace(&self, list: Vec<Arc<ConfigMap>>, _: &str) -> Result<(), kube_informer::KeyError> {
        *self.replaced.lock() += list.len();
        Ok(())
    }
    fn resync(&self) {
        *self.resyncs.lock() += 1;
    }
}

#[tokio::test]
async fn the_resync_ticker_resyncs_only_when_due() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..3).map(|i| format!("cm-{i}")));
    let sink = Arc::new(Recording::default());
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let reflector = Reflector::new(
        api,
        sink.clone(),
        fast().resync_period(Duration::from_millis(20)),
    );
    let checks = Arc::new(Mutex::new(0usize));
    let counted = checks.clone();
    // Due on every other check.
    reflector.set_should_resync(move || {
        let mut n = counted.lock();
        *n += 1;
        *n % 2 == 0
    });
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    for _ in 0..2000 {
        if *checks.lock() >= 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cancel.cancel();
    run.await.unwrap();
    let (checks, resyncs) = (*checks.lock(), *sink.resyncs.lock());
    assert!(checks >= 6, "the ticker never ticked");
    assert_eq!(
        resyncs,
        checks / 2,
        "resync exactly when due: {resyncs} of {checks} checks"
    );
    assert_eq!(*sink.replaced.lock(), 3);
}

#[tokio::test]
async fn metadata_only_objects_sync() {
    use kube::core::PartialObjectMeta;
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..4).map(|i| format!("cm-{i}")));
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(server.client().unwrap(), "demo");
    let store = sync_objects(api, 4).await;
    assert!(
        store
            .get_by_key("demo/cm-2")
            .unwrap()
            .metadata
            .uid
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consistent_first_list_is_paged_with_pages_decoded_aside() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..45).map(|i| format!("cm-{i:02}")));
    let options = fast()
        .streaming_lists(false)
        .consistent_first_list(true)
        .page_size(10);
    let h = Harness::start(server, options).await;
    h.converge().await;
    let lists = h.requests(Verb::List);
    assert_eq!(lists.len(), 5, "five pages of at most 10: {lists:?}");
    assert_eq!(
        (lists[0].param("resourceVersion"), lists[0].param("limit")),
        (None, Some("10")),
        "a consistent first read"
    );
    assert!(lists[1..].iter().all(|l| l.param("continue").is_some()));
    assert!(h.errors.lock().is_empty(), "{:?}", h.errors.lock());
    h.stop().await;
}

/// Answers the first LIST with a page whose items do not decode.
struct UndecodableFirstPage {
    api: Api<ConfigMap>,
    pages: Mutex<usize>,
}

impl ListerWatcher<ConfigMap> for UndecodableFirstPage {
    async fn list(
        &self,
        params: &kube::api::ListParams,
    ) -> Result<kube::api::ObjectList<ConfigMap>, kube::Error> {
        self.api.list(params).await
    }

    async fn list_page(
        &self,
        params: &kube::api::ListParams,
    ) -> Result<ListPage<ConfigMap>, kube::Error> {
        let first = {
            let mut pages = self.pages.lock();
            *pages += 1;
            *pages == 1
        };
        if first {
            let body = r#"{"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":5}}]}"#;
            return ListPage::from_body(body.to_owned());
        }
        ListerWatcher::list_page(&self.api, params).await
    }

    async fn watch(
        &self,
        params: &kube::api::WatchParams,
        rv: &str,
    ) -> Result<kube_informer::list_watch::WatchStream<ConfigMap>, kube::Error> {
        ListerWatcher::watch(&self.api, params, rv).await
    }
}

#[tokio::test]
async fn a_page_that_does_not_decode_is_reported_and_the_list_retried() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..5).map(|i| format!("cm-{i}")));
    let api: Api<ConfigMap> = Api::namespaced(server.client().unwrap(), "demo");
    let lw = UndecodableFirstPage {
        api,
        pages: Mutex::new(0),
    };
    let h = Harness::start_with(server, lw, fast().streaming_lists(false)).await;
    h.converge().await;
    let errors = h.errors.lock().clone();
    assert!(
        errors.iter().any(|e| e.contains("invalid type")),
        "the decoding error is reported: {errors:?}"
    );
    h.stop().await;
}

/// A `ConfigMap` whose `Deserialize` (user code run by the decoder) panics on `boom`.
#[derive(Clone, Debug)]
struct Fragile(ConfigMap);

impl<'de> serde::Deserialize<'de> for Fragile {
    fn deserialize<D: serde::Deserializer<'de>>(decoder: D) -> Result<Self, D::Error> {
        let cm = ConfigMap::deserialize(decoder)?;
        assert_ne!(
            cm.metadata.name.as_deref(),
            Some("boom"),
            "a user's Deserialize panicked"
        );
        Ok(Self(cm))
    }
}

impl kube::Resource for Fragile {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::kind(dt)
    }
    fn group(dt: &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::group(dt)
    }
    fn version(dt: &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::version(dt)
    }
    fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
        ConfigMap::plural(dt)
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.0.metadata
    }
    fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &mut self.0.metadata
    }
}

/// A decoder that panics costs the watch it decoded for (reported, resumed with backoff),
/// never the reflector's task or the decoding threads; the cache keeps what it had.
#[tokio::test]
async fn a_panicking_deserialize_is_reported_and_the_reflector_lives_on() {
    let server = server(ServerConfig::default()).await;
    seed(&server, (0..3).map(|i| format!("cm-{i}")));
    let api: Api<Fragile> = Api::namespaced(server.client().unwrap(), "demo");
    let store: Store<Fragile> = Store::default();
    let fifo = Arc::new(RealFifo::new(Arc::new(store.clone())));
    let reflector = Arc::new(Reflector::new(api, fifo.clone(), fast()));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = errors.clone();
    reflector.set_error_handler(move |e: &ReflectorError| seen.lock().push(e.to_string()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (reflector, cancel) = (reflector.clone(), cancel.clone());
        async move { reflector.run(cancel).await }
    });
    let apply = tokio::spawn({
        let (fifo, store) = (fifo.clone(), store.clone());
        async move {
            while fifo
                .pop(|deltas, _| {
                    store
                        .insert(deltas.key().clone(), deltas.newest().object().clone())
                        .unwrap();
                    Ok::<(), ProcessError<Infallible>>(())
                })
                .await
                .is_ok()
            {}
        }
    });
    let decode_failures = |errors: &[String]| {
        errors
            .iter()
            .filter(|e| e.contains("decoding watch events failed"))
            .count()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while store.len() < 3 {
        assert!(tokio::time::Instant::now() < deadline, "never synced");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seed(&server, ["boom".to_owned()]);
    // Reported, resumed, reported again: the reflector is alive and retrying.
    while decode_failures(&errors.lock()) < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "errors: {:?}",
            errors.lock()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(store.len(), 3, "the cache keeps what it had");
    assert!(store.get_by_key("demo/boom").is_none());
    cancel.cancel();
    run.await.expect("the reflector's task did not panic");
    fifo.close();
    apply.await.unwrap();
}
