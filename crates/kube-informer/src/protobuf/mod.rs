//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), decoded into the
//! k8s-openapi types informers already deliver: what client-go's in-cluster components
//! speak to the API server for built-in types.
//!
//! A body is the magic `k8s\0` and a `runtime.Unknown` envelope (the kind, and the object's
//! own message); a watch is a stream of frames, each a 4-byte big-endian length and a
//! `metav1.WatchEvent` whose object is such a body. The messages are read by a serde
//! `Deserializer` that presents each as the JSON object Kubernetes' JSON encoding makes of
//! it, following a schema generated from Kubernetes' own `generated.proto` files and Go
//! types (`tools/protobuf-schema.py`, releases 1.33 to 1.37): k8s-openapi's `Deserialize`
//! implementations build the objects, so every built-in type is covered without per-type
//! code, and the objects equal those decoded from JSON (checked on Kubernetes' golden files
//! for every kind k8s-openapi has, and against a real API server).
//!
//! What it buys, measured on realistic pods from kube-apiserver 1.36 (BENCHMARKS.md): about
//! 30% fewer bytes; the same decode cost as JSON for a whole typed object (most of it is
//! building the object, and each managed-fields entry is JSON inside either encoding); and,
//! with [`ProtoKind::without_managed_fields`] (what
//! [`strip_managed_fields`](crate::factory::FactoryOptions::strip_managed_fields) turns
//! on), 1.9× the pods/s of JSON on a LIST and 1.7× on a watch, because a length-prefixed
//! field is skipped without being read. In an informer (BENCHMARKS.md, against the peers)
//! that makes a 50k-pod sync 0.8× as long as over JSON, for as many watch events/s, which
//! is why factories ask for protobuf by default.
//!
//! Custom resources have no protobuf encoding: [`supports`] says which kinds do, and the
//! list/watch path asks for protobuf only for those, deciding each response by its
//! `Content-Type`.
//!
//! Every malformed input is a [`DecodeError`] that says what was wrong and at which byte;
//! no length is trusted before it is checked against what remains (and, for a watch frame,
//! against [`MAX_FRAME`]).

mod de;
#[rustfmt::skip]
mod wire;

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::{
    api::WatchEvent,
    core::{
        Status,
        watch::{Bookmark, BookmarkMeta},
    },
};
use serde::de::DeserializeOwned;

use kube_protobuf_schema::{self as schema, MAGIC};

pub(crate) use self::de::RAW_MESSAGE;

use self::wire::{RawValue, Reader};

/// The media type of a protobuf object or list.
pub const CONTENT_TYPE: &str = schema::CONTENT_TYPE;
/// What a LIST or GET asks for: protobuf, or JSON where the server has none (custom
/// resources).
pub const ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";
/// What a WATCH asks for.
pub const ACCEPT_WATCH: &str =
    "application/vnd.kubernetes.protobuf;stream=watch, application/json;stream=watch";
/// What a metadata-only LIST asks for: `PartialObjectMetadataList` in protobuf (any kind,
/// custom resources too), else in JSON; client-go's metadata client asks the same.
pub const ACCEPT_METADATA_LIST: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json";
/// What a metadata-only WATCH (or GET) asks for: `PartialObjectMetadata` objects, in
/// protobuf frames first.
pub const ACCEPT_METADATA: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";
/// The largest watch frame accepted: client-go's limit.
pub const MAX_FRAME: usize = 16 << 20;

/// Why a protobuf body could not be decoded: what was wrong, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    offset: Option<usize>,
    path: Vec<&'static str>,
    message: String,
}

impl DecodeError {
    pub(crate) fn at(offset: usize, message: String) -> Self {
        DecodeError {
            offset: Some(offset),
            path: Vec::new(),
            message,
        }
    }

    /// The error inside `name` (a field or message), for its path.
    pub(crate) fn within(mut self, name: &'static str) -> Self {
        self.path.push(name);
        self
    }

