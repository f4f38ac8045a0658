//! Compact objects in a shared informer against fake-apiserver: synced by a streaming list
//! and by paged LISTs, kept in step by the watch, listed by label without decoding, decoded
//! in full on demand.

mod common;

use common::until;
use std::sync::Arc;

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Resource, core::Selector};
use kube_informer::{
    DeletedObject,
    compact::Compact,
    informer::{HandlerFuncs, HandlerOptions, InformerOptions, SharedIndexInformer},
    reflector::ReflectorOptions,
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

type CompactCm = Compact<ConfigMap>;

fn cms() -> Gvr {
    Gvr::core("configmaps")
}

fn cm(name: &str, app: &str, value: &str) -> serde_json::Value {
    json!({"metadata": {"name": name, "labels": {"app": app}}, "data": {"v": value}})
}

async fn round_trip(reflector: ReflectorOptions) {
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    let ns = Some("default");
    for (name, app) in [("web-1", "web"), ("web-2", "web"), ("db-1", "db")] {
        server.create(&cms(), ns, cm(name, app, "1")).unwrap();
    }
    let api: Api<CompactCm> = Api::namespaced(server.client().unwrap(), "default");
    let informer = SharedIndexInformer::new(api, InformerOptions::default().reflector(reflector));
    let log = Arc::new(Mutex::new(Vec::new()));
    let (a, u, d) = (log.clone(), log.clone(), log.clone());
    let name = |o: &CompactCm| o.meta().name.clone().unwrap();
    informer.add_event_handler(
        HandlerFuncs::new()
            .on_add(move |o: Arc<CompactCm>, _| a.lock().push(format!("add {}", name(&o))))
            .on_update(move |_, o: Arc<CompactCm>| u.lock().push(format!("update {}", name(&o))))
            .on_delete(move |o: DeletedObject<CompactCm>| {
                d.lock().push(format!("delete {}", name(o.object())))
            }),
        HandlerOptions::default(),
    );
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    until("synced", || informer.has_synced()).await;

    // Listers and label selectors read the parsed metadata: no decoding.
    let web = Selector::from_iter([("app", "web")]);
    let mut names: Vec<_> = informer
        .lister()
        .namespaced("default")
        .list(&web)
        .iter()
        .map(|o| o.meta().name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["web-1", "web-2"]);

    server.update(&cms(), ns, cm("web-1", "web", "2")).unwrap();
    server.delete(&cms(), ns, "db-1").unwrap();
    until("update and delete seen", || log.lock().len() == 5).await;
    assert_eq!(log.lock()[3..], ["update web-1", "delete db-1"]);

    let cached = informer
        .lister()
        .namespaced("default")
        .get("web-1")
        .unwrap();
    assert!(cached.meta().managed_fields.is_none(), "not parsed");
    let full: ConfigMap = cached.decode().unwrap();
    assert_eq!(full.data.unwrap()["v"], "2");
    assert!(full.metadata.managed_fields.is_some(), "kept in the JSON");
    assert_eq!(
        full.metadata.resource_version,
        cached.meta().resource_version
    );
    assert!(
        informer
            .lister()
            .namespaced("default")
            .get("db-1")
            .is_none()
    );

    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_objects_sync_by_streaming_list_and_follow_the_watch() {
    round_trip(ReflectorOptions::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_objects_sync_by_paged_lists_and_follow_the_watch() {
    let paged = ReflectorOptions::default()
        .streaming_lists(false)
        .consistent_first_list(true)
        .page_size(2);
    round_trip(paged).await;
}
