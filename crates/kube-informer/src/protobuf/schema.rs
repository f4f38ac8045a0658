//! The schema the decoder reads messages by: for each message of the built-in API groups,
//! its fields by number, with what JSON calls them and does with them. Generated from
//! Kubernetes' own sources by `tools/protobuf-schema.py` into `generated.rs`.

use super::generated::{KINDS, MESSAGES};

/// One message type.
#[derive(Debug)]
pub(crate) struct Message {
    /// The full protobuf name, for errors.
    pub(crate) name: &'static str,
    pub(crate) shape: Shape,
    /// Sorted by number.
    pub(crate) fields: &'static [Field],
    /// For numbers below 64 (nearly all): 1 + the field's index in `fields`, 0 for none.
    pub(crate) by_number: &'static [u8],
}

/// What JSON makes of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// An object of its fields.
    Object,
    /// A Go named slice (`ExtraValue`, `Verbs`): the array of field 1.
    List,
    /// `metav1.Time`: RFC 3339 to the second, `null` when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 to the microsecond, `null` when zero.
    MicroTime,
    /// `resource.Quantity`: its string.
    Quantity,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `runtime.RawExtension`, `metav1.FieldsV1`: JSON bytes, inlined.
    RawJson,
    /// `metav1.Duration` (no built-in type uses it).
    Duration,
}

/// One field.
#[derive(Debug)]
pub(crate) struct Field {
    pub(crate) number: u32,
    /// Its name in JSON.
    pub(crate) json: &'static str,
    pub(crate) ty: Ty,
    pub(crate) rep: Rep,
    /// JSON omits it when zero (`omitempty` on a Go value that is not a pointer), while
    /// protobuf writes it: a zero is then absent.
    pub(crate) omit_zero: bool,
    /// JSON inlines it (an embedded Go struct): its fields are the parent's.
    pub(crate) inline: bool,
}

/// A field's value type. (No built-in type has unsigned or floating-point fields today;
/// they are read all the same, should one appear.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(dead_code)]
pub(crate) enum Ty {
    Str,
    Bytes,
    Bool,
    Int32,
    Int64,
    Uint32,
    Uint64,
    Double,
    Float,
    /// An index into the messages.
    Message(u16),
}

/// Once, repeated, or a map (entries with the key at 1 and the value at 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rep {
    Single,
    Repeated,
    Map,
}

impl Message {
    pub(crate) fn field(&self, number: u32) -> Option<&'static Field> {
        if let Some(&slot) = self.by_number.get(number as usize) {
            return slot.checked_sub(1).map(|i| &self.fields[usize::from(i)]);
        }
        if number < 64 {
            return None; // beyond the table: no field that low is missing from it
        }
        self.fields
            .binary_search_by_key(&number, |f| f.number)
            .ok()
            .map(|i| &self.fields[i])
    }
}

pub(crate) fn message(index: u16) -> &'static Message {
    &MESSAGES[usize::from(index)]
}

/// The message of a built-in kind, `None` for kinds protobuf does not serve (custom
/// resources).
pub(crate) fn kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    kind_entry(api_version, kind).map(|(_, _, index)| message(index))
}

/// The kind's entry: its names (static) and message.
pub(crate) fn kind_entry(
    api_version: &str,
    kind: &str,
) -> Option<(&'static str, &'static str, u16)> {
    KINDS
        .binary_search_by(|(v, k, _)| (*v, *k).cmp(&(api_version, kind)))
        .ok()
        .map(|i| KINDS[i])
}

/// A message by its full protobuf name.
pub(crate) fn named(name: &str) -> Option<&'static Message> {
    MESSAGES
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .map(|i| &MESSAGES[i])
}