    /// The byte of the body where it went wrong, when known.
    pub fn offset(&self) -> Option<usize> {
        self.offset
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(offset) = self.offset {
            write!(f, "at byte {offset}")?;
            if !self.path.is_empty() {
                f.write_str(" ")?;
            }
        }
        if !self.path.is_empty() {
            let path: Vec<&str> = self.path.iter().rev().copied().collect();
            write!(f, "in {}", path.join("."))?;
        }
        if self.offset.is_some() || !self.path.is_empty() {
            f.write_str(": ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}

impl serde::de::Error for DecodeError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        DecodeError {
            offset: None,
            path: Vec::new(),
            message: message.to_string(),
        }
    }
}

/// Whether the API server serves `K` in protobuf (a built-in kind).
pub fn supports<K: k8s_openapi::Resource>() -> bool {
    schema::kind(K::API_VERSION, K::KIND).is_some()
}

/// A kind that has a protobuf encoding: what a lister-watcher of it decodes with.
#[derive(Clone, Copy)]
pub struct ProtoKind {
    api_version: &'static str,
    kind: &'static str,
    message: &'static schema::Message,
    skip: de::Skip,
}

impl fmt::Debug for ProtoKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.api_version, self.kind)
    }
}

impl ProtoKind {
    /// The kind `api_version`/`kind`, if it has a protobuf encoding (a built-in kind).
    pub fn of(api_version: &str, kind: &str) -> Option<ProtoKind> {
        let (api_version, kind, index) = schema::kind_entry(api_version, kind)?;
        Some(ProtoKind {
            api_version,
            kind,
            message: schema::message(index),
            skip: de::Skip::default(),
        })
    }

    /// Leave every object's `metadata.managedFields` out while decoding: what
    /// [`FactoryOptions::strip_managed_fields`](crate::factory::FactoryOptions::strip_managed_fields)
    /// removes after decoding, never decoded at all (a quarter of a typical object's bytes,
    /// and the costliest part to decode: each entry's field set is JSON).
    #[must_use]
    pub fn without_managed_fields(mut self) -> Self {
        self.skip.managed_fields = true;
        self
    }

    /// `K`'s, if it has one.
    pub fn of_type<K: k8s_openapi::Resource>() -> Option<ProtoKind> {
        Self::of(K::API_VERSION, K::KIND)
    }

    /// Whether `K` can be read from this kind's messages: true for k8s-openapi's types,
    /// `DynamicObject` and `Compact<K>` (which keeps the message), false for types that
    /// read JSON text themselves. Tried on an empty object.
    pub fn decodes<K: DeserializeOwned>(&self) -> bool {
        de::decode::<K>(&[], 0, self.message, self.skip).is_ok()
    }

    fn expect(
        &self,
        envelope: &Envelope<'_>,
        list: bool,
        offset: usize,
    ) -> Result<(), DecodeError> {
        let kind_ok = if list {
            envelope.kind.strip_suffix("List") == Some(self.kind)
        } else {
            envelope.kind == self.kind
        };
        if envelope.api_version == self.api_version && kind_ok {
            return Ok(());
        }
        let wanted = if list {
            format!("{}List", self.kind)
        } else {
            self.kind.to_owned()
        };
        Err(DecodeError::at(
            offset,
            format!(
                "the body holds {} {}, not {} {wanted}",
                envelope.api_version, envelope.kind, self.api_version
            ),
        ))
    }
}

/// The kind and message a body holds.
struct Envelope<'a> {
    api_version: &'a str,
    kind: &'a str,
    raw: &'a [u8],
    raw_offset: usize,
}

