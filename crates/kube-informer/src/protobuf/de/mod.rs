//! A serde `Deserializer` over protobuf messages: each message is presented as the JSON
//! object Kubernetes' JSON encoding makes of it (field names, inlined structs, zero values
//! omitted where JSON omits them, times as RFC 3339 strings, quantities as strings,
//! int-or-strings as either, raw JSON inlined), so k8s-openapi's own `Deserialize`
//! implementations build the objects: no per-type code, and no JSON text in between.
//!
//! This file holds the entry point ([`decode`]), what every value carries down (what to
//! skip, how deep it is) and [`Compact`](crate::compact::Compact)'s raw hand-off; `value`
//! reads one value, `fields` a message's fields, `repeated` repeated and map fields, and
//! `raw_json` the JSON embedded in `RawExtension` and `FieldsV1`; `check` finds whether a
//! message decodes without decoding it.

mod check;
mod fields;
mod raw_json;
mod repeated;
#[cfg(test)]
mod tests;
mod value;

use serde::de::{self, DeserializeSeed, IntoDeserializer, SeqAccess};

use kube_protobuf_schema::{Message, Ty};

pub(crate) use self::check::decodes;
use self::value::One;
pub(super) use self::value::utf8;
use super::{
    DecodeError,
    wire::{RawValue, Reader},
};

/// The newtype name [`Compact`](crate::compact::Compact) asks for to be handed a message
/// undecoded: this deserializer then visits a sequence of the message's index in the schema,
/// whether managedFields are to be left out, and its bytes (borrowed); other deserializers
/// visit a newtype as usual (no real type has this name).
pub(crate) const RAW_MESSAGE: &str = "$kube_informer::protobuf::RawMessage";

/// The hand-off of [`RAW_MESSAGE`]: the index, the skip, then the bytes.
struct RawMessage<'de> {
    index: Option<u16>,
    skip_managed_fields: Option<bool>,
    bytes: Option<&'de [u8]>,
}

impl<'de> SeqAccess<'de> for RawMessage<'de> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        if let Some(index) = self.index.take() {
            return seed.deserialize(index.into_deserializer()).map(Some);
        }
        if let Some(skip) = self.skip_managed_fields.take() {
            return seed.deserialize(skip.into_deserializer()).map(Some);
        }
        match self.bytes.take() {
            Some(bytes) => seed
                .deserialize(de::value::BorrowedBytesDeserializer::new(bytes))
                .map(Some),
            None => Ok(None),
        }
    }
}

/// What to leave out while decoding (as if the server had not sent it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Skip {
    /// `metadata.managedFields` of the decoded object (see [`Skip::managed_fields_at`]).
    pub(crate) managed_fields: bool,
}

/// The depth of the fields of the decoded object's own metadata: the object at 0, its
/// fields at 1, its metadata's at 2.
const OWN_METADATA_FIELDS: u16 = 2;

impl Skip {
    /// Whether an `ObjectMeta` whose fields are read at `depth` leaves out its
    /// `managedFields`: only the decoded object's own metadata (or a decoded `ObjectMeta`
    /// itself) does. A pod template's, or any deeper one, is data and is kept — as the
    /// JSON path keeps it.
    pub(crate) fn managed_fields_at(self, depth: u16) -> bool {
        self.managed_fields && depth <= OWN_METADATA_FIELDS
    }
}

/// How deep messages may nest (serde_json's limit too): a self-nesting message sent over
/// and over is an error, not a stack overflow.
pub(super) const MAX_DEPTH: u16 = 128;

/// What every value carries down: what to skip, and how deep it is.
#[derive(Clone, Copy, Debug)]
struct Ctx {
    skip: Skip,
    depth: u16,
}

impl Ctx {
    fn deeper(self, offset: usize) -> Result<Ctx, DecodeError> {
        if self.depth >= MAX_DEPTH {
            return Err(DecodeError::at(
                offset,
                format!("messages nested deeper than {MAX_DEPTH}"),
            ));
        }
        Ok(Ctx {
            depth: self.depth + 1,
            ..self
        })
    }
}

/// Where a field's value starts: its bytes for a length-delimited one, else its tag.
fn value_offset(reader: &Reader<'_>, value: &RawValue<'_>, tag: usize) -> usize {
    match value {
        RawValue::Len(bytes) => reader.offset_of(bytes),
        _ => tag,
    }
}

pub(crate) const OBJECT_META: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub(crate) const MANAGED_FIELDS: u32 = 17;

/// Decodes `buf`, a `message`, as `T`. `base` is `buf`'s offset in the whole body.
pub(crate) fn decode<'de, T: de::Deserialize<'de>>(
    buf: &'de [u8],
    base: usize,
    message: &'static Message,
    skip: Skip,
) -> Result<T, DecodeError> {
    let value = One {
        ty: Ty::Message(0),
        raw: RawValue::Len(buf),
        offset: base,
        message: Some(message),
        ctx: Ctx { skip, depth: 0 },
    };
    T::deserialize(value).map_err(|e| e.within(message.name))
}
