//! One value ([`One`]): a singular field, an element of a repeated one or a map's value,
//! and its `Deserializer`, which presents each shape (scalars, messages, times, quantities,
//! int-or-strings, embedded JSON) as Kubernetes' JSON encoding has it.

use serde::de::{self, IntoDeserializer, Visitor};

use kube_protobuf_schema::{self as schema, Message, Shape, Ty};

use super::{
    Ctx, RAW_MESSAGE, RawMessage,
    fields::Fields,
    raw_json::{checked_raw_json, raw_json},
    repeated::{Run, run, wrong_wire_type},
};
use crate::protobuf::{
    DecodeError,
    wire::{RawValue, Reader},
};

/// One value: a singular field, an element of a repeated one, or a map's value.
#[derive(Clone, Copy)]
pub(super) struct One<'de> {
    pub(super) ty: Ty,
    pub(super) raw: RawValue<'de>,
    pub(super) offset: usize,
    /// The message, when `ty` is one (resolved once).
    pub(super) message: Option<&'static Message>,
    pub(super) ctx: Ctx,
}

impl<'de> One<'de> {
    pub(super) fn new(ty: Ty, raw: RawValue<'de>, offset: usize, ctx: Ctx) -> Self {
        let message = match ty {
            Ty::Message(index) => Some(schema::message(index)),
            _ => None,
        };
        One {
            ty,
            raw,
            offset,
            message,
            ctx,
        }
    }

    pub(super) fn bytes(&self) -> Result<&'de [u8], DecodeError> {
        match self.raw {
            RawValue::Len(bytes) => Ok(bytes),
            other => Err(self.wrong(&other)),
        }
    }

    fn varint(&self) -> Result<u64, DecodeError> {
        match self.raw {
            RawValue::Varint(v) => Ok(v),
            other => Err(self.wrong(&other)),
        }
    }

    fn wrong(&self, raw: &RawValue<'_>) -> DecodeError {
        DecodeError::at(
            self.offset,
            format!("a {:?} value has wire type {:?}", self.ty, raw.wire_type()),
        )
    }

    /// Whether JSON has `null` here: a zero time.
    fn is_null(&self) -> Result<bool, DecodeError> {
        match self.message.map(|m| m.shape) {
            Some(Shape::Time | Shape::MicroTime) => Ok(self.seconds_nanos()?.is_none()),
            // Go writes an empty RawExtension as JSON `null`.
            Some(Shape::RawJson) => Ok(raw_json(*self)?.is_empty()),
            _ => Ok(false),
        }
    }

    /// A time's seconds and nanoseconds; `None` when zero (an empty message).
    fn seconds_nanos(&self) -> Result<Option<(i64, i32)>, DecodeError> {
        seconds_nanos(self.bytes()?, self.offset)
    }

    fn time(&self, micro: bool) -> Result<Option<String>, DecodeError> {
        Ok(
            timestamp(self.bytes()?, self.offset, micro)?.map(|at| match micro {
                true => format!("{at:.6}"),
                false => format!("{at:.0}"),
            }),
        )
    }

    /// The single string field `number` of this message (`""` when absent).
    fn string_field(&self, number: u32) -> Result<&'de str, DecodeError> {
        let mut reader = Reader::new(self.bytes()?, self.offset);
        let mut found = "";
        while let Some(field) = reader.next_field()? {
            match (field.number == number, field.value) {
                (true, RawValue::Len(bytes)) => found = utf8(bytes, reader.offset_of(bytes))?,
                (true, other) => return Err(wrong_wire_type("a string", &other, self.offset)),
                (false, _) => {}
            }
        }
        Ok(found)
    }
}

/// A time message's seconds and nanoseconds (fields 1 and 2 of `bytes`, at `offset` in
/// the body); `None` when zero (no seconds).
fn seconds_nanos(bytes: &[u8], offset: usize) -> Result<Option<(i64, i32)>, DecodeError> {
    let mut reader = Reader::new(bytes, offset);
    let (mut seconds, mut nanos) = (None, 0);
    while let Some(field) = reader.next_field()? {
        match (field.number, field.value) {
            (1, RawValue::Varint(v)) => seconds = Some(v as i64),
            (2, RawValue::Varint(v)) => nanos = v as u32 as i32,
            _ => {}
        }
    }
    Ok(seconds.map(|s| (s, nanos)))
}

/// A time message as JSON has it: to the second, or to the microsecond (`micro`, a
/// `MicroTime`); `None` when zero, an error when out of range.
pub(super) fn timestamp(
    bytes: &[u8],
    offset: usize,
    micro: bool,
) -> Result<Option<jiff::Timestamp>, DecodeError> {
    let Some((seconds, nanos)) = seconds_nanos(bytes, offset)? else {
        return Ok(None);
    };
    let nanos = if micro { nanos - nanos % 1000 } else { 0 };
    jiff::Timestamp::new(seconds, nanos)
        .map(Some)
        .map_err(|e| DecodeError::at(offset, format!("a time out of range ({seconds} s): {e}")))
}

