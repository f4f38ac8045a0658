//! One stored object version: its JSON bytes, serialized once, and the metadata the server
//! needs to route, select and validate without parsing them again.

use std::sync::OnceLock;

use bytes::Bytes;
use kube_protobuf_schema::Message;
use serde_json::Value;

use crate::{meta::Meta, protobuf, status::ApiError};

/// An object version as stored: `body` is its JSON *without* `kind` and `apiVersion` (exactly
/// how LIST items are written); GET and WATCH splice those two in front.
#[derive(Debug)]
pub(crate) struct StoredObject {
    pub(crate) meta: Meta,
    pub(crate) resource_version: u64,
    pub(crate) body: Bytes,
    /// Its protobuf message, written the first time a client asks for protobuf.
    protobuf: OnceLock<Result<Bytes, ApiError>>,
}

impl StoredObject {
    /// Serializes `value` (its `kind`/`apiVersion` are dropped).
    pub(crate) fn new(mut value: Value, resource_version: u64) -> Self {
        if let Some(map) = value.as_object_mut() {
            map.remove("kind");
            map.remove("apiVersion");
        }
        let meta = Meta::from_value(&value);
        let body = Bytes::from(serde_json::to_vec(&value).unwrap_or_else(|_| b"{}".to_vec()));
        Self {
            meta,
            resource_version,
            body,
            protobuf: OnceLock::new(),
        }
    }

    /// Its protobuf message (without the envelope: a LIST item as it is), `message` being
    /// its kind's (the same for every call: an object has one kind).
    pub(crate) fn protobuf(&self, message: &Message) -> Result<Bytes, ApiError> {
        self.protobuf
            .get_or_init(|| {
                let value: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
                protobuf::message_bytes(message, &value).map(Bytes::from)
            })
            .clone()
    }

    /// The object as a JSON value, with `kind` and `apiVersion`.
    pub(crate) fn value(&self, kind: &str, api_version: &str) -> Value {
        let mut value: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
        if let Some(map) = value.as_object_mut() {
            map.insert("kind".into(), kind.into());
            map.insert("apiVersion".into(), api_version.into());
        }
        value
    }

    /// The body after its opening `{`, to splice after a `{"kind":..,"apiVersion":..,`
    /// prefix.
    pub(crate) fn body_tail(&self) -> Bytes {
        if self.body.len() <= 2 {
            return Bytes::from_static(b"}");
        }
        self.body.slice(1..)
    }
}
