//! A serde `Deserializer` over protobuf messages: each message is presented as the JSON
//! object Kubernetes' JSON encoding makes of it (field names, inlined structs, zero values
//! omitted where JSON omits them, times as RFC 3339 strings, quantities as strings,
//! int-or-strings as either, raw JSON inlined), so k8s-openapi's own `Deserialize`
//! implementations build the objects: no per-type code, and no JSON text in between.

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use smallvec::SmallVec;

use kube_protobuf_schema::{self as schema, Field, Message, Rep, Shape, Ty};

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
    /// `metadata.managedFields`, wherever an `ObjectMeta` is.
    pub(crate) managed_fields: bool,
}

/// How deep messages may nest (serde_json's limit too): a self-nesting message sent over
/// and over is an error, not a stack overflow.
const MAX_DEPTH: u16 = 128;

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

/// One value: a singular field, an element of a repeated one, or a map's value.
#[derive(Clone, Copy)]
struct One<'de> {
    ty: Ty,
    raw: RawValue<'de>,
    offset: usize,
    /// The message, when `ty` is one (resolved once).
    message: Option<&'static Message>,
    ctx: Ctx,
}

impl<'de> One<'de> {
    fn new(ty: Ty, raw: RawValue<'de>, offset: usize, ctx: Ctx) -> Self {
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

    fn bytes(&self) -> Result<&'de [u8], DecodeError> {
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
        let mut reader = Reader::new(self.bytes()?, self.offset);
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

    fn time(&self, micro: bool) -> Result<Option<String>, DecodeError> {
        let Some((seconds, nanos)) = self.seconds_nanos()? else {
            return Ok(None);
        };
        let nanos = if micro { nanos - nanos % 1000 } else { 0 };
        let at = jiff::Timestamp::new(seconds, nanos).map_err(|e| {
            DecodeError::at(
                self.offset,
                format!("a time out of range ({seconds} s): {e}"),
            )
        })?;
        Ok(Some(if micro {
            format!("{at:.6}")
        } else {
            format!("{at:.0}")
        }))
    }

    /// The single string field `number` of this message (`""` when absent).
    fn string_field(&self, number: u32) -> Result<&'de str, DecodeError> {
        let mut reader = Reader::new(self.bytes()?, self.offset);
        let mut found = "";
        while let Some(field) = reader.next_field()? {
            if field.number == number
                && let RawValue::Len(bytes) = field.value
            {
                found = utf8(bytes, reader.offset_of(bytes))?;
            }
        }
        Ok(found)
    }
}

