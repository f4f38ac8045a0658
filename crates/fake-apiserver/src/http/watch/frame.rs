//! What a watch stream carries: its lines, the shapes of its events, and the ERROR and
//! BOOKMARK events, written without a stored object.

use std::sync::Arc;

use bytes::Bytes;
use kube_protobuf_schema::Message;
use serde_json::Value;

use crate::{
    http::table::Include,
    protobuf::{self, Format},
    registry::ResourceType,
    storage::{EventType, StoredObject},
};

/// One line of the stream.
pub(super) enum Line {
    Event(EventType, Arc<StoredObject>),
    /// A bookmark at a revision; `true` for the end of a streaming list's initial events.
    Bookmark(u64, bool),
}

/// An ERROR event carrying `status`.
pub(super) fn error_event(status: &Value, format: Format) -> Bytes {
    match format {
        Format::Protobuf(_) => protobuf::frame("ERROR", &protobuf::status(status)),
        Format::Json => Bytes::from(format!("{{\"type\":\"ERROR\",\"object\":{status}}}\n")),
    }
}

pub(super) fn bookmark(object_prefix: &Bytes, revision: u64, initial_events_end: bool) -> Bytes {
    let annotations = if initial_events_end {
        ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}"
    } else {
        ""
    };
    let prefix = String::from_utf8_lossy(object_prefix);
    Bytes::from(format!(
        "{{\"type\":\"BOOKMARK\",\"object\":{prefix}\"metadata\":{{\"resourceVersion\":\"{revision}\"{annotations}}}}}}}\n"
    ))
}

/// What a watch's events carry.
pub(crate) enum Shape {
    /// The objects.
    Object,
    /// One-row Tables (`kubectl get -w`).
    Table(Arc<ResourceType>, Include),
    /// `PartialObjectMetadata` (metadata informers).
    Metadata,
    /// The objects, as protobuf frames (the kind's message).
    Protobuf(Arc<ResourceType>, &'static Message),
    /// `PartialObjectMetadata`, as protobuf frames.
    MetadataProtobuf,
}

/// A protobuf watch's kind.
pub(super) struct ProtoWatch {
    pub(super) message: &'static Message,
    pub(super) api_version: String,
    pub(super) kind: String,
    /// `PartialObjectMetadata` messages of the objects (not the objects' own, cached).
    pub(super) metadata_only: bool,
}

pub(super) struct TableMode {
    pub(super) ty: Arc<ResourceType>,
    pub(super) include: Include,
    pub(super) columns_sent: bool,
}
