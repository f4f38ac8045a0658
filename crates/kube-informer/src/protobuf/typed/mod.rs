//! Protobuf read straight into k8s-openapi's types: a decoder generated per message
//! (`generated.rs`, by `tests/protobuf_codegen.rs` from the protobuf schema and
//! k8s-openapi's sources, for each Kubernetes version k8s-openapi supports), so a field is
//! found by its number in a `match` and its value built in place — no serde visitor, no
//! field names compared, no JSON in between.
//!
//! What it must give is exactly what the serde path (`de`) gives, which is what k8s-openapi
//! decodes from the JSON of the same object (zero values JSON omits left out, a zero time
//! `None`, times to the second or microsecond, raw JSON inlined): the golden-file test
//! checks every kind both ways. Types it has no decoder for (custom resources,
//! `DynamicObject`, [`Compact`](crate::compact::Compact)) keep the serde path.
//!
//! This file holds the value a field carries ([`Val`]), the trait every decodable type has
//! ([`Decode`]) and the helpers the generated code calls, one per field shape; `values`
//! holds the scalars and Kubernetes' special messages (times, quantities, int-or-strings,
//! raw JSON).

#[rustfmt::skip]
#[allow(clippy::all, clippy::pedantic, unused_imports)]
mod generated;
#[cfg(test)]
mod tests;
mod values;

use std::any::{Any, TypeId};
use std::collections::BTreeMap;

use super::{
    DecodeError,
    de::{MAX_DEPTH, Skip},
    wire::{RawValue, Reader},
};

/// One field's value as found on the wire, with what decoding carries down.
#[derive(Clone, Copy)]
pub(crate) struct Val<'de> {
    raw: RawValue<'de>,
    /// Where the value starts in the whole body, for errors.
    offset: usize,
    skip: Skip,
    depth: u16,
}

impl<'de> Val<'de> {
    fn bytes(&self) -> Result<&'de [u8], DecodeError> {
        match self.raw {
            RawValue::Len(bytes) => Ok(bytes),
            other => Err(self.wrong("a message or string", &other)),
        }
    }

    fn varint(&self) -> Result<u64, DecodeError> {
        match self.raw {
            RawValue::Varint(v) => Ok(v),
            other => Err(self.wrong("a number", &other)),
        }
    }

    fn wrong(&self, wanted: &str, raw: &RawValue<'_>) -> DecodeError {
        DecodeError::at(
            self.offset,
            format!("{wanted} has wire type {:?}", raw.wire_type()),
        )
    }

    /// Whether protobuf wrote a zero that JSON omits.
    fn is_zero(&self) -> bool {
        match self.raw {
            RawValue::Varint(v) | RawValue::Fixed64(v) => v == 0,
            RawValue::Fixed32(v) => v == 0,
            RawValue::Len(bytes) => bytes.is_empty(),
        }
    }

    /// Whether this value, an `ObjectMeta`'s `managedFields`, is left out: only the
    /// decoded object's own (see [`Skip::managed_fields_at`]).
    fn skips_managed_fields(&self) -> bool {
        self.skip.managed_fields_at(self.depth)
    }

    /// Calls `field` with each field of this message, in wire order.
    fn each(
        &self,
        mut field: impl FnMut(u32, Val<'de>) -> Result<(), DecodeError>,
    ) -> Result<(), DecodeError> {
        if self.depth >= MAX_DEPTH {
            return Err(DecodeError::at(
                self.offset,
                format!("messages nested deeper than {MAX_DEPTH}"),
            ));
        }
        let mut reader = Reader::new(self.bytes()?, self.offset);
        loop {
            let tag = reader.offset();
            let Some(raw) = reader.next_field()? else {
                return Ok(());
            };
            let offset = match raw.value {
                RawValue::Len(bytes) => reader.offset_of(bytes),
                _ => tag,
            };
            field(
                raw.number,
                Val {
                    raw: raw.value,
                    offset,
                    skip: self.skip,
                    depth: self.depth + 1,
                },
            )?;
        }
    }
}