/// Reads `k8s\0` and the `runtime.Unknown` around an object. `base` is `body`'s offset in
/// what was received.
fn envelope(body: &[u8], base: usize) -> Result<Envelope<'_>, DecodeError> {
    let Some(rest) = body.strip_prefix(MAGIC) else {
        let start = &body[..body.len().min(4)];
        return Err(DecodeError::at(
            base,
            format!("not a protobuf object: it starts {start:?}, not k8s\\0"),
        ));
    };
    let mut reader = Reader::new(rest, base + MAGIC.len());
    let mut envelope = Envelope {
        api_version: "",
        kind: "",
        raw: &[],
        raw_offset: 0,
    };
    while let Some(field) = reader.next_field()? {
        match (field.number, field.value) {
            (1, RawValue::Len(type_meta)) => {
                let mut meta = Reader::new(type_meta, reader.offset_of(type_meta));
                while let Some(field) = meta.next_field()? {
                    match (field.number, field.value) {
                        (1, RawValue::Len(v)) => envelope.api_version = text(v, meta.offset_of(v))?,
                        (2, RawValue::Len(k)) => envelope.kind = text(k, meta.offset_of(k))?,
                        _ => {}
                    }
                }
            }
            (2, RawValue::Len(raw)) => {
                envelope.raw = raw;
                envelope.raw_offset = reader.offset_of(raw);
            }
            (3, RawValue::Len(encoding)) if !encoding.is_empty() => {
                let encoding = String::from_utf8_lossy(encoding);
                return Err(DecodeError::at(
                    reader.offset(),
                    format!("content encoding {encoding:?} is not supported"),
                ));
            }
            _ => {}
        }
    }
    Ok(envelope)
}

fn text(bytes: &[u8], offset: usize) -> Result<&str, DecodeError> {
    std::str::from_utf8(bytes).map_err(|e| DecodeError::at(offset, format!("not UTF-8: {e}")))
}

/// Decodes one object (a GET's answer) as `K`.
///
/// # Errors
/// A body that is not a protobuf object of `K`'s kind, or does not decode.
pub fn decode_object<K>(body: &[u8]) -> Result<K, DecodeError>
where
    K: k8s_openapi::Resource + DeserializeOwned,
{
    let kind = ProtoKind::of_type::<K>().ok_or_else(|| {
        DecodeError::at(
            0,
            format!("{} {} has no protobuf encoding", K::API_VERSION, K::KIND),
        )
    })?;
    decode_object_of(body, kind)
}

/// [`decode_object`] for a kind known at run time.
///
/// # Errors
/// As [`decode_object`].
pub fn decode_object_of<K: DeserializeOwned>(
    body: &[u8],
    kind: ProtoKind,
) -> Result<K, DecodeError> {
    let envelope = envelope(body, 0)?;
    kind.expect(&envelope, false, 0)?;
    de::decode(envelope.raw, envelope.raw_offset, kind.message, kind.skip)
}

/// A LIST's answer: its metadata, and its items still encoded (decode each with
/// [`ListBody::items`], on any thread).
#[derive(Debug)]
pub struct ListBody<'a> {
    /// The list's metadata (resourceVersion, continue).
    pub metadata: ListMeta,
    items: Vec<(usize, &'a [u8])>,
    item: ProtoKind,
}

impl<'a> ListBody<'a> {
    /// Reads a list of `kind` (`<Kind>List`).
    ///
    /// # Errors
    /// A body that is not a protobuf list of `kind`.
    pub fn parse(body: &'a [u8], kind: ProtoKind) -> Result<Self, DecodeError> {
        let envelope = envelope(body, 0)?;
        kind.expect(&envelope, true, 0)?;
        let list_meta = schema::named("k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta")
            .expect("ListMeta in the schema");
        let mut reader = Reader::new(envelope.raw, envelope.raw_offset);
        let (mut metadata, mut items) = (ListMeta::default(), Vec::new());
        while let Some(field) = reader.next_field()? {
            match (field.number, field.value) {
                (1, RawValue::Len(meta)) => {
                    metadata =
                        de::decode(meta, reader.offset_of(meta), list_meta, de::Skip::default())?;
                }
                (2, RawValue::Len(object)) => items.push((reader.offset_of(object), object)),
                _ => {}
            }
        }
        Ok(ListBody {
            metadata,
            items,
            item: kind,
        })
    }

