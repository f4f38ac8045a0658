//! Protobuf on the wire, on both servers: the bytes of GET, LIST, WATCH and error answers
//! have the real server's shape (the `k8s\0` envelope's fields, the watch frames' fields,
//! the content types) and decode to the objects the JSON API shows; a custom resource is
//! answered in JSON, or refused (406) when the client takes only protobuf; and kubectl's
//! typed `create` commands, which send protobuf bodies, store what they say.

use base64::Engine;
use e2e::{Backend, BackendOptions, both, ensure_namespace};
use http_body_util::BodyExt;
use k8s_openapi::{
    ByteString,
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Secret},
    },
};
use kube::{Api, api::PostParams};
use kube_informer::protobuf::{self, ListBody, ProtoKind};
use serde_json::json;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A message's fields as read: number, and the bytes of a length-delimited value (empty
/// for a varint).
fn fields(mut bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    fn varint(bytes: &mut &[u8]) -> u64 {
        let mut value = 0;
        for shift in (0..64).step_by(7) {
            let byte = bytes[0];
            *bytes = &bytes[1..];
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
        }
        value
    }
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let key = varint(&mut bytes);
        let value = match key & 7 {
            0 => {
                varint(&mut bytes);
                Vec::new()
            }
            2 => {
                let len = varint(&mut bytes) as usize;
                let (value, rest) = bytes.split_at(len);
                bytes = rest;
                value.to_vec()
            }
            other => panic!("wire type {other} in {bytes:?}"),
        };
        out.push((key >> 3, value));
    }
    out
}

/// An object body's shape: the magic, then `runtime.Unknown`'s field numbers in order, and
/// the kind it names.
fn envelope_shape(body: &[u8]) -> (Vec<u64>, String, String) {
    let rest = body.strip_prefix(b"k8s\0").expect("the k8s\\0 magic");
    let unknown = fields(rest);
    let type_meta = fields(&unknown[0].1);
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
    (
        unknown.iter().map(|(n, _)| *n).collect(),
        text(&type_meta[0].1),
        text(&type_meta[1].1),
    )
}

/// A request's answer: status, content type, body.
async fn get(client: &kube::Client, path: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let request = http::Request::get(path)
        .header("accept", accept)
        .body(Vec::new())
        .unwrap();
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, content_type, body)
}

