//! One object: the `k8s\0` + `runtime.Unknown` envelope around it, a GET's answer
//! ([`decode_object`]) and a `metav1.Status` ([`decode_status`]).

use kube::core::Status;
#[cfg(feature = "testing")]
use serde::de::DeserializeOwned;

use kube_protobuf_schema::{self as schema, MAGIC};

#[cfg(feature = "testing")]
use super::ProtoKind;
use super::{
    DecodeError, de,
    wire::{RawValue, Reader},
};

/// The kind and message a body holds.
pub(super) struct Envelope<'a> {
    pub(super) api_version: &'a str,
    pub(super) kind: &'a str,
    pub(super) raw: &'a [u8],
    pub(super) raw_offset: usize,
}

/// Reads `k8s\0` and the `runtime.Unknown` around an object. `base` is `body`'s offset in
/// what was received.
pub(super) fn envelope(body: &[u8], base: usize) -> Result<Envelope<'_>, DecodeError> {
    let Some(rest) = body.strip_prefix(MAGIC) else {
        let start = &body[..body.len().min(4)];
        return Err(DecodeError::at(
            base,
            format!("not a protobuf object: it starts {start:?}, not k8s\\0"),
        ));
    };
    let mut reader = Reader::new(rest, base + MAGIC.len());
    let mut envelope = Envelope {
        api_version: "",
        kind: "",
        raw: &[],
        raw_offset: 0,
    };
    while let Some(field) = reader.next_field()? {
        match (field.number, field.value) {
            (1, RawValue::Len(type_meta)) => {
                let mut meta = Reader::new(type_meta, reader.offset_of(type_meta));
                while let Some(field) = meta.next_field()? {
                    match (field.number, field.value) {
                        (1, RawValue::Len(v)) => envelope.api_version = text(v, meta.offset_of(v))?,
                        (2, RawValue::Len(k)) => envelope.kind = text(k, meta.offset_of(k))?,
                        _ => {}
                    }
                }
            }
            (2, RawValue::Len(raw)) => {
                envelope.raw = raw;
                envelope.raw_offset = reader.offset_of(raw);
            }
            (3, RawValue::Len(encoding)) if !encoding.is_empty() => {
                let encoding = String::from_utf8_lossy(encoding);
                return Err(DecodeError::at(
                    reader.offset(),
                    format!("content encoding {encoding:?} is not supported"),
                ));
            }
            _ => {}
        }
    }
    Ok(envelope)
}

pub(super) fn text(bytes: &[u8], offset: usize) -> Result<&str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|e| DecodeError::at(offset, format!("not UTF-8: {e}")))
}

/// Decodes one object (a GET's answer) as `K`.
///
/// # Errors
/// A body that is not a protobuf object of `K`'s kind, or does not decode.
// For the protobuf tests, fuzzing and e2e (feature `testing`); not part of the supported API.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub fn decode_object<K>(body: &[u8]) -> Result<K, DecodeError>
where
    K: k8s_openapi::Resource + DeserializeOwned + 'static,
{
    let kind = ProtoKind::of_type::<K>().ok_or_else(|| {
        DecodeError::at(
            0,
            format!("{} {} has no protobuf encoding", K::API_VERSION, K::KIND),
        )
    })?;
    decode_object_of(body, kind)
}

/// [`decode_object`] for a kind known at run time.
///
/// # Errors
/// As [`decode_object`].
// For the protobuf and compact tests and fuzzing (feature `testing`); not part of the
// supported API.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub fn decode_object_of<K: DeserializeOwned + 'static>(
    body: &[u8],
    kind: ProtoKind,
) -> Result<K, DecodeError> {
    let envelope = envelope(body, 0)?;
    kind.expect(&envelope, false, 0)?;
    kind.decode(envelope.raw, envelope.raw_offset)
}

/// The `metav1.Status` an envelope holds (an error's answer, or an `ERROR` event's object).
pub(super) fn status_of(envelope: &Envelope<'_>, offset: usize) -> Result<Status, DecodeError> {
    if envelope.kind != "Status" {
        return Err(DecodeError::at(
            offset,
            format!("the body holds {}, not a Status", envelope.kind),
        ));
    }
    let message =
        schema::named("k8s.io.apimachinery.pkg.apis.meta.v1.Status").expect("Status in the schema");
    de::decode(
        envelope.raw,
        envelope.raw_offset,
        message,
        de::Skip::default(),
    )
}

/// Decodes a `metav1.Status` body (an error's answer in protobuf).
///
/// # Errors
/// A body that is not a protobuf Status.
// Public for the protobuf tests, fuzzing and e2e; not part of the supported API.
#[doc(hidden)]
pub fn decode_status(body: &[u8]) -> Result<Status, DecodeError> {
    status_of(&envelope(body, 0)?, 0)
}
