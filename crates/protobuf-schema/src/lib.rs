//! The schema of Kubernetes' protobuf encoding for the built-in API groups: for each message,
//! its fields by number, with what the JSON encoding calls them and does with them.
//!
//! Generated from Kubernetes' own sources (the `generated.proto` files of k8s.io/api and
//! k8s.io/apimachinery, and the Go types beside them) by `tools/protobuf-schema.py`, merged
//! over several releases. It is data only: kube-informer's decoder reads protobuf into
//! k8s-openapi types by it, and fake-apiserver answers and reads protobuf by it, each with
//! its own code (the real kube-apiserver is the referee between them).
//!
//! ```
//! let pod = kube_protobuf_schema::kind("v1", "Pod").unwrap();
//! assert_eq!(pod.name, "k8s.io.api.core.v1.Pod");
//! let spec = pod.field(2).unwrap();
//! assert_eq!(spec.json, "spec");
//! // Custom resources have no protobuf encoding.
//! assert!(kube_protobuf_schema::kind("example.com/v1", "Widget").is_none());
//! ```

mod generated;

use generated::{KINDS, MESSAGES};

/// The prefix of every protobuf-encoded object (`k8s\0`), before its `runtime.Unknown`.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// The protobuf media type.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The full name of `runtime.Unknown`, the envelope of every protobuf object.
pub const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";

/// One message type.
#[derive(Debug)]
pub struct Message {
    /// The full protobuf name (`k8s.io.api.core.v1.Pod`).
    pub name: &'static str,
    /// What JSON makes of it.
    pub shape: Shape,
    /// Sorted by number.
    pub fields: &'static [Field],
    /// For numbers below 64 (nearly all): 1 + the field's index in `fields`, 0 for none.
    pub by_number: &'static [u8],
}

/// What JSON makes of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// An object of its fields.
    Object,
    /// A Go named slice (`ExtraValue`, `Verbs`): the array of field 1.
    List,
    /// `metav1.Time` (`seconds` 1, `nanos` 2): RFC 3339 to the second, `null` when zero.
    Time,
    /// `metav1.MicroTime` (as `Time`): RFC 3339 to the microsecond, `null` when zero.
    MicroTime,
    /// `resource.Quantity` (`string` 1): its string.
    Quantity,
    /// `intstr.IntOrString` (`type` 1, `intVal` 2, `strVal` 3): a number or a string.
    IntOrString,
    /// `runtime.RawExtension`, `metav1.FieldsV1` (`raw` 1): JSON bytes, inlined.
    RawJson,
    /// `metav1.Duration` (`duration` 1, nanoseconds); no built-in type uses it.
    Duration,
}

/// One field.
#[derive(Debug)]
pub struct Field {
    /// Its protobuf number.
    pub number: u32,
    /// Its name in JSON.
    pub json: &'static str,
    /// Its value type.
    pub ty: Ty,
    /// Once, repeated, or a map.
    pub rep: Rep,
    /// JSON omits it when zero (`omitempty` on a Go value that is not a pointer), while
    /// protobuf writes it: a zero is then absent.
    pub omit_zero: bool,
    /// JSON inlines it (an embedded Go struct): its fields are the parent's.
    pub inline: bool,
}

/// A field's value type. (No built-in type has unsigned or floating-point fields today;
/// they are described all the same, should one appear.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    /// A UTF-8 string.
    Str,
    /// Bytes (base64 in JSON).
    Bytes,
    /// A boolean (varint).
    Bool,
    /// A signed 32-bit integer (varint, not zigzag).
    Int32,
    /// A signed 64-bit integer (varint, not zigzag).
    Int64,
    /// An unsigned 32-bit integer (varint).
    Uint32,
    /// An unsigned 64-bit integer (varint).
    Uint64,
    /// A 64-bit float (fixed 8 bytes).
    Double,
    /// A 32-bit float (fixed 4 bytes).
    Float,
    /// A message: an index for [`message`].
    Message(u16),
}

impl Ty {
    /// The message this field holds, if it holds one.
    pub fn message(self) -> Option<&'static Message> {
        match self {
            Ty::Message(index) => Some(message(index)),
            _ => None,
        }
    }
}

/// Once, repeated, or a map (entries with the key at 1 and the value at 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rep {
    /// One value.
    Single,
    /// Any number of values (packed or not, for scalars).
    Repeated,
    /// String keys to values: entries of key (1) and value (2).
    Map,
}

impl Message {
    /// The field of this number.
    pub fn field(&self, number: u32) -> Option<&'static Field> {
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

/// A message by its index (the one [`Ty::Message`] holds).
///
/// # Panics
/// On an index no [`Ty::Message`] holds.
pub fn message(index: u16) -> &'static Message {
    &MESSAGES[usize::from(index)]
}

/// The index of a message of this schema (what [`message`] takes back).
///
/// # Panics
/// On a message that is not one of [`messages`].
pub fn index_of(message: &Message) -> u16 {
    let offset = (message as *const Message as usize).wrapping_sub(MESSAGES.as_ptr() as usize);
    let index = offset / std::mem::size_of::<Message>();
    assert!(
        index < MESSAGES.len() && std::ptr::eq(&MESSAGES[index], message),
        "{} is not a message of this schema",
        message.name
    );
    u16::try_from(index).expect("fewer than 65536 messages")
}

/// Every message, sorted by name.
pub fn messages() -> &'static [Message] {
    MESSAGES
}

/// The message of a built-in kind, `None` for kinds protobuf does not serve (custom
/// resources).
pub fn kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    kind_entry(api_version, kind).map(|(_, _, index)| message(index))
}

/// The kind's entry: its names (static) and message index.
pub fn kind_entry(api_version: &str, kind: &str) -> Option<(&'static str, &'static str, u16)> {
    KINDS
        .binary_search_by(|(v, k, _)| (*v, *k).cmp(&(api_version, kind)))
        .ok()
        .map(|i| KINDS[i])
}

/// The `(apiVersion, kind)` whose message is `index` (the first, should several share it).
pub fn kind_of(index: u16) -> Option<(&'static str, &'static str)> {
    KINDS
        .iter()
        .find(|(_, _, i)| *i == index)
        .map(|(api_version, kind, _)| (*api_version, *kind))
}

/// A message by its full protobuf name.
pub fn named(name: &str) -> Option<&'static Message> {
    MESSAGES
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .map(|i| &MESSAGES[i])
}
