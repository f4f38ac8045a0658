//! Compact objects in a shared informer against fake-apiserver: synced by a streaming list
//! and by paged LISTs, kept in step by the watch, listed by label without decoding, decoded
//! in full on demand; read from JSON or kept as protobuf messages.

use crate::common;

use common::until;
use std::sync::Arc;

use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Resource, core::Selector};
use kube_informer::{
    DeletedObject,
    compact::Compact,
    informer::{HandlerFuncs, HandlerOptions, InformerOptions, SharedIndexInformer},
    list_watch::ClientListerWatcher,
    protobuf::{self, ProtoKind},
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

/// `protobuf`: the informer asks for protobuf, which fake-apiserver answers for ConfigMaps:
/// the compact objects then keep protobuf messages.
async fn round_trip(reflector: ReflectorOptions, protobuf: bool) {
    let server = FakeApiServer::start(ServerConfig::default()).await.unwrap();
    let ns = Some("default");
    for (name, app) in [("web-1", "web"), ("web-2", "web"), ("db-1", "db")] {
        server.create(&cms(), ns, cm(name, app, "1")).unwrap();
    }
    let source =
        ClientListerWatcher::<CompactCm>::new(server.client().unwrap(), ns, &()).protobuf(protobuf);
    let informer =
        SharedIndexInformer::new(source, InformerOptions::default().reflector(reflector));
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
    assert_eq!(cached.is_protobuf(), protobuf);
    let json: ConfigMap = serde_json::from_str(&cached.json()).unwrap();
    assert_eq!(json.data.as_ref().unwrap()["v"], "2");
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
    round_trip(ReflectorOptions::default(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_objects_kept_as_protobuf_sync_and_follow_the_watch() {
    round_trip(ReflectorOptions::default(), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compact_objects_sync_by_paged_lists_and_follow_the_watch() {
    let paged = ReflectorOptions::default()
        .streaming_lists(false)
        .consistent_first_list(true)
        .page_size(2);
    round_trip(paged.clone(), false).await;
    round_trip(paged, true).await;
}

/// Kubernetes' golden objects (the same object as protobuf and JSON): a compact object read
/// from the protobuf has the JSON's metadata (but managedFields), decodes to the same
/// object, and shows JSON that reads back as it.
fn compact_from_protobuf_is_faithful<K>(name: &str)
where
    K: k8s_openapi::Resource
        + Resource<DynamicType = ()>
        + serde::de::DeserializeOwned
        + PartialEq
        + std::fmt::Debug
        + 'static,
{
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/protobuf/testdata");
    let pb = std::fs::read(format!("{dir}/{name}.pb")).unwrap();
    let json = std::fs::read(format!("{dir}/{name}.json")).unwrap();
    let typed: K = serde_json::from_slice(&json).unwrap();
    let kind = ProtoKind::of_type::<K>().unwrap();
    let compact: Compact<K> = protobuf::decode_object_of(&pb, kind).unwrap();
    assert!(compact.is_protobuf(), "{name}");
    let mut meta = typed.meta().clone();
    meta.managed_fields = None;
    assert_eq!(compact.meta(), &meta, "{name}");
    assert_eq!(compact.decode().unwrap(), typed, "{name}");
    let from_json: K = serde_json::from_str(&compact.json()).unwrap();
    assert_eq!(from_json, typed, "{name}");
    // Kept smaller than its JSON.
    assert!(compact.stored_len() < json.len(), "{name}");
}

#[test]
fn compact_objects_read_from_protobuf_are_faithful() {
    use k8s_openapi::api::{apps::v1::Deployment, coordination::v1::Lease, core::v1::*};
    compact_from_protobuf_is_faithful::<Pod>("core.v1.Pod");
    compact_from_protobuf_is_faithful::<ConfigMap>("core.v1.ConfigMap");
    compact_from_protobuf_is_faithful::<Secret>("core.v1.Secret");
    compact_from_protobuf_is_faithful::<Node>("core.v1.Node");
    compact_from_protobuf_is_faithful::<Service>("core.v1.Service");
    compact_from_protobuf_is_faithful::<Deployment>("apps.v1.Deployment");
    compact_from_protobuf_is_faithful::<Lease>("coordination.k8s.io.v1.Lease");
}

#[test]
fn compact_objects_read_from_protobuf_without_managed_fields_keep_the_rest() {
    use k8s_openapi::api::core::v1::Pod;
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/protobuf/testdata");
    let pb = std::fs::read(format!("{dir}/core.v1.Pod.pb")).unwrap();
    let kind = ProtoKind::of_type::<Pod>().unwrap();
    let whole: Compact<Pod> = protobuf::decode_object_of(&pb, kind).unwrap();
    let lean: Compact<Pod> =
        protobuf::decode_object_of(&pb, kind.without_managed_fields()).unwrap();
    assert!(lean.stored_len() < whole.stored_len());
    assert_eq!(lean.meta(), whole.meta());
    let (mut expected, got) = (whole.decode().unwrap(), lean.decode().unwrap());
    assert!(expected.metadata.managed_fields.is_some());
    expected.metadata.managed_fields = None;
    assert_eq!(got, expected);
    // The JSON rendered from protobuf names its kind.
    let json: serde_json::Value = serde_json::from_str(&lean.json()).unwrap();
    assert_eq!(
        (json["apiVersion"].as_str(), json["kind"].as_str()),
        (Some("v1"), Some("Pod"))
    );
    assert!(json["metadata"].get("managedFields").is_none());
}

#[test]
fn a_compact_object_with_a_bad_message_is_refused_on_arrival() {
    // A ConfigMap whose `data` map entry holds a string that is not UTF-8: its metadata
    // reads, the rest does not; refused at once, not when `json()` is called.
    let kind = ProtoKind::of_type::<ConfigMap>().unwrap();
    let mut body = b"k8s\0\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12".to_vec();
    let message = b"\x0a\x03\x0a\x01a\x12\x07\x0a\x01k\x12\x02\xff\xfe";
    body.push(message.len() as u8);
    body.extend_from_slice(message);
    let error = protobuf::decode_object_of::<Compact<ConfigMap>>(&body, kind).unwrap_err();
    assert!(error.to_string().contains("UTF-8"), "{error}");
    let typed = protobuf::decode_object_of::<ConfigMap>(&body, kind).unwrap_err();
    assert!(typed.to_string().contains("UTF-8"), "{typed}");
}