    /// How many items the list holds.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Decodes the items, in order.
    ///
    /// # Errors
    /// The first item that does not decode.
    pub fn items<K: DeserializeOwned>(&self) -> Result<Vec<K>, DecodeError> {
        self.items
            .iter()
            .map(|(offset, object)| de::decode(object, *offset, self.item.message, self.item.skip))
            .collect()
    }
}

/// Decodes one watch frame's body (after its length): a `metav1.WatchEvent` of `kind`.
///
/// # Errors
/// A frame that is not a watch event of `kind` (or a Status), or does not decode.
pub fn decode_watch_event<K: DeserializeOwned>(
    frame: &[u8],
    kind: ProtoKind,
) -> Result<WatchEvent<K>, DecodeError> {
    let mut reader = Reader::new(frame, 0);
    let (mut event, mut object) = ("", None);
    while let Some(field) = reader.next_field()? {
        match (field.number, field.value) {
            (1, RawValue::Len(t)) => event = text(t, reader.offset_of(t))?,
            (2, RawValue::Len(raw_extension)) => {
                let mut raw = Reader::new(raw_extension, reader.offset_of(raw_extension));
                while let Some(field) = raw.next_field()? {
                    if let (1, RawValue::Len(body)) = (field.number, field.value) {
                        object = Some((raw.offset_of(body), body));
                    }
                }
            }
            _ => {}
        }
    }
    let (offset, body) =
        object.ok_or_else(|| DecodeError::at(0, format!("a {event:?} event without an object")))?;
    let envelope = envelope(body, offset)?;
    match event {
        "ADDED" | "MODIFIED" | "DELETED" => {
            kind.expect(&envelope, false, offset)?;
            let object = de::decode(envelope.raw, envelope.raw_offset, kind.message, kind.skip)?;
            Ok(match event {
                "ADDED" => WatchEvent::Added(object),
                "MODIFIED" => WatchEvent::Modified(object),
                _ => WatchEvent::Deleted(object),
            })
        }
        "BOOKMARK" => {
            kind.expect(&envelope, false, offset)?;
            let object: BookmarkObject =
                de::decode(envelope.raw, envelope.raw_offset, kind.message, kind.skip)?;
            Ok(WatchEvent::Bookmark(Bookmark {
                types: kube::core::TypeMeta {
                    api_version: envelope.api_version.to_owned(),
                    kind: envelope.kind.to_owned(),
                },
                metadata: BookmarkMeta {
                    resource_version: object.metadata.resource_version.unwrap_or_default(),
                    annotations: object.metadata.annotations.unwrap_or_default(),
                },
            }))
        }
        "ERROR" => Ok(WatchEvent::Error(Box::new(status_of(&envelope, offset)?))),
        other => Err(DecodeError::at(
            0,
            format!("an event of unknown type {other:?}"),
        )),
    }
}

fn status_of(envelope: &Envelope<'_>, offset: usize) -> Result<Status, DecodeError> {
    if envelope.kind != "Status" {
        return Err(DecodeError::at(
            offset,
            format!("the body holds {}, not a Status", envelope.kind),
        ));
    }
    let message =
        schema::named("k8s.io.apimachinery.pkg.apis.meta.v1.Status").expect("Status in the schema");
    de::decode(
        envelope.raw,
        envelope.raw_offset,
        message,
        de::Skip::default(),
    )
}

/// Decodes a `metav1.Status` body (an error's answer in protobuf).
///
/// # Errors
/// A body that is not a protobuf Status.
pub fn decode_status(body: &[u8]) -> Result<Status, DecodeError> {
    status_of(&envelope(body, 0)?, 0)
}