fn utf8(bytes: &[u8], offset: usize) -> Result<&str, DecodeError> {
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
fn checked_raw_json(one: One<'_>) -> Result<&[u8], DecodeError> {
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
fn raw_json(one: One<'_>) -> Result<&[u8], DecodeError> {
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

/// Skips the consecutive occurrences of field `number` from `reader` (the first one already
/// read when `first` is given): the reader where they start, and how many there are.
fn run<'de>(
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

/// An object's fields, in wire order, inlined messages flattened into their parent.
struct Fields<'de> {
    stack: SmallVec<[(Reader<'de>, &'static Message); 4]>,
    pending: Option<Pending<'de>>,
    ctx: Ctx,
}

enum Pending<'de> {
    One(&'static Field, One<'de>),
    Run(&'static Field, Reader<'de>, usize),
}

impl<'de> Fields<'de> {
    fn new(buf: &'de [u8], base: usize, message: &'static Message, ctx: Ctx) -> Self {
        let mut stack = SmallVec::new();
        stack.push((Reader::new(buf, base), message));
        Fields {
            stack,
            pending: None,
            ctx,
        }
    }
}

fn is_zero(raw: &RawValue<'_>) -> bool {
    match raw {
        RawValue::Varint(v) | RawValue::Fixed64(v) => *v == 0,
        RawValue::Fixed32(v) => *v == 0,
        RawValue::Len(bytes) => bytes.is_empty(),
    }
}

impl<'de> MapAccess<'de> for Fields<'de> {
    type Error = DecodeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DecodeError> {
        loop {
            let Some((reader, message)) = self.stack.last_mut() else {
                return Ok(None);
            };
            let message = *message;
            let before = *reader;
            let Some(raw) = reader.next_field()? else {
                self.stack.pop();
                continue;
            };
            // A field this schema does not know (a newer server's): skipped, as JSON would.
            let Some(field) = message.field(raw.number) else {
                continue;
            };
            if self.ctx.skip.managed_fields
                && raw.number == MANAGED_FIELDS
                && message.name == OBJECT_META
            {
                continue;
            }
            let offset = before.offset();
            if field.inline {
                let Ty::Message(index) = field.ty else {
                    continue; // an inlined scalar (Duration's): only its own shape reads it
                };
                let RawValue::Len(bytes) = raw.value else {
                    return Err(DecodeError::at(
                        offset,
                        format!("{}.{} is not a message", message.name, field.json),
                    ));
                };
                let base = reader.offset_of(bytes);
                self.stack
                    .push((Reader::new(bytes, base), schema::message(index)));
                continue;
            }
            self.pending = Some(match field.rep {
                Rep::Single => {
                    if field.omit_zero && is_zero(&raw.value) {
                        continue;
                    }
                    let at = value_offset(reader, &raw.value, offset);
                    Pending::One(field, One::new(field.ty, raw.value, at, self.ctx))
                }
                Rep::Repeated | Rep::Map => {
                    let (start, count) = run(reader, Some(before), raw.number)?;
                    Pending::Run(field, start, count)
                }
            });
            return seed
                .deserialize(de::value::BorrowedStrDeserializer::new(field.json))
                .map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, DecodeError> {
        let (field, result) = match self.pending.take() {
            Some(Pending::One(field, one)) => (field, seed.deserialize(one)),
            Some(Pending::Run(field, start, count)) => {
                let result = match field.rep {
                    Rep::Map => seed.deserialize(MapRun(Run::new(start, count, field, self.ctx))),
                    _ => seed.deserialize(SeqRun(Run::new(start, count, field, self.ctx))),
                };
                (field, result)
            }
            None => return Err(de::Error::custom("a value asked before its key")),
        };
        result.map_err(|e| e.within(field.json))
    }
}

/// The consecutive occurrences of a repeated or map field.
struct Run<'de> {
    reader: Reader<'de>,
    left: usize,
    field: &'static Field,
    /// Packed numbers being read from one occurrence.
    packed: Option<Reader<'de>>,
    ctx: Ctx,
}

impl<'de> Run<'de> {
    fn new(reader: Reader<'de>, left: usize, field: &'static Field, ctx: Ctx) -> Self {
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
            let numeric = !matches!(self.field.ty, Ty::Str | Ty::Bytes | Ty::Message(_));
            if numeric
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

struct SeqRun<'de>(Run<'de>);

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

struct MapRun<'de>(Run<'de>);

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
                (2, raw) => {
                    value = Some(One::new(self.run.field.ty, raw, entry.offset, self.run.ctx))
                }
                _ => {}
            }
        }
        // An absent value is the zero value: an empty string or message, or 0.
        let zero = match self.run.field.ty {
            Ty::Str | Ty::Bytes | Ty::Message(_) => RawValue::Len(&[]),
            _ => RawValue::Varint(0),
        };
        let ctx = self.run.ctx;
        self.value = Some(value.unwrap_or(One::new(self.run.field.ty, zero, entry.offset, ctx)));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn len_field(number: u32, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut put = |mut v: u64| {
            while v >= 0x80 {
                out.push((v as u8) | 0x80);
                v >>= 7;
            }
            out.push(v as u8);
        };
        put(u64::from(number) << 3 | 2);
        put(body.len() as u64);
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn a_self_nesting_message_sent_too_deep_is_an_error_not_a_stack_overflow() {
        // A message with a field of its own type (there is one among the built-in types).
        let (index, number) = schema::messages()
            .iter()
            .enumerate()
            .find_map(|(i, m)| {
                let own = Ty::Message(u16::try_from(i).ok()?);
                m.fields
                    .iter()
                    .find(|f| f.ty == own && !f.inline)
                    .map(|f| (i, f.number))
            })
            .expect("a self-nesting message");
        let message = &schema::messages()[index];
        let nest = |depth: usize| (0..depth).fold(Vec::new(), |inner, _| len_field(number, &inner));
        let shallow = decode::<serde_json::Value>(&nest(20), 0, message, Skip::default());
        assert!(shallow.is_ok(), "{shallow:?}");
        let error = decode::<serde_json::Value>(&nest(400), 0, message, Skip::default())
            .unwrap_err()
            .to_string();
        assert!(error.contains("nested deeper than 128"), "{error}");
    }

    #[test]
    fn many_empty_packed_runs_are_read_in_a_loop() {
        // PodSecurityContext.supplementalGroups (4, int64): 200k empty packed occurrences.
        let message = schema::named("k8s.io.api.core.v1.PodSecurityContext").unwrap();
        let body: Vec<u8> = std::iter::repeat_n([0x22u8, 0x00], 200_000)
            .flatten()
            .collect();
        let value: serde_json::Value = decode(&body, 0, message, Skip::default()).unwrap();
        assert_eq!(value["supplementalGroups"], serde_json::json!([]));
        // And a real packed run among them.
        let mut body = body;
        body.extend_from_slice(&[0x22, 0x02, 0x05, 0x07]);
        let value: serde_json::Value = decode(&body, 0, message, Skip::default()).unwrap();
        assert_eq!(value["supplementalGroups"], serde_json::json!([5, 7]));
    }

    #[test]
    fn an_error_deep_inside_points_at_its_byte() {
        // Pod{metadata{name: <not UTF-8>}}: the offset is that of the bad bytes.
        let pod = schema::named("k8s.io.api.core.v1.Pod").unwrap();
        let body = len_field(1, &len_field(1, &[b'o', b'k', 0xff]));
        let error = decode::<serde_json::Value>(&body, 100, pod, Skip::default()).unwrap_err();
        let at = error.offset().unwrap() - 100;
        assert_eq!(&body[at..], &[b'o', b'k', 0xff], "{error}");
    }
}
