//! Metadata-only answers, as a real server gives them to metadata informers: what
//! `Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1` (LIST) or
//! `as=PartialObjectMetadata` (GET, WATCH) asks for. Each object is reduced to
//! `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{..}}`, and a
//! list is a `PartialObjectMetadataList` of those (checked against kube-apiserver 1.36 by
//! `crates/e2e/tests/metadata_only.rs`).

use bytes::Bytes;
use serde::Deserialize;

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

/// A stored object's body (`{"metadata":{..},..}`) reduced to the tail that follows
/// [`PREFIX`]: `"metadata":{..}}`.
pub(crate) fn tail(body: &[u8]) -> Bytes {
    #[derive(Deserialize)]
    struct Only {
        #[serde(default)]
        metadata: serde_json::Value,
    }
    let metadata = serde_json::from_slice::<Only>(body)
        .map(|only| only.metadata)
        .unwrap_or_default();
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
