//! A watch: the stream cut into frames ([`split_frames`]), and each frame's
//! `metav1.WatchEvent` decoded ([`decode_watch_event`]).

use kube::{
    api::WatchEvent,
    core::watch::{Bookmark, BookmarkMeta},
};
use serde::de::DeserializeOwned;

use super::{
    DecodeError, ProtoKind, de,
    object::{envelope, status_of, text},
    wire::{RawValue, Reader},
};

/// Decodes one watch frame's body (after its length): a `metav1.WatchEvent` of `kind`.
///
/// # Errors
/// A frame that is not a watch event of `kind` (or a Status), or does not decode.
// Public for the protobuf tests, fuzzing, e2e and informer-bench; not part of the supported API.
#[doc(hidden)]
pub fn decode_watch_event<K: DeserializeOwned + 'static>(
    frame: &[u8],
    kind: ProtoKind,
) -> Result<WatchEvent<K>, DecodeError> {
    let mut reader = Reader::new(frame, 0);
    let (mut event, mut object) = ("", None);
    while let Some(field) = reader.next_field()? {
        match (field.number, field.value) {
            (1, RawValue::Len(t)) => event = text(t, reader.offset_of(t))?,
            (2, RawValue::Len(raw_extension)) => {
                let mut raw = Reader::new(raw_extension, reader.offset_of(raw_extension));
                while let Some(field) = raw.next_field()? {
                    if let (1, RawValue::Len(body)) = (field.number, field.value) {
                        object = Some((raw.offset_of(body), body));
                    }
                }
            }
            _ => {}
        }
    }
    let (offset, body) =
        object.ok_or_else(|| DecodeError::at(0, format!("a {event:?} event without an object")))?;
    let envelope = envelope(body, offset)?;
    match event {
        "ADDED" | "MODIFIED" | "DELETED" => {
            kind.expect(&envelope, false, offset)?;
            let object = kind.decode(envelope.raw, envelope.raw_offset)?;
            Ok(match event {
                "ADDED" => WatchEvent::Added(object),
                "MODIFIED" => WatchEvent::Modified(object),
                _ => WatchEvent::Deleted(object),
            })
        }
        "BOOKMARK" => {
            kind.expect(&envelope, false, offset)?;
            let object: BookmarkObject =
                de::decode(envelope.raw, envelope.raw_offset, kind.message, kind.skip)?;
            Ok(WatchEvent::Bookmark(Bookmark {
                types: kube::core::TypeMeta {
                    api_version: envelope.api_version.to_owned(),
                    kind: envelope.kind.to_owned(),
                },
                metadata: BookmarkMeta {
                    resource_version: object.metadata.resource_version.unwrap_or_default(),
                    annotations: object.metadata.annotations.unwrap_or_default(),
                },
            }))
        }
        "ERROR" => Ok(WatchEvent::Error(Box::new(status_of(&envelope, offset)?))),
        other => Err(DecodeError::at(
            0,
            format!("an event of unknown type {other:?}"),
        )),
    }
}

/// What a bookmark's object is read as: its metadata only.
#[derive(serde::Deserialize)]
struct BookmarkObject {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
}

/// Splits watch frames off a buffer: each a 4-byte big-endian length and that many bytes.
/// Returns the frames complete in `buf` and how many bytes they took. A header that claims
/// more than `max` ends the frames returned; called again from there, it is the error.
///
/// # Errors
/// When the first frame's header claims more than `max` bytes (checked before anything is
/// allocated for it).
// Public for the protobuf tests, fuzzing, e2e and informer-bench; not part of the supported API.
#[doc(hidden)]
pub fn split_frames(buf: &[u8], max: usize) -> Result<(Vec<&[u8]>, usize), DecodeError> {
    let (mut frames, mut at) = (Vec::new(), 0);
    while let Some(header) = buf.get(at..at + 4) {
        let len = u32::from_be_bytes(header.try_into().expect("4 bytes")) as usize;
        if len > max {
            if frames.is_empty() {
                return Err(DecodeError::at(
                    at,
                    format!("a watch frame of {len} bytes, over the limit of {max}"),
                ));
            }
            break;
        }
        let Some(frame) = buf.get(at + 4..at + 4 + len) else {
            break;
        };
        frames.push(frame);
        at += 4 + len;
    }
    Ok((frames, at))
}
