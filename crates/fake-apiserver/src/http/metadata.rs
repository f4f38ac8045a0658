//! Metadata-only answers, as a real server gives them to metadata informers: what
//! `Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1` (LIST) or
//! `as=PartialObjectMetadata` (GET, WATCH) asks for. Each object is reduced to
//! `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{..}}`, and a
//! list is a `PartialObjectMetadataList` of those (checked against kube-apiserver 1.36 by
//! `crates/e2e/tests/metadata_only.rs`). Asked for in protobuf first (client-go's metadata
//! client), they are protobuf `PartialObjectMetadata` messages, custom resources included;
//! errors stay JSON, as the real server sends them.

use bytes::Bytes;
use kube_protobuf_schema::Message;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{protobuf, status::ApiError};

/// What every metadata-only object starts with (GET, LIST items, watch events and
/// bookmarks).
pub(crate) const PREFIX: &str = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","#;

/// A metadata-only list's kind and apiVersion.
pub(crate) const LIST_KIND: &str = "PartialObjectMetadataList";
pub(crate) const API_VERSION: &str = "meta.k8s.io/v1";

/// Whether the `Accept` header asks for metadata only (any of its media types).
pub(crate) fn wanted(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"g=meta.k8s.io")
            && params.iter().any(|p| {
                matches!(
                    *p,
                    "as=PartialObjectMetadata" | "as=PartialObjectMetadataList"
                )
            })
    })
}

/// The protobuf message of `PartialObjectMetadata` when the first media type of `accept`
/// that asks for metadata is protobuf; `None`: JSON.
pub(crate) fn protobuf_wanted(accept: &str) -> Option<&'static Message> {
    let first = accept.split(',').find(|media| wanted(media))?;
    let media_type = first.split(';').next().unwrap_or("").trim();
    (media_type == protobuf::CONTENT_TYPE).then(message)
}

fn message() -> &'static Message {
    kube_protobuf_schema::kind(API_VERSION, "PartialObjectMetadata")
        .expect("PartialObjectMetadata in the schema")
}

fn metadata_of(body: &[u8]) -> Value {
    #[derive(Deserialize)]
    struct Only {
        #[serde(default)]
        metadata: Value,
    }
    serde_json::from_slice::<Only>(body)
        .map(|only| only.metadata)
        .unwrap_or_default()
}

/// A stored object as a `PartialObjectMetadata` message (no envelope: a LIST item).
pub(crate) fn message_bytes(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    protobuf::message_bytes(message(), &json!({"metadata": metadata_of(body)}))
}

/// A stored object as a whole protobuf `PartialObjectMetadata` body.
pub(crate) fn protobuf_object(body: &[u8]) -> Result<Bytes, ApiError> {
    let raw = message_bytes(body)?;
    Ok(Bytes::from(protobuf::envelope(
        API_VERSION,
        "PartialObjectMetadata",
        &raw,
    )))
}

/// A stored object's body (`{"metadata":{..},..}`) reduced to the tail that follows
/// [`PREFIX`]: `"metadata":{..}}`.
pub(crate) fn tail(body: &[u8]) -> Bytes {
    let metadata = metadata_of(body);
    let mut out = b"\"metadata\":".to_vec();
    serde_json::to_writer(&mut out, &metadata).expect("JSON values serialize");
    out.push(b'}');
    Bytes::from(out)
}

/// A stored object as a whole `PartialObjectMetadata`.
pub(crate) fn object(body: &[u8]) -> Bytes {
    let tail = tail(body);
    let mut out = Vec::with_capacity(PREFIX.len() + tail.len());
    out.extend_from_slice(PREFIX.as_bytes());
    out.extend_from_slice(&tail);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubes_and_client_gos_accept_headers_ask_for_metadata() {
        assert!(wanted(
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
        ));
        assert!(wanted(
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
        ));
        assert!(!wanted("application/json"));
        assert!(!wanted("application/json;as=Table;g=meta.k8s.io;v=v1"));
    }

    #[test]
    fn client_gos_order_decides_protobuf() {
        let client_go = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
        assert!(protobuf_wanted(client_go).is_some());
        let kube_rs = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert!(protobuf_wanted(kube_rs).is_none());
        let json_first = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert!(protobuf_wanted(json_first).is_none());
    }

    #[test]
    fn a_protobuf_object_is_its_metadata_in_the_envelope() {
        let body = br#"{"metadata":{"name":"a","labels":{"x":"y"}},"data":{"k":"v"}}"#;
        let bytes = protobuf_object(body).unwrap();
        let read = crate::protobuf::read_body(&bytes).unwrap();
        assert_eq!(
            read,
            serde_json::json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": {"name": "a", "labels": {"x": "y"}}})
        );
    }

    #[test]
    fn an_object_keeps_its_metadata_only() {
        let body = br#"{"metadata":{"name":"a","labels":{"x":"y"}},"data":{"k":"v"}}"#;
        let value: serde_json::Value = serde_json::from_slice(&object(body)).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                               "metadata": {"name": "a", "labels": {"x": "y"}}})
        );
    }
}