async fn protobuf_answers_have_the_real_servers_shape(backend: Backend) {
    let name = backend.name();
    let client = backend.client();
    let ns = "protobuf-wire";
    ensure_namespace(&client, ns).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    for (cm, data) in [("a", "1"), ("b", "2")] {
        let object = json!({"metadata": {"name": cm}, "data": {"k": data}, "binaryData": {"bin": "AAEC/w=="}});
        api.create(
            &PostParams::default(),
            &serde_json::from_value(object).unwrap(),
        )
        .await
        .unwrap();
    }
    let base = format!("/api/v1/namespaces/{ns}/configmaps");

    // GET: one envelope (TypeMeta, raw, contentEncoding, contentType), the same object.
    let (status, content_type, body) = get(
        &client,
        &format!("{base}/a"),
        &format!("{PROTOBUF}, application/json"),
    )
    .await;
    assert_eq!((status, content_type.as_str()), (200, PROTOBUF), "{name}");
    assert_eq!(
        envelope_shape(&body),
        (vec![1, 2, 3, 4], "v1".into(), "ConfigMap".into()),
        "{name}"
    );
    let read: ConfigMap = protobuf::decode_object(&body).unwrap();
    assert_eq!(read, api.get("a").await.unwrap(), "{name}");
    assert_eq!(
        read.binary_data.unwrap()["bin"],
        ByteString(vec![0, 1, 2, 255]),
        "{name}"
    );

    // LIST, paged: the list kind, its continue token, the items.
    let (status, content_type, body) = get(&client, &format!("{base}?limit=1"), PROTOBUF).await;
    assert_eq!((status, content_type.as_str()), (200, PROTOBUF), "{name}");
    assert_eq!(envelope_shape(&body).1, "v1", "{name}");
    assert_eq!(envelope_shape(&body).2, "ConfigMapList", "{name}");
    let list = ListBody::parse(&body, ProtoKind::of_type::<ConfigMap>().unwrap()).unwrap();
    let token = list.metadata.continue_.clone().expect("a continue token");
    assert_eq!(list.metadata.remaining_item_count, Some(1), "{name}");
    let items: Vec<ConfigMap> = list.items().unwrap();
    assert_eq!(items[0].metadata.name.as_deref(), Some("a"), "{name}");
    let (_, _, body) = get(
        &client,
        &format!("{base}?limit=1&continue={token}"),
        PROTOBUF,
    )
    .await;
    let list = ListBody::parse(&body, ProtoKind::of_type::<ConfigMap>().unwrap()).unwrap();
    let items: Vec<ConfigMap> = list.items().unwrap();
    assert_eq!(items[0].metadata.name.as_deref(), Some("b"), "{name}");

    // An error: a protobuf Status.
    let (status, content_type, body) = get(
        &client,
        &format!("{base}/missing"),
        &format!("{PROTOBUF}, application/json"),
    )
    .await;
    assert_eq!((status, content_type.as_str()), (404, PROTOBUF), "{name}");
    assert_eq!(
        envelope_shape(&body),
        (vec![1, 2, 3, 4], "v1".into(), "Status".into()),
        "{name}"
    );
    let status = protobuf::decode_status(&body).unwrap();
    assert_eq!(
        (status.code, status.reason.as_str()),
        (404, "NotFound"),
        "{name}"
    );

    // A streaming list: frames of a 4-byte length and a WatchEvent (type, RawExtension whose
    // raw is a whole envelope), the initial events, then the bookmark that ends them. The
    // watch's own timeout ends the body: long enough for a busy server to send them all.
    let path = format!(
        "{base}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=8"
    );
    let (status, content_type, body) =
        get(&client, &path, &format!("{PROTOBUF};stream=watch")).await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "application/vnd.kubernetes.protobuf;stream=watch"),
        "{name}"
    );
    let (frames, rest) = protobuf::split_frames(&body, protobuf::MAX_FRAME).unwrap();
    assert_eq!(rest, body.len(), "{name}: the whole body is frames");
    let mut seen = Vec::new();
    for frame in &frames {
        let event = fields(frame);
        assert_eq!(
            event.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            [1, 2],
            "{name}"
        );
        let raw_extension = fields(&event[1].1);
        assert_eq!(raw_extension.len(), 1, "{name}");
        let (numbers, api_version, kind) = envelope_shape(&raw_extension[0].1);
        assert_eq!(
            (numbers, api_version.as_str(), kind.as_str()),
            (vec![1, 2, 3, 4], "v1", "ConfigMap"),
            "{name}"
        );
        let kind = ProtoKind::of_type::<ConfigMap>().unwrap();
        let decoded = protobuf::decode_watch_event::<ConfigMap>(frame, kind).unwrap();
        seen.push(match decoded {
            kube::api::WatchEvent::Added(cm) => format!("ADDED {}", cm.metadata.name.unwrap()),
            kube::api::WatchEvent::Bookmark(b) => format!(
                "BOOKMARK end={:?}",
                b.metadata.annotations.get("k8s.io/initial-events-end")
            ),
            other => format!("{other:?}"),
        });
    }
    assert_eq!(
        seen,
        ["ADDED a", "ADDED b", "BOOKMARK end=Some(\"true\")"],
        "{name}"
    );
}

both!(protobuf_answers_have_the_real_servers_shape);

