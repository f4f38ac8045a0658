//! The JSON embedded in a `RawExtension` or `FieldsV1`: read out of its message, and
//! checked where serde_json's skipping would accept what its parsing refuses.

use super::value::One;
use crate::protobuf::{
    DecodeError,
    wire::{RawValue, Reader},
};

/// Whether `json` has what serde_json's skipping accepts and its parsing may refuse: a `\u`
/// escape, a number with an exponent or of over 300 characters (out of `f64`'s range), or
/// nesting over 100 deep (its parser stops at 128). One pass over the bytes, no allocation;
/// strings (most of a field set) are crossed by `memchr` to their next quote or backslash.
fn skipping_may_accept_more(json: &[u8]) -> bool {
    let (mut depth, mut number, mut at) = (0usize, 0usize, 0usize);
    while let Some(&byte) = json.get(at) {
        at += 1;
        match byte {
            b'"' => {
                number = 0;
                loop {
                    let rest = json.get(at..).unwrap_or_default();
                    let Some(next) = memchr::memchr2(b'"', b'\\', rest) else {
                        return false; // never closed: the skipping refuses it too
                    };
                    at += next;
                    if json[at] == b'"' {
                        at += 1;
                        break;
                    }
                    if json.get(at + 1) == Some(&b'u') {
                        return true;
                    }
                    at += 2; // an escape: the backslash and the byte it escapes
                }
            }
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
/// they do not pay for this (a 15% slower pod decode when they did, `benches/decode.rs`).
pub(super) fn checked_raw_json(one: One<'_>) -> Result<&[u8], DecodeError> {
    let raw = raw_json(one)?;
    check_skippable(raw, one.offset)?;
    Ok(raw)
}

/// The part of [`checked_raw_json`] that reads the JSON itself (see there).
pub(super) fn check_skippable(raw: &[u8], offset: usize) -> Result<(), DecodeError> {
    let not_json =
        |e: &dyn std::fmt::Display| DecodeError::at(offset, format!("embedded JSON: {e}"));
    std::str::from_utf8(raw).map_err(|e| not_json(&e))?;
    if skipping_may_accept_more(raw) {
        serde_json::from_slice::<serde_json::Value>(raw).map_err(|e| not_json(&e))?;
    }
    Ok(())
}

/// A RawExtension's or FieldsV1's bytes: JSON (CBOR is refused with a clear error).
pub(super) fn raw_json(one: One<'_>) -> Result<&[u8], DecodeError> {
    raw_json_of(one.bytes()?, one.offset)
}

/// [`raw_json`] of the message's `bytes`, at `offset` in the body.
pub(super) fn raw_json_of(bytes: &[u8], offset: usize) -> Result<&[u8], DecodeError> {
    let mut reader = Reader::new(bytes, offset);
    let mut raw: &[u8] = &[];
    while let Some(field) = reader.next_field()? {
        if let (1, RawValue::Len(bytes)) = (field.number, field.value) {
            raw = bytes;
        }
    }
    if raw.starts_with(&[0xd9, 0xd9, 0xf7]) {
        return Err(DecodeError::at(
            offset,
            "embedded CBOR is not supported".to_owned(),
        ));
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::skipping_may_accept_more as may;

    #[test]
    fn what_only_parsing_refuses_is_found_and_strings_are_opaque() {
        let fields =
            br#"{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{"k:{\"port\":80}":{}}}"#;
        assert!(!may(fields), "a field set: nothing to parse");
        assert!(may(br#"{"a":"\ud800"}"#), "a \\u escape");
        assert!(!may(br#"{"a":"\\u"}"#), "an escaped backslash, then a u");
        assert!(
            !may(br#"{"a":"\"1e5"}"#),
            "an escaped quote stays in the string"
        );
        assert!(may(br#"{"a":1e5}"#) && may(br#"[2.5E-3]"#), "exponents");
        assert!(
            !may(br#"{"e":"1e5","E":0}"#),
            "an e in a string or after a key"
        );
        assert!(
            may(format!("[{}]", "9".repeat(301)).as_bytes()),
            "a long number"
        );
        assert!(!may(format!("[{}]", "9".repeat(300)).as_bytes()));
        let deep = |n| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(
            may(deep(101).as_bytes()) && !may(deep(100).as_bytes()),
            "depth"
        );
        assert!(
            !may(format!("[\"{}\"]", "[".repeat(200)).as_bytes()),
            "brackets in a string"
        );
        assert!(
            !may(br#"{"a":"cut\"#) && !may(br#"{"a":"open"#),
            "cut strings end it"
        );
    }
}
