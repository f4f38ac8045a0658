//! Metadata-only answers (`Accept: application/json;as=PartialObjectMetadataList;...`), as
//! metadata informers and the sharder ask for them: LIST, GET and WATCH answer
//! `PartialObjectMetadata` on both servers.

use e2e::{Backend, both, ensure_namespace};
use futures_util::{AsyncBufReadExt, TryStreamExt};
use serde_json::{Value, json};

const NS: &str = "metadata-only";
const LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const ONE: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

async fn get(client: &kube::Client, path: &str, accept: &str) -> Value {
    let request = http::Request::builder()
        .uri(path)
        .header("accept", accept)
        .body(Vec::new())
        .unwrap();
    client.request::<Value>(request).await.unwrap()
}

async fn metadata_only_reads_answer_partial_object_metadata(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, NS).await;
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    for name in ["a", "b"] {
        let body = json!({"metadata": {"name": name, "labels": {"x": "y"}}, "data": {"k": "v"}});
        let request = http::Request::post(&path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        client.request::<Value>(request).await.unwrap();
    }
    let list = get(&client, &path, LIST).await;
    let name = backend.name();
    assert_eq!(
        (&list["kind"], &list["apiVersion"]),
        (
            &json!("PartialObjectMetadataList"),
            &json!("meta.k8s.io/v1")
        ),
        "{name}"
    );
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{name}");
    for item in items {
        assert_metadata_only(item, name);
    }
    let one = get(&client, &format!("{path}/a"), ONE).await;
    assert_metadata_only(&one, name);
    assert_eq!(one["metadata"]["name"], "a", "{name}");

    // A watch asked for metadata: events carry PartialObjectMetadata.
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let request = http::Request::builder()
        .uri(format!("{path}?watch=true&resourceVersion={rv}"))
        .header("accept", ONE)
        .body(Vec::new())
        .unwrap();
    let lines = client.request_stream(request).await.unwrap();
    let patch = http::Request::patch(format!("{path}/b"))
        .header("content-type", "application/merge-patch+json")
        .body(br#"{"data":{"k":"w"},"metadata":{"labels":{"x":"z"}}}"#.to_vec())
        .unwrap();
    client.request::<Value>(patch).await.unwrap();
    let mut lines = lines.lines();
    let line = lines.try_next().await.unwrap().unwrap();
    let event: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["type"], "MODIFIED", "{name}: {line}");
    assert_metadata_only(&event["object"], name);
    assert_eq!(event["object"]["metadata"]["labels"]["x"], "z", "{name}");

    // A write that asks for metadata gets the written object's metadata.
    let request = http::Request::patch(format!("{path}/a"))
        .header("content-type", "application/merge-patch+json")
        .header("accept", ONE)
        .body(br#"{"data":{"k":"u"}}"#.to_vec())
        .unwrap();
    let written: Value = client.request(request).await.unwrap();
    assert_metadata_only(&written, name);
}

/// A `PartialObjectMetadata`: its kind, its metadata, and nothing of the object's body.
fn assert_metadata_only(object: &Value, backend: &str) {
    assert_eq!(
        (&object["kind"], &object["apiVersion"]),
        (&json!("PartialObjectMetadata"), &json!("meta.k8s.io/v1")),
        "{backend}: {object}"
    );
    let fields: Vec<&String> = object.as_object().unwrap().keys().collect();
    assert_eq!(
        fields,
        ["apiVersion", "kind", "metadata"],
        "{backend}: {object}"
    );
    for field in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "labels",
        "managedFields",
    ] {
        assert!(
            object["metadata"].get(field).is_some(),
            "{backend}: no metadata.{field} in {object}"
        );
    }
}

both!(metadata_only_reads_answer_partial_object_metadata);
