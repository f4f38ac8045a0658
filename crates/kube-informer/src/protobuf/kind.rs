//! [`ProtoKind`]: a kind that has a protobuf encoding, what its messages are decoded with,
//! and the check that a body holds that kind.

use std::fmt;

use serde::de::DeserializeOwned;

use kube_protobuf_schema as schema;

use super::{DecodeError, de, object::Envelope, typed::Direct};

/// A kind that has a protobuf encoding: what a lister-watcher of it decodes with.
// Public for the protobuf tests, fuzzing, e2e and informer-bench; not part of the supported API.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct ProtoKind {
    api_version: &'static str,
    kind: &'static str,
    pub(super) message: &'static schema::Message,
    pub(super) skip: de::Skip,
    /// The generated decoder of the k8s-openapi type of this kind.
    direct: Option<Direct>,
}

impl fmt::Debug for ProtoKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)
    }
}

impl ProtoKind {
    /// The kind `api_version`/`kind`, if it has a protobuf encoding (a built-in kind).
    pub fn of(api_version: &str, kind: &str) -> Option<ProtoKind> {
        let (api_version, kind, index) = schema::kind_entry(api_version, kind)?;
        Some(ProtoKind {
            api_version,
            kind,
            message: schema::message(index),
            skip: de::Skip::default(),
            direct: Direct::for_message(schema::message(index).name),
        })
    }

    /// Leave every object's `metadata.managedFields` out while decoding, never decoding them
    /// at all (a quarter of a typical object's bytes, and the costliest part to decode:
    /// each entry's field set is JSON): what factories do unless told to
    /// [`keep_managed_fields`](crate::factory::FactoryOptions::keep_managed_fields).
    #[must_use]
    pub fn without_managed_fields(mut self) -> Self {
        self.skip.managed_fields = true;
        self
    }

    /// Decode with the serde path even where a generated decoder reads this kind's type:
    /// what the tests compare the generated decoders with.
    // For the protobuf tests and informer-bench; not part of the supported API.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    #[must_use]
    pub fn without_generated_decoder(mut self) -> Self {
        self.direct = None;
        self
    }

    /// Whether a generated decoder reads this kind's k8s-openapi type.
    // For the protobuf tests and informer-bench; not part of the supported API.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn has_generated_decoder(&self) -> bool {
        self.direct.is_some()
    }

    /// `K`'s, if it has one.
    #[cfg(any(test, feature = "testing"))]
    pub fn of_type<K: k8s_openapi::Resource>() -> Option<ProtoKind> {
        Self::of(K::API_VERSION, K::KIND)
    }

    /// Whether `K` can be read from this kind's messages: true for k8s-openapi's types,
    /// `DynamicObject` and `Compact<K>` (which keeps the message), false for types that
    /// read JSON text themselves. Tried on an empty object.
    pub fn decodes<K: DeserializeOwned>(&self) -> bool {
        de::decode::<K>(&[], 0, self.message, self.skip).is_ok()
    }

    /// Decodes one object of this kind (its message, at `offset` in the body) as `K`: by the
    /// generated decoder when `K` is this kind's k8s-openapi type, else by the serde path.
    pub(super) fn decode<K: DeserializeOwned + 'static>(
        &self,
        buf: &[u8],
        offset: usize,
    ) -> Result<K, DecodeError> {
        if let Some(decoded) = self
            .direct
            .and_then(|d| d.decode::<K>(buf, offset, self.skip))
        {
            return decoded.map_err(|e| e.within(self.message.name));
        }
        de::decode(buf, offset, self.message, self.skip)
    }

    /// Checks that `envelope` holds this kind (with `list`, a list of it); `offset` is
    /// where its body starts, for the error.
    pub(super) fn expect(
        &self,
        envelope: &Envelope<'_>,
        list: bool,
        offset: usize,
    ) -> Result<(), DecodeError> {
        let kind_ok = if list {
            envelope.kind.strip_suffix("List") == Some(self.kind)
        } else {
            envelope.kind == self.kind
        };
        if envelope.api_version == self.api_version && kind_ok {
            return Ok(());
        }
        let wanted = if list {
            format!("{}List", self.kind)
        } else {
            self.kind.to_owned()
        };
        Err(DecodeError::at(
            offset,
            format!(
                "the body holds {} {}, not {} {wanted}",
                envelope.api_version, envelope.kind, self.api_version
            ),
        ))
    }
}
