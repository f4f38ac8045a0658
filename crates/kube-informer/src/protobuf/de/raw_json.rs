//! The JSON embedded in a `RawExtension` or `FieldsV1`: read out of its message, and
//! checked where serde_json's skipping would accept what its parsing refuses.

use super::value::One;
use crate::protobuf::{
    DecodeError,
    wire::{RawValue, Reader},
};

/// Whether `json` has what serde_json's skipping accepts and its parsing may refuse: a `\u`
/// escape, a number with an exponent or of over 300 characters (out of `f64`'s range), or
/// nesting over 100 deep (its parser stops at 128). One pass over the bytes, no allocation.
fn skipping_may_accept_more(json: &[u8]) -> bool {
    let (mut depth, mut number, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &byte in json {
        if in_string {
            match (escaped, byte) {
                (true, b'u') => return true,
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'0'..=b'9' | b'-' | b'+' | b'.' => {
                number += 1;
                if number > 300 {
                    return true;
                }
            }
            b'e' | b'E' if number > 0 => return true,
            b'{' | b'[' => {
                depth += 1;
                if depth > 100 {
                    return true;
                }
                number = 0;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                number = 0;
            }
            b'"' => {
                in_string = true;
                number = 0;
            }
            _ => number = 0,
        }
    }
    false
}

/// [`raw_json`], for a reader that may skip it (`deserialize_any`: `IgnoredAny`, the check
/// a compact object gets on arrival, and `serde_json::Value`). serde_json's skipping reads
/// neither the UTF-8 of strings, nor their `\u` escapes (a lone UTF-16 surrogate), nor the
/// range of numbers, nor the depth, where reading them into values refuses all four: the
/// bytes are checked as UTF-8, and JSON that has any of the others (rare in field sets) is
/// parsed whole, so whatever passes the check also decodes. (Found by
/// tests/protobuf_fuzz.rs, UTF-8, and review, the rest.) Typed objects read field sets into
/// `serde_json::Value`s through `deserialize_newtype_struct`, which checks all of it itself:
/// they do not pay for this (a 15% slower pod decode when they did).
pub(super) fn checked_raw_json(one: One<'_>) -> Result<&[u8], DecodeError> {
    let raw = raw_json(one)?;
    let not_json =
        |e: &dyn std::fmt::Display| DecodeError::at(one.offset, format!("embedded JSON: {e}"));
    std::str::from_utf8(raw).map_err(|e| not_json(&e))?;
    if skipping_may_accept_more(raw) {
        serde_json::from_slice::<serde_json::Value>(raw).map_err(|e| not_json(&e))?;
    }
    Ok(raw)
}

/// A RawExtension's or FieldsV1's bytes: JSON (CBOR is refused with a clear error).
pub(super) fn raw_json(one: One<'_>) -> Result<&[u8], DecodeError> {
    let mut reader = Reader::new(one.bytes()?, one.offset);
    let mut raw: &[u8] = &[];
    while let Some(field) = reader.next_field()? {
        if let (1, RawValue::Len(bytes)) = (field.number, field.value) {
            raw = bytes;
        }
    }
    if raw.starts_with(&[0xd9, 0xd9, 0xf7]) {
        return Err(DecodeError::at(
            one.offset,
            "embedded CBOR is not supported".to_owned(),
        ));
    }
    Ok(raw)
}
