//! Metadata informers asked for protobuf read `PartialObjectMetadata` in protobuf, as
//! client-go's metadata client asks for it, for built-in kinds and custom resources alike,
//! on both servers: a factory's
//! metadata informer of ConfigMaps (paged LISTs, then a watch) converges on the server's
//! metadata through changes; a custom resource's metadata is listed and watched the same
//! way; every answer to a LIST and WATCH came in protobuf.

use std::time::Duration;

use e2e::{Backend, BackendOptions, both, ensure_namespace, recording};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{
        ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
        WatchEvent, WatchParams,
    },
    core::PartialObjectMeta,
};
use kube_informer::{
    factory::{FactoryOptions, SharedInformerFactory},
    list_watch::{ClientListerWatcher, ListerWatcher, Selectors},
    reflector::ReflectorOptions,
};
use serde_json::json;

const NS: &str = "protobuf-metadata";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Name, labels and resourceVersion of each object, sorted by name.
fn summary<'a>(
    metas: impl IntoIterator<Item = &'a kube::api::ObjectMeta>,
) -> Vec<(String, String, String)> {
    let mut out: Vec<_> = metas
        .into_iter()
        .map(|m| {
            (
                m.name.clone().unwrap_or_default(),
                json!(m.labels).to_string(),
                m.resource_version.clone().unwrap_or_default(),
            )
        })
        .collect();
    out.sort();
    out
}

async fn metadata_informers_read_protobuf_for_any_kind(backend: Backend) {
    let client = backend.client();
    let name = backend.name();
    ensure_namespace(&client, NS).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for cm in ["a", "b", "c"] {
        let object = json!({"metadata": {"name": cm, "labels": {"tier": "one"}, "annotations": {"note": "x"}}, "data": {"k": "v"}});
        configmaps
            .create(
                &PostParams::default(),
                &serde_json::from_value(object).unwrap(),
            )
            .await
            .unwrap();
    }
    let gadgets = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gadget"),
        "gadgets",
    );
    let gadget_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &gadgets);
    let gadget = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g", "labels": {"size": "3"}}, "spec": {"size": 3}});
    gadget_api
        .create(
            &PostParams::default(),
            &serde_json::from_value(gadget).unwrap(),
        )
        .await
        .unwrap();

    // A factory's metadata informer, asked for protobuf, listing a page at a time.
    let (recorder, seen) = recording(backend.informer_client());
    let lists = ReflectorOptions::default()
        .streaming_lists(false)
        .page_size(2);
    let factory = SharedInformerFactory::new(
        recorder.clone(),
        FactoryOptions::default()
            .protobuf(true)
            .selectors(Selectors::default().in_namespace(NS))
            .reflector(lists),
    );
    let informer = factory.metadata_informer::<ConfigMap>();
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(60))
        .await
        .unwrap();
    let pp = PatchParams::default();
    configmaps
        .patch(
            "b",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "two"}}})),
        )
        .await
        .unwrap();
    configmaps.delete("c", &Default::default()).await.unwrap();
    let mut last = String::new();
    let mut converged = false;
    for _ in 0..600 {
        let server = configmaps
            .list_metadata(&ListParams::default())
            .await
            .unwrap();
        let cached: Vec<_> = informer.store().list();
        let (server, cached) = (
            summary(server.items.iter().map(|o| &o.metadata)),
            summary(cached.iter().map(|o| &o.metadata)),
        );
        if server == cached {
            converged = true;
            break;
        }
        last = format!("server {server:?}\ncache {cached:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        converged,
        "{name}: the metadata cache never matched: {last}"
    );
    let cached_b = informer
        .store()
        .list()
        .into_iter()
        .find(|o| o.metadata.name.as_deref() == Some("b"))
        .expect("b cached");
    assert_eq!(
        cached_b.metadata.annotations.as_ref().unwrap()["note"],
        "x",
        "{name}: annotations read"
    );
    factory.shutdown().await;

    // A custom resource's metadata, in protobuf too: a LIST, then a WATCH of a change.
    let source =
        ClientListerWatcher::<PartialObjectMeta<DynamicObject>>::new(recorder, Some(NS), &gadgets)
            .metadata_only()
            .protobuf(true);
    let page = source.list_page(&ListParams::default()).await.unwrap();
    let version = page.metadata.resource_version.clone().unwrap();
    let items = page.into_items().unwrap();
    assert_eq!(
        summary(items.iter().map(|o| &o.metadata)),
        summary(
            gadget_api
                .list_metadata(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .map(|o| &o.metadata)
        ),
        "{name}"
    );
    let mut events = source
        .watch(&WatchParams::default().timeout(60), &version)
        .await
        .unwrap();
    gadget_api
        .patch(
            "g",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"size": "4"}}})),
        )
        .await
        .unwrap();
    let modified = loop {
        match events.next().await.expect("an event").unwrap() {
            WatchEvent::Modified(object) => break object,
            WatchEvent::Bookmark(_) => {}
            other => panic!("{name}: {other:?}"),
        }
    };
    let labels = modified.metadata.labels.unwrap();
    assert_eq!(labels["size"], "4", "{name}");

    // Every LIST and WATCH was answered in protobuf, the custom resource's too.
    let answers = seen.lock().clone();
    assert!(
        answers
            .iter()
            .any(|(uri, _)| uri.contains("/configmaps?") && uri.contains("watch=true")),
        "{name}: {answers:?}"
    );
    assert!(
        answers
            .iter()
            .any(|(uri, _)| uri.contains("/gadgets?") && uri.contains("watch=true")),
        "{name}: {answers:?}"
    );
    for (uri, content_type) in &answers {
        assert!(
            content_type.starts_with(PROTOBUF),
            "{name}: {uri} answered {content_type}"
        );
    }
}

both!(
    metadata_informers_read_protobuf_for_any_kind,
    BackendOptions {
        custom: vec![("example.com", "gadgets", "Gadget")],
        ..BackendOptions::default()
    }
);
