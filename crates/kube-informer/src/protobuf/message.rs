//! Bare messages of the schema, by index, without an envelope: what
//! [`Compact`](crate::compact::Compact) keeps and decodes on demand (crate-internal).

use serde::de::DeserializeOwned;

use kube_protobuf_schema as schema;

use super::{
    DecodeError, de,
    typed::Direct,
    wire::{RawValue, Reader},
};

/// A message of the schema (by index), read as `T`: what [`Compact`](crate::compact::Compact)
/// decodes on demand. By the generated decoder when `T` is the message's k8s-openapi type
/// (a `Compact<Pod>` decoding its `Pod`), else by the serde path (`serde_json::Value` for
/// `json()`).
pub(crate) fn decode_message<T: DeserializeOwned + 'static>(
    index: u16,
    bytes: &[u8],
) -> Result<T, DecodeError> {
    let message = schema::message(index);
    let direct = Direct::for_message(message.name);
    if let Some(decoded) = direct.and_then(|d| d.decode::<T>(bytes, 0, de::Skip::default())) {
        return decoded.map_err(|e| e.within(message.name));
    }
    de::decode(bytes, 0, message, de::Skip::default())
}

/// Checks that a message of the schema (by index) decodes, so that decoding it later
/// cannot fail: what [`Compact`](crate::compact::Compact) checks on arrival. The check
/// builds nothing (`de::check`); only a refusal runs the decoder, whose error it returns.
/// Debug builds run the decoder every time and assert that both agree (the fuzzer's
/// referee).
pub(crate) fn check_message(index: u16, bytes: &[u8]) -> Result<(), DecodeError> {
    let message = schema::message(index);
    let accepted = de::decodes(bytes, message, de::Skip::default());
    if accepted && !cfg!(debug_assertions) {
        return Ok(());
    }
    let decoded = de::decode::<serde::de::IgnoredAny>(bytes, 0, message, de::Skip::default());
    debug_assert_eq!(
        accepted,
        decoded.is_ok(),
        "the check and the decoder disagree on a {}: {decoded:?}",
        message.name
    );
    decoded.map(drop)
}

/// The `metadata` field of a message of the schema, read as `T` with `managedFields`
/// skipped unread; `None` when the message has none.
pub(crate) fn decode_metadata<T: DeserializeOwned>(
    index: u16,
    bytes: &[u8],
) -> Result<Option<T>, DecodeError> {
    let message = schema::message(index);
    let Some(field) = message.fields.iter().find(|f| f.json == "metadata") else {
        return Ok(None);
    };
    let Some(object_meta) = field.ty.message() else {
        return Ok(None);
    };
    let mut reader = Reader::new(bytes, 0);
    let mut found = None;
    while let Some(raw) = reader.next_field()? {
        if let (true, RawValue::Len(meta)) = (raw.number == field.number, raw.value) {
            found = Some((reader.offset_of(meta), meta));
        }
    }
    let skip = de::Skip {
        managed_fields: true,
    };
    found
        .map(|(offset, meta)| de::decode(meta, offset, object_meta, skip))
        .transpose()
}

/// A message of the schema without `metadata.managedFields`: every other field's bytes as
/// they were (what a compact object keeps when managed fields are stripped).
pub(crate) fn without_managed_fields(index: u16, bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let message = schema::message(index);
    let metadata = message.fields.iter().find(|f| {
        f.json == "metadata" && f.ty.message().is_some_and(|m| m.name == de::OBJECT_META)
    });
    let Some(metadata) = metadata else {
        return Ok(bytes.to_vec());
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut reader = Reader::new(bytes, 0);
    loop {
        let start = reader.offset();
        let Some(field) = reader.next_field()? else {
            break;
        };
        match (field.number == metadata.number, field.value) {
            (true, RawValue::Len(meta)) => {
                let base = reader.offset_of(meta);
                let mut kept = Vec::with_capacity(meta.len());
                let mut inner = Reader::new(meta, base);
                loop {
                    let from = inner.offset() - base;
                    let Some(field) = inner.next_field()? else {
                        break;
                    };
                    if field.number != de::MANAGED_FIELDS {
                        kept.extend_from_slice(&meta[from..inner.offset() - base]);
                    }
                }
                put_varint(&mut out, (u64::from(metadata.number) << 3) | 2);
                put_varint(&mut out, kept.len() as u64);
                out.extend_from_slice(&kept);
            }
            _ => out.extend_from_slice(&bytes[start..reader.offset()]),
        }
    }
    Ok(out)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