pub(crate) fn utf8(bytes: &[u8], offset: usize) -> Result<&str, DecodeError> {
    std::str::from_utf8(bytes)
        .map_err(|e| DecodeError::at(offset, format!("a string is not UTF-8: {e}")))
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

impl<'de> de::Deserializer<'de> for One<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.ty {
            Ty::Str => visitor.visit_borrowed_str(utf8(self.bytes()?, self.offset)?),
            Ty::Bytes => visitor.visit_string(base64(self.bytes()?)),
            Ty::Bool => visitor.visit_bool(self.varint()? != 0),
            Ty::Int32 => visitor.visit_i64(i64::from(self.varint()? as u32 as i32)),
            Ty::Int64 => visitor.visit_i64(self.varint()? as i64),
            Ty::Uint32 | Ty::Uint64 => visitor.visit_u64(self.varint()?),
            Ty::Double => match self.raw {
                RawValue::Fixed64(bits) => visitor.visit_f64(f64::from_bits(bits)),
                other => Err(self.wrong(&other)),
            },
            Ty::Float => match self.raw {
                RawValue::Fixed32(bits) => visitor.visit_f64(f64::from(f32::from_bits(bits))),
                other => Err(self.wrong(&other)),
            },
            Ty::Message(_) => self.message_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.is_null()? {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        if let (RAW_MESSAGE, Some(message)) = (name, self.message) {
            // `Compact` keeps the message's bytes undecoded.
            let handoff = RawMessage {
                index: Some(schema::index_of(message)),
                skip_managed_fields: Some(self.ctx.skip.managed_fields),
                bytes: Some(self.bytes()?),
            };
            return visitor.visit_seq(handoff);
        }
        match self.message.map(|m| m.shape) {
            Some(Shape::RawJson) => {
                let raw = raw_json(self)?;
                if raw.is_empty() {
                    return visitor.visit_newtype_struct(().into_deserializer());
                }
                let mut json = serde_json::Deserializer::from_slice(raw);
                visitor
                    .visit_newtype_struct(&mut json)
                    .and_then(|value| json.end().map(|()| value))
                    .map_err(|e| DecodeError::at(self.offset, format!("embedded JSON: {e}")))
            }
            _ => visitor.visit_newtype_struct(self),
        }
    }

    /// Enums of unit variants named by strings (kube's `StatusSummary`, `Operation`).
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match self.ty {
            Ty::Str => visitor.visit_enum(de::value::BorrowedStrDeserializer::new(utf8(
                self.bytes()?,
                self.offset,
            )?)),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.ty {
            Ty::Bytes => visitor.visit_borrowed_bytes(self.bytes()?),
            _ => self.deserialize_any(visitor),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        self.deserialize_bytes(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

impl<'de> One<'de> {
    fn message_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        let message = self.message.expect("a message type");
        match message.shape {
            Shape::Object => {
                let ctx = self.ctx.deeper(self.offset)?;
                visitor.visit_map(Fields::new(self.bytes()?, self.offset, message, ctx))
            }
            Shape::List => {
                let field = message.field(1).ok_or_else(|| {
                    DecodeError::at(self.offset, format!("{} has no field 1", message.name))
                })?;
                let mut reader = Reader::new(self.bytes()?, self.offset);
                let (start, count) = run(&mut reader, None, 1)?;
                // The rest is read too (not kept): malformed bytes after the items are
                // refused, as the generated decoders and Go refuse them.
                while reader.next_field()?.is_some() {}
                let ctx = self.ctx.deeper(self.offset)?;
                visitor.visit_seq(Run::new(start, count, field, ctx))
            }
            Shape::Time | Shape::MicroTime => {
                match self.time(message.shape == Shape::MicroTime)? {
                    Some(text) => visitor.visit_string(text),
                    None => visitor.visit_unit(),
                }
            }
            Shape::Quantity => visitor.visit_borrowed_str(self.string_field(1)?),
            Shape::IntOrString => {
                let mut reader = Reader::new(self.bytes()?, self.offset);
                let (mut is_string, mut int, mut string) = (false, 0i32, "");
                while let Some(field) = reader.next_field()? {
                    match (field.number, field.value) {
                        (1, RawValue::Varint(v)) => is_string = v == 1,
                        (2, RawValue::Varint(v)) => int = v as u32 as i32,
                        (3, RawValue::Len(bytes)) => string = utf8(bytes, reader.offset_of(bytes))?,
                        (1..=3, other) => {
                            let what = "an int-or-string's field";
                            return Err(wrong_wire_type(what, &other, self.offset));
                        }
                        _ => {}
                    }
                }
                if is_string {
                    visitor.visit_borrowed_str(string)
                } else {
                    visitor.visit_i64(i64::from(int))
                }
            }
            Shape::RawJson => {
                let raw = checked_raw_json(self)?;
                if raw.is_empty() {
                    return visitor.visit_unit();
                }
                let mut json = serde_json::Deserializer::from_slice(raw);
                de::Deserializer::deserialize_any(&mut json, visitor)
                    .and_then(|value| json.end().map(|()| value))
                    .map_err(|e| DecodeError::at(self.offset, format!("embedded JSON: {e}")))
            }
            Shape::Duration => Err(DecodeError::at(
                self.offset,
                "metav1.Duration is not supported".to_owned(),
            )),
        }
    }
}
