//! Kubernetes' protobuf encoding for the built-in kinds, as kube-apiserver speaks it: answers
//! to clients that ask for it (`Accept: application/vnd.kubernetes.protobuf`), and request
//! bodies sent in it (kubectl's typed `create` commands, client-go's typed clients).
//!
//! A body is the magic `k8s\0` and a `runtime.Unknown` (the kind, and the message's bytes);
//! a watch is a stream of frames, each a 4-byte big-endian length and a `metav1.WatchEvent`
//! whose object holds such a body. Custom resources have no protobuf encoding: they are
//! answered in JSON when the client also takes JSON, and refused (406) when not.
//!
//! The schema is shared with kube-informer's decoder ([`kube_protobuf_schema`], generated
//! from Kubernetes' sources); the code that reads and writes by it is this crate's own, and
//! e2e compares both against the real server.

mod decode;
mod encode;
mod wire;

use bytes::Bytes;
use kube_protobuf_schema::{self as schema, MAGIC, Message};
use serde_json::Value;

use self::wire::{Raw, Reader, len_field, nested};
use crate::status::ApiError;

pub(crate) use kube_protobuf_schema::CONTENT_TYPE;

/// The content type of a protobuf watch.
pub(crate) const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// What an answer is written in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Format {
    Json,
    /// Protobuf, the kind's message.
    Protobuf(&'static Message),
}

impl Format {
    pub(crate) fn is_protobuf(self) -> bool {
        matches!(self, Format::Protobuf(_))
    }
}

/// The media types of an `Accept` header this server writes, in the order the client
/// prefers them (as kube-apiserver ranks them: by `q`, highest first, then specific types
/// before wildcards, then as written): `true` for protobuf, `false` for JSON. Ranges with
/// `q=0`, and Tables and metadata-only answers (`as=`, chosen before this), are skipped.
fn accepted(accept: &str) -> impl Iterator<Item = bool> + use<> {
    let mut ranked: Vec<(u16, bool, usize, bool)> = Vec::new();
    for (position, range) in accept.split(',').enumerate() {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let mut quality = 1000u16;
        let mut as_other = false;
        for param in parts {
            match param.split_once('=') {
                Some(("q", q)) => {
                    quality = q
                        .trim()
                        .parse::<f32>()
                        .map_or(0, |q| (q.clamp(0.0, 1.0) * 1000.0) as u16);
                }
                Some(("as", _)) => as_other = true,
                _ => {}
            }
        }
        let protobuf = match media.as_str() {
            CONTENT_TYPE => true,
            "" | "*/*" | "application/*" | "application/json" | "application/yaml" => false,
            _ => continue,
        };
        if as_other || quality == 0 {
            continue;
        }
        let wildcard = media.is_empty() || media.ends_with("/*");
        ranked.push((quality, wildcard, position, protobuf));
    }
    ranked.sort_by_key(|&(quality, wildcard, position, _)| {
        (std::cmp::Reverse(quality), wildcard, position)
    });
    ranked.into_iter().map(|(.., protobuf)| protobuf)
}

/// The encoding of the answer: the first media type in `accept` this server can write for
/// the kind. Only protobuf asked for a kind protobuf does not serve is refused (406), as
/// the real server refuses it.
pub(crate) fn negotiate(accept: &str, api_version: &str, kind: &str) -> Result<Format, ApiError> {
    let mut refused = false;
    for protobuf in accepted(accept) {
        if !protobuf {
            return Ok(Format::Json);
        }
        match schema::kind(api_version, kind) {
            Some(message) => return Ok(Format::Protobuf(message)),
            None => refused = true,
        }
    }
    match refused {
        true => Err(ApiError::not_acceptable()),
        false => Ok(Format::Json),
    }
}

/// The encoding of an error's `Status`, a built-in kind whatever the resource: protobuf
/// when the client names it before JSON (as kube-apiserver does, custom resources too).
pub(crate) fn errors_format(accept: &str) -> Format {
    match prefers_protobuf(accept) {
        true => Format::Protobuf(
            schema::named("k8s.io.apimachinery.pkg.apis.meta.v1.Status")
                .expect("Status in the schema"),
        ),
        false => Format::Json,
    }
}

/// Whether the first media type of `accept` this server writes is protobuf.
pub(crate) fn prefers_protobuf(accept: &str) -> bool {
    accepted(accept).next() == Some(true)
}

/// Whether a request body's content type is protobuf.
pub(crate) fn is_protobuf_body(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim() == CONTENT_TYPE
}