/// A type read from protobuf by generated or hand-written code.
pub(crate) trait Decode: Sized {
    /// The value, `None` where JSON has `null` (a zero time, empty raw JSON).
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError>;

    /// Another occurrence of the field: a message merges into what is there (protobuf's
    /// rule), anything else replaces it.
    fn merge(&mut self, v: Val<'_>) -> Result<(), DecodeError> {
        if let Some(value) = Self::decode(v)? {
            *self = value;
        }
        Ok(())
    }

    /// The value of a map entry that has none: what an empty message or string decodes to
    /// (a number's zero for numbers).
    fn absent(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        Self::decode(Val {
            raw: RawValue::Len(&[]),
            ..v
        })
    }

    /// An optional field's occurrence: decoded, or merged into what is there.
    fn merge_option(slot: &mut Option<Self>, v: Val<'_>) -> Result<(), DecodeError> {
        match slot {
            Some(value) => value.merge(v),
            None => {
                *slot = Self::decode(v)?;
                Ok(())
            }
        }
    }

    /// One occurrence of a repeated field: one element, or (scalars) a packed run.
    fn extend(out: &mut Vec<Self>, v: Val<'_>) -> Result<(), DecodeError> {
        match Self::decode(v)? {
            Some(value) => {
                room_for_one(out);
                out.push(value);
                Ok(())
            }
            None => Err(DecodeError::at(
                v.offset,
                "a list element that JSON has as null".to_owned(),
            )),
        }
    }
}

/// A message's fields into a default value: what the generated `decode`s do.
fn message<T: Decode + Default>(v: Val<'_>) -> Result<Option<T>, DecodeError> {
    let mut value = T::default();
    value.merge(v)?;
    Ok(Some(value))
}

/// An optional message field, built where it is kept (a pod's spec is a kilobyte: built
/// elsewhere and moved, it costs a copy).
fn message_in_place<T: Decode + Default>(
    slot: &mut Option<T>,
    v: Val<'_>,
) -> Result<(), DecodeError> {
    slot.get_or_insert_with(T::default).merge(v)
}

/// Repeated fields grown one element at a time up to this length, then doubled.
const EXACT_UP_TO: usize = 8;

/// Room for one more element in `out`: exactly one more while it is short, as most repeated
/// fields of an object are (a pod's containers, their statuses, env, ports, owner
/// references), then double. A `Vec` grown by pushes alone doubles from four, and an
/// object kept in a cache keeps the unused half for its life: on the benchmark's pods,
/// about 4 KiB each (two container statuses of ~740 bytes in room for four, and so on).
fn room_for_one<T>(out: &mut Vec<T>) {
    if out.len() == out.capacity() {
        let more = if out.len() < EXACT_UP_TO {
            1
        } else {
            out.len()
        };
        out.reserve_exact(more);
    }
}

/// A repeated message field's element, built in place in the vector.
fn element_in_place<T: Decode + Default>(out: &mut Vec<T>, v: Val<'_>) -> Result<(), DecodeError> {
    room_for_one(out);
    out.push(T::default());
    out.last_mut().expect("just pushed").merge(v)
}

/// A message of a type with no empty value to fill in (a required time), built by the
/// serde path.
fn serde<T: serde::de::DeserializeOwned>(
    v: Val<'_>,
    message: &'static str,
) -> Result<Option<T>, DecodeError> {
    let message = kube_protobuf_schema::named(message).expect("a message of the schema");
    super::de::decode(v.bytes()?, v.offset, message, v.skip).map(Some)
}

/// A field that is always there in k8s-openapi's type.
fn req<T: Decode>(slot: &mut T, v: Val<'_>) -> Result<(), DecodeError> {
    slot.merge(v)
}

/// [`req`] where JSON omits a zero.
fn req_nz<T: Decode>(slot: &mut T, v: Val<'_>) -> Result<(), DecodeError> {
    if v.is_zero() { Ok(()) } else { slot.merge(v) }
}

