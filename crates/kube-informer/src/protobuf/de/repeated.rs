//! Repeated and map fields: the consecutive occurrences of one field ([`Run`]), read as a
//! sequence (packed numbers included) or as a map of key-value entries.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

use kube_protobuf_schema::{Field, Rep, Ty};

use super::{Ctx, value::One, value::utf8, value_offset};
use crate::protobuf::{
    DecodeError,
    wire::{RawValue, Reader},
};

/// Skips the consecutive occurrences of field `number` from `reader` (the first one already
/// read when `first` is given): the reader where they start, and how many there are.
pub(super) fn run<'de>(
    reader: &mut Reader<'de>,
    first: Option<Reader<'de>>,
    number: u32,
) -> Result<(Reader<'de>, usize), DecodeError> {
    let (start, mut count) = match first {
        Some(start) => (start, 1),
        None => (*reader, 0),
    };
    while reader.next_if(number)?.is_some() {
        count += 1;
    }
    Ok((start, count))
}

/// The error for a known field of the wrong wire type.
pub(super) fn wrong_wire_type(what: &str, raw: &RawValue<'_>, offset: usize) -> DecodeError {
    DecodeError::at(
        offset,
        format!("{what} has wire type {:?}", raw.wire_type()),
    )
}

/// Whether a repeated `ty` may come packed (one length-delimited run of numbers).
pub(super) fn packable(ty: Ty) -> bool {
    !matches!(ty, Ty::Str | Ty::Bytes | Ty::Message(_))
}

/// What a map entry without a value holds: the zero value (an empty string or message,
/// or 0).
pub(super) fn zero(ty: Ty) -> RawValue<'static> {
    match ty {
        Ty::Str | Ty::Bytes | Ty::Message(_) => RawValue::Len(&[]),
        _ => RawValue::Varint(0),
    }
}

/// The consecutive occurrences of a repeated or map field.
pub(super) struct Run<'de> {
    reader: Reader<'de>,
    left: usize,
    field: &'static Field,
    /// Packed numbers being read from one occurrence.
    packed: Option<Reader<'de>>,
    ctx: Ctx,
}

impl<'de> Run<'de> {
    pub(super) fn new(reader: Reader<'de>, left: usize, field: &'static Field, ctx: Ctx) -> Self {
        Run {
            reader,
            left,
            field,
            packed: None,
            ctx,
        }
    }

    /// The next element's value.
    fn next(&mut self) -> Result<Option<One<'de>>, DecodeError> {
        loop {
            if let Some(packed) = &mut self.packed {
                if !packed.is_empty() {
                    let offset = packed.offset();
                    let value = packed.next_packed(self.field.ty)?;
                    return Ok(Some(One::new(self.field.ty, value, offset, self.ctx)));
                }
                self.packed = None;
            }
            if self.left == 0 {
                return Ok(None);
            }
            self.left -= 1;
            let Some(raw) = self.reader.next_field()? else {
                return Ok(None);
            };
            let offset = value_offset(&self.reader, &raw.value, self.reader.offset());
            if packable(self.field.ty)
                && self.field.rep == Rep::Repeated
                && let RawValue::Len(bytes) = raw.value
            {
                // Packed: one length-delimited run of numbers (empty ones are skipped).
                self.packed = Some(Reader::new(bytes, offset));
                continue;
            }
            return Ok(Some(One::new(self.field.ty, raw.value, offset, self.ctx)));
        }
    }
}

pub(super) struct SeqRun<'de>(pub(super) Run<'de>);

impl<'de> de::Deserializer<'de> for SeqRun<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_seq(self.0)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_some(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de> SeqAccess<'de> for Run<'de> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        match self.next()? {
            Some(one) => seed.deserialize(one).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

pub(super) struct MapRun<'de>(pub(super) Run<'de>);

impl<'de> de::Deserializer<'de> for MapRun<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_map(Entries {
            run: self.0,
            value: None,
        })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        visitor.visit_some(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// A map's entries: messages with the key at 1 and the value at 2.
struct Entries<'de> {
    run: Run<'de>,
    value: Option<One<'de>>,
}

impl<'de> MapAccess<'de> for Entries<'de> {
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        let Some(entry) = self.run.next()? else {
            return Ok(None);
        };
        let bytes = entry.bytes()?;
        let mut reader = Reader::new(bytes, entry.offset);
        let (mut key, mut value) = ("", None);
        while let Some(field) = reader.next_field()? {
            match (field.number, field.value) {
                (1, RawValue::Len(k)) => key = utf8(k, reader.offset_of(k))?,
                // A key of another wire type is malformed (as the generated decoders and Go
                // say), not an entry without a key.
                (1, other) => return Err(wrong_wire_type("a map key", &other, entry.offset)),
                (2, raw) => {
                    value = Some(One::new(self.run.field.ty, raw, entry.offset, self.run.ctx))
                }
                _ => {}
            }
        }
        let (ty, ctx) = (self.run.field.ty, self.run.ctx);
        self.value = Some(value.unwrap_or(One::new(ty, zero(ty), entry.offset, ctx)));
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DecodeError> {
        let value = self
            .value
            .take()
            .ok_or_else(|| de::Error::custom("a map value asked before its key"))?;
        seed.deserialize(value)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.run.left)
    }
}
