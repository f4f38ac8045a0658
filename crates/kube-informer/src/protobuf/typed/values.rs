//! [`Decode`] for the scalars and for Kubernetes' special messages, each read as the serde
//! path presents it to k8s-openapi: times to the second (`Time`) or microsecond
//! (`MicroTime`) and `None` when zero, a quantity's string, an int-or-string by its `type`,
//! raw JSON parsed (`None` when empty), bytes copied.

use k8s_openapi::{
    ByteString,
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{FieldsV1, MicroTime, Time},
        runtime::RawExtension,
        util::intstr::IntOrString,
    },
};

use super::{Decode, Val};
use crate::protobuf::{DecodeError, de::utf8, wire::RawValue};

impl Decode for String {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        Ok(Some(utf8(v.bytes()?, v.offset)?.to_owned()))
    }
}

impl Decode for ByteString {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        Ok(Some(ByteString(v.bytes()?.to_vec())))
    }
}

/// Varint scalars: one value, or a packed run of them in a repeated field.
macro_rules! varint {
    ($($ty:ty => |$x:ident| $convert:expr;)*) => {$(
        impl Decode for $ty {
            fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
                let $x = v.varint()?;
                Ok(Some($convert))
            }

            fn absent(_: Val<'_>) -> Result<Option<Self>, DecodeError> {
                Ok(Some(Self::default()))
            }

            fn extend(out: &mut Vec<Self>, v: Val<'_>) -> Result<(), DecodeError> {
                let RawValue::Len(bytes) = v.raw else {
                    if let Some(value) = Self::decode(v)? {
                        super::room_for_one(out);
                        out.push(value);
                    }
                    return Ok(());
                };
                let mut reader = crate::protobuf::wire::Reader::new(bytes, v.offset);
                while !reader.is_empty() {
                    let RawValue::Varint($x) =
                        reader.next_packed(kube_protobuf_schema::Ty::Int64)?
                    else {
                        unreachable!("a packed varint");
                    };
                    super::room_for_one(out);
                    out.push($convert);
                }
                Ok(())
            }
        }
    )*};
}

varint! {
    bool => |x| x != 0;
    // Negative int32s are sign-extended to ten bytes on the wire.
    i32 => |x| x as u32 as i32;
    i64 => |x| x as i64;
}

impl Decode for f64 {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        match v.raw {
            RawValue::Fixed64(bits) => Ok(Some(f64::from_bits(bits))),
            RawValue::Fixed32(bits) => Ok(Some(f64::from(f32::from_bits(bits)))),
            other => Err(v.wrong("a float", &other)),
        }
    }

    fn absent(_: Val<'_>) -> Result<Option<Self>, DecodeError> {
        Ok(Some(0.0))
    }
}

/// A time's seconds and nanoseconds (fields 1 and 2); `None` when zero (no seconds).
fn seconds_nanos(v: Val<'_>) -> Result<Option<(i64, i32)>, DecodeError> {
    let (mut seconds, mut nanos) = (None, 0i32);
    v.each(|n, v| {
        match (n, v.raw) {
            (1, RawValue::Varint(s)) => seconds = Some(s as i64),
            (2, RawValue::Varint(ns)) => nanos = ns as u32 as i32,
            _ => {}
        }
        Ok(())
    })?;
    Ok(seconds.map(|s| (s, nanos)))
}

fn timestamp(v: Val<'_>, seconds: i64, nanos: i32) -> Result<jiff::Timestamp, DecodeError> {
    jiff::Timestamp::new(seconds, nanos)
        .map_err(|e| DecodeError::at(v.offset, format!("a time out of range ({seconds} s): {e}")))
}

impl Decode for Time {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        // JSON has a Time to the second.
        seconds_nanos(v)?
            .map(|(seconds, _)| timestamp(v, seconds, 0).map(Time))
            .transpose()
    }
}

impl Decode for MicroTime {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        seconds_nanos(v)?
            .map(|(seconds, nanos)| timestamp(v, seconds, nanos - nanos % 1000).map(MicroTime))
            .transpose()
    }
}

impl Decode for Quantity {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        let mut text = String::new();
        v.each(|n, v| if n == 1 { text.merge(v) } else { Ok(()) })?;
        Ok(Some(Quantity(text)))
    }
}

impl Decode for IntOrString {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        let (mut is_string, mut int, mut string) = (false, 0i32, String::new());
        v.each(|n, v| match n {
            1 => {
                is_string = v.varint()? == 1;
                Ok(())
            }
            2 => int.merge(v),
            3 => string.merge(v),
            _ => Ok(()),
        })?;
        Ok(Some(if is_string {
            IntOrString::String(string)
        } else {
            IntOrString::Int(int)
        }))
    }
}

/// The JSON of a `RawExtension` or `FieldsV1` (field 1), parsed; `None` when empty (Go
/// writes `null`).
fn raw_json(v: Val<'_>) -> Result<Option<serde_json::Value>, DecodeError> {
    let mut raw: &[u8] = &[];
    v.each(|n, v| {
        if n == 1 {
            raw = v.bytes()?;
        }
        Ok(())
    })?;
    if raw.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(raw)
        .map(Some)
        .map_err(|e| DecodeError::at(v.offset, format!("embedded JSON: {e}")))
}

impl Decode for RawExtension {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        Ok(raw_json(v)?.map(RawExtension))
    }
}

impl Decode for FieldsV1 {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        Ok(raw_json(v)?.map(FieldsV1))
    }
}