/// `message`'s bytes for a JSON object (its `kind` and `apiVersion` are not part of it).
pub(crate) fn message_bytes(message: &Message, value: &Value) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    encode::object(&mut out, message, value).map_err(|e| {
        ApiError::internal(format!(
            "fake-apiserver could not write the object as protobuf ({}): {e}",
            message.name
        ))
    })?;
    Ok(out)
}

/// `k8s\0` and the `runtime.Unknown` around a message's bytes. Go writes the empty content
/// encoding and type too; so does this.
pub(crate) fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len() + 64);
    out.extend_from_slice(MAGIC);
    let _ = nested(&mut out, 1, |meta| {
        len_field(meta, 1, api_version.as_bytes());
        len_field(meta, 2, kind.as_bytes());
        Ok::<_, ()>(())
    });
    len_field(&mut out, 2, raw);
    len_field(&mut out, 3, b"");
    len_field(&mut out, 4, b"");
    out
}

/// A whole object body: envelope and message.
pub(crate) fn object(message: &Message, value: &Value) -> Result<Vec<u8>, ApiError> {
    let api_version = value["apiVersion"].as_str().unwrap_or_default();
    let kind = value["kind"].as_str().unwrap_or_default();
    Ok(envelope(api_version, kind, &message_bytes(message, value)?))
}

/// A list body: the list kind's message, its `ListMeta` (field 1) from `metadata` and the
/// items' messages (field 2) as they are.
pub(crate) fn list<'a>(
    api_version: &str,
    list_kind: &str,
    metadata: &Value,
    items: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, ApiError> {
    let list_meta = schema::named("k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta")
        .expect("ListMeta in the schema");
    let mut raw = Vec::new();
    len_field(&mut raw, 1, &message_bytes(list_meta, metadata)?);
    for item in items {
        len_field(&mut raw, 2, item);
    }
    Ok(envelope(api_version, list_kind, &raw))
}

/// A `Status` body (errors, and an immediate deletion's answer).
pub(crate) fn status(value: &Value) -> Vec<u8> {
    let message =
        schema::named("k8s.io.apimachinery.pkg.apis.meta.v1.Status").expect("Status in the schema");
    let raw = message_bytes(message, value).expect("the server's own Status bodies encode");
    envelope("v1", "Status", &raw)
}

/// One watch frame: the length, then a `WatchEvent` of `event` holding `object` (a whole
/// body, envelope included).
pub(crate) fn frame(event: &str, object: &[u8]) -> Bytes {
    let mut event_bytes = Vec::with_capacity(object.len() + 32);
    len_field(&mut event_bytes, 1, event.as_bytes());
    let _ = nested(&mut event_bytes, 2, |raw| {
        len_field(raw, 1, object);
        Ok::<_, ()>(())
    });
    let mut out = Vec::with_capacity(event_bytes.len() + 4);
    out.extend_from_slice(&(event_bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(&event_bytes);
    Bytes::from(out)
}

/// A bookmark's object: the kind, with only `metadata.resourceVersion` (and annotations).
pub(crate) fn bookmark(
    message: &Message,
    api_version: &str,
    kind: &str,
    metadata: &Value,
) -> Bytes {
    let value = serde_json::json!({ "metadata": metadata });
    let raw = message_bytes(message, &value).expect("a bookmark's metadata encodes");
    frame("BOOKMARK", &envelope(api_version, kind, &raw))
}

/// A protobuf request body as the JSON object it holds, with its `kind` and `apiVersion`.
pub(crate) fn read_body(body: &[u8]) -> Result<Value, ApiError> {
    let bad =
        |why: String| ApiError::bad_request(format!("the protobuf body could not be read: {why}"));
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not begin with the k8s\\0 magic".into()))?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut reader = Reader::new(rest);
    while let Some((number, value)) = reader.next().map_err(bad)? {
        match (number, value) {
            (1, Raw::Len(type_meta)) => {
                let mut meta = Reader::new(type_meta);
                while let Some((n, v)) = meta.next().map_err(bad)? {
                    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                    match (n, v) {
                        (1, Raw::Len(b)) => api_version = text(b),
                        (2, Raw::Len(b)) => kind = text(b),
                        _ => {}
                    }
                }
            }
            (2, Raw::Len(bytes)) => raw = bytes,
            _ => {}
        }
    }
    let message = schema::kind(&api_version, &kind)
        .or_else(|| schema::named(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}")))
        .ok_or_else(|| bad(format!("{kind} ({api_version}) has no protobuf encoding")))?;
    let mut value = decode::object(raw, message).map_err(bad)?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), kind.into());
    }
    Ok(value)
}

#[cfg(test)]
mod tests;