/// What a bookmark's object is read as: its metadata only.
#[derive(serde::Deserialize)]
struct BookmarkObject {
    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
}

/// Splits watch frames off a buffer: each a 4-byte big-endian length and that many bytes.
/// Returns the frames complete in `buf` and how many bytes they took. A header that claims
/// more than `max` ends the frames returned; called again from there, it is the error.
///
/// # Errors
/// When the first frame's header claims more than `max` bytes (checked before anything is
/// allocated for it).
pub fn split_frames(buf: &[u8], max: usize) -> Result<(Vec<&[u8]>, usize), DecodeError> {
    let (mut frames, mut at) = (Vec::new(), 0);
    while let Some(header) = buf.get(at..at + 4) {
        let len = u32::from_be_bytes(header.try_into().expect("4 bytes")) as usize;
        if len > max {
            if frames.is_empty() {
                return Err(DecodeError::at(
                    at,
                    format!("a watch frame of {len} bytes, over the limit of {max}"),
                ));
            }
            break;
        }
        let Some(frame) = buf.get(at + 4..at + 4 + len) else {
            break;
        };
        frames.push(frame);
        at += 4 + len;
    }
    Ok((frames, at))
}

/// A message of the schema (by index), read as `T`: what [`Compact`](crate::compact::Compact)
/// decodes on demand.
pub(crate) fn decode_message<T: DeserializeOwned>(
    index: u16,
    bytes: &[u8],
) -> Result<T, DecodeError> {
    de::decode(bytes, 0, schema::message(index), de::Skip::default())
}

/// The `metadata` field of a message of the schema, read as `T` with `managedFields`
/// skipped unread; `None` when the message has none.
pub(crate) fn decode_metadata<T: DeserializeOwned>(
    index: u16,
    bytes: &[u8],
) -> Result<Option<T>, DecodeError> {
    let message = schema::message(index);
    let Some(field) = message.fields.iter().find(|f| f.json == "metadata") else {
        return Ok(None);
    };
    let Some(object_meta) = field.ty.message() else {
        return Ok(None);
    };
    let mut reader = Reader::new(bytes, 0);
    let mut found = None;
    while let Some(raw) = reader.next_field()? {
        if let (true, RawValue::Len(meta)) = (raw.number == field.number, raw.value) {
            found = Some((reader.offset_of(meta), meta));
        }
    }
    let skip = de::Skip {
        managed_fields: true,
    };
    found
        .map(|(offset, meta)| de::decode(meta, offset, object_meta, skip))
        .transpose()
}

/// A message of the schema without `metadata.managedFields`: every other field's bytes as
/// they were (what a compact object keeps when managed fields are stripped).
pub(crate) fn without_managed_fields(index: u16, bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let message = schema::message(index);
    let metadata = message.fields.iter().find(|f| {
        f.json == "metadata" && f.ty.message().is_some_and(|m| m.name == de::OBJECT_META)
    });
    let Some(metadata) = metadata else {
        return Ok(bytes.to_vec());
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut reader = Reader::new(bytes, 0);
    loop {
        let start = reader.offset();
        let Some(field) = reader.next_field()? else {
            break;
        };
        match (field.number == metadata.number, field.value) {
            (true, RawValue::Len(meta)) => {
                let base = reader.offset_of(meta);
                let mut kept = Vec::with_capacity(meta.len());
                let mut inner = Reader::new(meta, base);
                loop {
                    let from = inner.offset() - base;
                    let Some(field) = inner.next_field()? else {
                        break;
                    };
                    if field.number != de::MANAGED_FIELDS {
                        kept.extend_from_slice(&meta[from..inner.offset() - base]);
                    }
                }
                put_varint(&mut out, (u64::from(metadata.number) << 3) | 2);
                put_varint(&mut out, kept.len() as u64);
                out.extend_from_slice(&kept);
            }
            _ => out.extend_from_slice(&bytes[start..reader.offset()]),
        }
    }
    Ok(out)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
