//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), decoded into the
//! k8s-openapi types informers already deliver: what client-go's in-cluster components
//! speak to the API server for built-in types.
//!
//! A body is the magic `k8s\0` and a `runtime.Unknown` envelope (the kind, and the object's
//! own message); a watch is a stream of frames, each a 4-byte big-endian length and a
//! `metav1.WatchEvent` whose object is such a body. The messages are read by a serde
//! `Deserializer` that presents each as the JSON object Kubernetes' JSON encoding makes of
//! it, following a schema generated from Kubernetes' own `generated.proto` files and Go
//! types (`tools/protobuf-schema.py`, releases 1.33 to 1.37): k8s-openapi's `Deserialize`
//! implementations build the objects, so every built-in type is covered without per-type
//! code, and the objects equal those decoded from JSON (checked on Kubernetes' golden files
//! for every kind k8s-openapi has, and against a real API server).
//!
//! What it buys, measured on realistic pods from kube-apiserver 1.36 (BENCHMARKS.md): about
//! 30% fewer bytes; the same decode cost as JSON for a whole typed object (most of it is
//! building the object, and each managed-fields entry is JSON inside either encoding); and,
//! with `ProtoKind::without_managed_fields` (what
//! [`strip_managed_fields`](crate::factory::FactoryOptions::strip_managed_fields) turns
//! on), 1.9× the pods/s of JSON on a LIST and 1.7× on a watch, because a length-prefixed
//! field is skipped without being read. In an informer (BENCHMARKS.md, against the peers)
//! that makes a 50k-pod sync 0.8× as long as over JSON, for as many watch events/s, which
//! is why factories ask for protobuf by default.
//!
//! Custom resources have no protobuf encoding: [`supports`] says which kinds do, and the
//! list/watch path asks for protobuf only for those, deciding each response by its
//! `Content-Type`.
//!
//! Every malformed input is a [`DecodeError`] that says what was wrong and at which byte;
//! no length is trusted before it is checked against what remains (and, for a watch frame,
//! against `MAX_FRAME`, client-go's limit of 16 MiB).

mod de;
mod error;
mod kind;
mod list;
mod message;
mod object;
mod watch;
#[rustfmt::skip]
mod wire;

use kube_protobuf_schema as schema;

pub(crate) use self::{
    de::RAW_MESSAGE,
    message::{decode_message, decode_metadata, without_managed_fields},
};
pub use self::{
    error::DecodeError,
    kind::ProtoKind,
    list::ListBody,
    object::{decode_object, decode_object_of, decode_status},
    watch::{decode_watch_event, split_frames},
};

/// The media type of a protobuf object or list.
pub(crate) const CONTENT_TYPE: &str = schema::CONTENT_TYPE;
/// What a LIST or GET asks for: protobuf, or JSON where the server has none (custom
/// resources).
// Public for informer-bench, which asks a real server with it; not part of the supported API.
#[doc(hidden)]
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";
/// What a WATCH asks for.
// Public for informer-bench, which asks a real server with it; not part of the supported API.
#[doc(hidden)]
pub const ACCEPT_WATCH: &str =
    "application/vnd.kubernetes.protobuf;stream=watch, application/json;stream=watch";
/// What a metadata-only LIST asks for: `PartialObjectMetadataList` in protobuf (any kind,
/// custom resources too), else in JSON; client-go's metadata client asks the same.
// Public for informer-bench, which asks a real server with it; not part of the supported API.
#[doc(hidden)]
pub const ACCEPT_METADATA_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json";
/// What a metadata-only WATCH (or GET) asks for: `PartialObjectMetadata` objects, in
/// protobuf frames first.
pub(crate) const ACCEPT_METADATA: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";
/// The largest watch frame accepted: client-go's limit.
// Public for the protobuf tests, e2e and informer-bench; not part of the supported API.
#[doc(hidden)]
pub const MAX_FRAME: usize = 16 << 20;

/// Whether the API server serves `K` in protobuf (a built-in kind).
pub fn supports<K: k8s_openapi::Resource>() -> bool {
    schema::kind(K::API_VERSION, K::KIND).is_some()
}