/// A custom resource has no protobuf: JSON when the client also takes JSON, 406 when not.
/// Errors are `Status`es, which protobuf carries: they come in protobuf when the client asks
/// for it first, custom resource or not.
async fn custom_resources_answer_json_or_refuse_protobuf_only(backend: Backend) {
    let name = backend.name();
    let client = backend.client();
    ensure_namespace(&client, "protobuf-custom").await;
    let path = "/apis/example.com/v1/namespaces/protobuf-custom/gadgets";
    let (status, content_type, _) =
        get(&client, path, &format!("{PROTOBUF}, application/json")).await;
    assert_eq!(status, 200, "{name}");
    assert!(
        content_type.starts_with("application/json"),
        "{name}: {content_type}"
    );
    // The refusal itself is a Status, which protobuf can carry.
    let (status, content_type, body) = get(&client, path, PROTOBUF).await;
    assert_eq!((status, content_type.as_str()), (406, PROTOBUF), "{name}");
    let status = protobuf::decode_status(&body).unwrap();
    assert_eq!(status.reason, "NotAcceptable", "{name}");
    let (status, content_type, body) = get(
        &client,
        &format!("{path}/missing"),
        &format!("{PROTOBUF}, application/json"),
    )
    .await;
    assert_eq!((status, content_type.as_str()), (404, PROTOBUF), "{name}");
    let status = protobuf::decode_status(&body).unwrap();
    assert_eq!(status.reason, "NotFound", "{name}");
}

both!(
    custom_resources_answer_json_or_refuse_protobuf_only,
    BackendOptions {
        custom: vec![("example.com", "gadgets", "Gadget")],
        ..BackendOptions::default()
    }
);

/// kubectl's typed `create` commands send protobuf bodies (checked in its own log) and get
/// protobuf answers; what they store is what they say.
async fn kubectl_typed_creates_send_protobuf(backend: Backend) {
    let name = backend.name();
    let ns = "kubectl-typed";
    let Some(log) = backend.kubectl(&["create", "namespace", ns, "-v=8"]).await else {
        return;
    };
    assert!(
        log.contains(&format!("namespace/{ns} created")),
        "{name}: {log}"
    );
    let headers: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("Content-Type:"))
        .collect();
    assert!(
        headers.iter().filter(|l| l.contains(PROTOBUF)).count() >= 2,
        "{name}: a protobuf request and answer: {headers:?}"
    );
    for args in [
        &["create", "configmap", "c", "--from-literal=a=b", "-n", ns][..],
        &[
            "create",
            "secret",
            "generic",
            "s",
            "--from-literal=k=v",
            "-n",
            ns,
        ],
        &[
            "create",
            "deployment",
            "d",
            "--image=nginx",
            "--replicas=2",
            "-n",
            ns,
        ],
    ] {
        let out = backend.kubectl(args).await.expect("kubectl");
        assert!(out.contains("created"), "{name}: {out}");
    }
    let client = backend.client();
    let cm: ConfigMap = Api::namespaced(client.clone(), ns).get("c").await.unwrap();
    assert_eq!(cm.data.unwrap()["a"], "b", "{name}");
    let secret: Secret = Api::namespaced(client.clone(), ns).get("s").await.unwrap();
    assert_eq!(
        secret.data.unwrap()["k"],
        ByteString(b"v".to_vec()),
        "{name}"
    );
    let deployment: Deployment = Api::namespaced(client.clone(), ns).get("d").await.unwrap();
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2), "{name}");
    let labels = json!({"app": "d"});
    assert_eq!(
        serde_json::to_value(&spec.selector.match_labels).unwrap(),
        labels,
        "{name}"
    );
    assert_eq!(
        serde_json::to_value(&spec.template.metadata.as_ref().unwrap().labels).unwrap(),
        labels,
        "{name}"
    );
    let container = &spec.template.spec.unwrap().containers[0];
    assert_eq!(
        (container.name.as_str(), container.image.as_deref()),
        ("nginx", Some("nginx")),
        "{name}"
    );
    // A protobuf GET by kubectl reads the same secret back.
    let out = backend
        .kubectl(&["get", "secret", "s", "-n", ns, "-o", "jsonpath={.data.k}"])
        .await
        .expect("kubectl");
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(out.trim())
            .unwrap(),
        b"v",
        "{name}"
    );
    let out = backend
        .kubectl(&["delete", "configmap", "c", "-n", ns])
        .await
        .expect("kubectl");
    assert!(out.contains("deleted"), "{name}: {out}");
}

both!(kubectl_typed_creates_send_protobuf);
