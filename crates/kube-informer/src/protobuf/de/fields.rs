//! A message's fields as a serde map ([`Fields`]): in wire order, inlined messages
//! flattened into their parent, zero values JSON omits left out, managed fields skipped
//! when asked.

use serde::de::{self, DeserializeSeed, MapAccess};
use smallvec::SmallVec;

use kube_protobuf_schema::{self as schema, Field, Message, Rep, Ty};

use super::{
    Ctx, MANAGED_FIELDS, OBJECT_META,
    repeated::{MapRun, Run, SeqRun, run},
    value::One,
    value_offset,
};
use crate::protobuf::{
    DecodeError,
    wire::{RawValue, Reader},
};

/// An object's fields, in wire order, inlined messages flattened into their parent.
pub(super) struct Fields<'de> {
    stack: SmallVec<[(Reader<'de>, &'static Message); 4]>,
    pending: Option<Pending<'de>>,
    ctx: Ctx,
}

enum Pending<'de> {
    One(&'static Field, One<'de>),
    Run(&'static Field, Reader<'de>, usize),
}

impl<'de> Fields<'de> {
    pub(super) fn new(buf: &'de [u8], base: usize, message: &'static Message, ctx: Ctx) -> Self {
        let mut stack = SmallVec::new();
        stack.push((Reader::new(buf, base), message));
        Fields {
            stack,
            pending: None,
            ctx,
        }
    }
}

/// Whether a value is its type's zero (what JSON omits for `omit_zero` fields).
pub(super) fn is_zero(raw: &RawValue<'_>) -> bool {
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
            if self.ctx.skip.managed_fields_at(self.ctx.depth)
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
