//! Informers over the replay server's protobuf: a protobuf informer and a JSON one, on the
//! same traffic (paged LIST, then watch events and a bookmark), end with equal caches; the
//! server answers each in what it asked for.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use fake_apiserver::replay::{ReplayEvent, ReplayOptions, ReplayServer, Traffic};
use k8s_openapi::api::core::v1::Pod;
use kube_informer::{
    informer::{InformerOptions, SharedIndexInformer},
    list_watch::ClientListerWatcher,
    reflector::ReflectorOptions,
};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn pod(name: &str, rv: u64, image: &str) -> Vec<u8> {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv.to_string(),
                     "creationTimestamp": "2026-11-20T10:00:00Z", "labels": {"app": "web"},
                     "managedFields": [{"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                                        "time": "2026-11-20T10:00:01Z", "fieldsType": "FieldsV1",
                                        "fieldsV1": {"f:status": {"f:phase": {}}}, "subresource": "status"}]},
        "spec": {"containers": [{"name": "c", "image": image, "ports": [{"containerPort": 80}],
                                 "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                                 "readinessProbe": {"httpGet": {"path": "/", "port": "http"}}}]},
        "status": {"phase": "Running", "startTime": "2026-11-20T10:00:02Z"}
    })
    .to_string()
    .into_bytes()
}

fn traffic() -> Traffic {
    Traffic {
        list_kind: "PodList".into(),
        api_version: "v1".into(),
        list_resource_version: 5,
        objects: (1..=5)
            .map(|i| Bytes::from(pod(&format!("p-{i}"), i, "nginx:1")))
            .collect(),
        events: vec![
            ReplayEvent::new(6, "ADDED", &pod("p-6", 6, "nginx:1")),
            ReplayEvent::new(7, "MODIFIED", &pod("p-1", 7, "nginx:2")),
            ReplayEvent::new(8, "DELETED", &pod("p-2", 8, "nginx:1")),
        ],
    }
}

/// A client to `url` that records the content type of every answer.
fn recording(url: &str) -> (kube::Client, Arc<Mutex<Vec<String>>>) {
    let inner = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (inner, log) = (inner.clone(), log.clone());
        async move {
            let response = inner.send(request).await?;
            let content_type = response.headers().get("content-type");
            let content_type = content_type.and_then(|v| v.to_str().ok()).unwrap_or("");
            log.lock().push(content_type.to_owned());
            Ok::<_, kube::Error>(response)
        }
    });
    (kube::Client::new(service, "default"), seen)
}

/// The cache of an informer (protobuf or JSON) once it has seen every event, and the
/// content types it was answered in.
async fn cache(server: &ReplayServer, protobuf: bool) -> (Vec<Pod>, Vec<String>) {
    let (client, answers) = recording(server.url());
    let source = ClientListerWatcher::<Pod>::new(client, None, &()).protobuf(protobuf);
    let reflector = ReflectorOptions::default()
        .streaming_lists(false)
        .consistent_first_list(true)
        .page_size(2);
    let informer =
        SharedIndexInformer::new(source, InformerOptions::default().reflector(reflector));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (informer, cancel) = (informer.clone(), cancel.clone());
        async move { informer.run(cancel).await }
    });
    informer
        .wait_for_sync(Duration::from_secs(30))
        .await
        .unwrap();
    // Past the last event: p-6 added, p-1 changed, p-2 gone.
    let seen = || {
        let store = informer.store();
        store.get_by_key("ns/p-6").is_some()
            && store.get_by_key("ns/p-2").is_none()
            && store
                .get_by_key("ns/p-1")
                .unwrap()
                .metadata
                .resource_version
                .as_deref()
                == Some("7")
    };
    tokio::time::timeout(Duration::from_secs(30), async {
        while !seen() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every event applied");
    cancel.cancel();
    task.await.unwrap();
    let mut pods: Vec<Pod> = informer
        .store()
        .list()
        .into_iter()
        .map(|p| (*p).clone())
        .collect();
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let answers = answers.lock().clone();
    (pods, answers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_and_json_informers_over_the_replay_server_end_with_the_same_cache() {
    let options = ReplayOptions {
        protobuf: true,
        ..ReplayOptions::default()
    };
    let server = ReplayServer::start_with_options(traffic(), options)
        .await
        .unwrap();
    let (from_protobuf, answered) = cache(&server, true).await;
    // Three LIST pages and at least one watch.
    assert!(answered.len() >= 4, "{answered:?}");
    assert!(
        answered[..3]
            .iter()
            .all(|t| t == "application/vnd.kubernetes.protobuf"),
        "{answered:?}"
    );
    assert!(
        answered[3..]
            .iter()
            .all(|t| t == "application/vnd.kubernetes.protobuf;stream=watch"),
        "{answered:?}"
    );
    let (from_json, answered) = cache(&server, false).await;
    assert!(
        answered.iter().all(|t| t == "application/json"),
        "{answered:?}"
    );
    assert_eq!(from_protobuf.len(), 5);
    assert_eq!(from_protobuf, from_json);
    let p1 = from_protobuf
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("p-1"))
        .unwrap();
    assert_eq!(
        p1.spec.as_ref().unwrap().containers[0].image.as_deref(),
        Some("nginx:2")
    );
    assert_eq!(p1.metadata.managed_fields.as_ref().unwrap().len(), 1);
}

#[tokio::test]
async fn a_kind_protobuf_cannot_carry_is_refused_at_start() {
    let traffic = Traffic {
        list_kind: "WidgetList".into(),
        api_version: "example.com/v1".into(),
        ..Traffic::default()
    };
    let options = ReplayOptions {
        protobuf: true,
        ..ReplayOptions::default()
    };
    let error = ReplayServer::start_with_options(traffic, options)
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("Widget (example.com/v1) has no protobuf encoding"),
        "{error}"
    );
}