/// An optional field.
fn opt<T: Decode>(slot: &mut Option<T>, v: Val<'_>) -> Result<(), DecodeError> {
    T::merge_option(slot, v)
}

/// [`opt`] where JSON omits a zero.
fn opt_nz<T: Decode>(slot: &mut Option<T>, v: Val<'_>) -> Result<(), DecodeError> {
    if v.is_zero() { Ok(()) } else { opt(slot, v) }
}

/// A repeated field k8s-openapi always has.
fn vec_req<T: Decode>(slot: &mut Vec<T>, v: Val<'_>) -> Result<(), DecodeError> {
    T::extend(slot, v)
}

/// An optional repeated field.
fn vec_opt<T: Decode>(slot: &mut Option<Vec<T>>, v: Val<'_>) -> Result<(), DecodeError> {
    T::extend(slot.get_or_insert_with(Vec::new), v)
}

/// One entry (key 1, value 2) of a map field k8s-openapi always has; an absent value is
/// the value type's zero, as in JSON.
fn map_req<T: Decode>(slot: &mut BTreeMap<String, T>, v: Val<'_>) -> Result<(), DecodeError> {
    let (mut key, mut value) = (String::new(), None);
    v.each(|n, v| match n {
        1 => key.merge(v),
        2 => opt(&mut value, v),
        _ => Ok(()),
    })?;
    match value.map_or_else(|| T::absent(v), |value| Ok(Some(value)))? {
        Some(value) => {
            slot.insert(key, value);
            Ok(())
        }
        None => Err(DecodeError::at(
            v.offset,
            format!("the value of {key:?} is one JSON has as null"),
        )),
    }
}

/// An entry of an optional map field.
fn map_opt<T: Decode>(
    slot: &mut Option<BTreeMap<String, T>>,
    v: Val<'_>,
) -> Result<(), DecodeError> {
    map_req(slot.get_or_insert_with(BTreeMap::new), v)
}

/// A Go named slice (`ExtraValue`): the elements of field 1.
impl<T: Decode> Decode for Vec<T> {
    fn decode(v: Val<'_>) -> Result<Option<Self>, DecodeError> {
        let mut out = Vec::new();
        out.merge(v)?;
        Ok(Some(out))
    }

    fn merge(&mut self, v: Val<'_>) -> Result<(), DecodeError> {
        v.each(|n, v| if n == 1 { T::extend(self, v) } else { Ok(()) })
    }
}

/// Decodes a top-level object of the type `out` holds (an `Option<T>`), when the
/// generated decoders have it.
type DirectFn = fn(&[u8], usize, Skip, &mut dyn Any) -> Result<(), DecodeError>;

/// A generated decoder for one k8s-openapi type, found by the message it reads.
#[derive(Clone, Copy)]
pub(crate) struct Direct {
    type_id: fn() -> TypeId,
    decode: DirectFn,
}

impl Direct {
    fn of<T: Decode + Default + 'static>() -> Direct {
        Direct {
            type_id: TypeId::of::<T>,
            decode: |buf, base, skip, out| {
                let out = out
                    .downcast_mut::<Option<T>>()
                    .expect("the type the decoder was chosen for");
                let v = Val {
                    raw: RawValue::Len(buf),
                    offset: base,
                    skip,
                    depth: 0,
                };
                message_in_place(out, v)
            },
        }
    }

    /// The generated decoder of the message named `name`, if there is one.
    pub(crate) fn for_message(name: &str) -> Option<Direct> {
        generated::direct(name)
    }

    /// Decodes `buf` (a message of this decoder's type, at `base` in the body) as `K`, or
    /// `None` when `K` is not the type it builds.
    pub(crate) fn decode<K: 'static>(
        &self,
        buf: &[u8],
        base: usize,
        skip: Skip,
    ) -> Option<Result<K, DecodeError>> {
        if (self.type_id)() != TypeId::of::<K>() {
            return None;
        }
        let mut out: Option<K> = None;
        Some((self.decode)(buf, base, skip, &mut out).map(|()| out.expect("decoded")))
    }
}
