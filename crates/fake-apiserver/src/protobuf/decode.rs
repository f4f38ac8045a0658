//! Protobuf messages to JSON objects, by the schema: how the fake reads the protobuf bodies
//! kubectl's typed commands and client-go's typed clients send.

use base64::{Engine, engine::general_purpose::STANDARD};
use kube_protobuf_schema::{Field, Message, Rep, Shape, Ty};
use serde_json::{Map, Value};

use super::{
    encode::entry_value,
    wire::{Raw, Reader},
};

/// Nesting deeper than this is refused (one built-in message can hold itself).
const MAX_DEPTH: usize = 100;

/// `bytes` as `message`'s JSON object.
pub(crate) fn object(bytes: &[u8], message: &Message) -> Result<Value, String> {
    let mut map = Map::new();
    fields(bytes, message, &mut map, 0)?;
    Ok(Value::Object(map))
}

fn fields(
    bytes: &[u8],
    message: &Message,
    map: &mut Map<String, Value>,
    depth: usize,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("messages nested deeper than {MAX_DEPTH}"));
    }
    let mut reader = Reader::new(bytes);
    while let Some((number, raw)) = reader.next()? {
        // Fields this schema does not know (a newer client's) are skipped.
        let Some(field) = message.field(number) else {
            continue;
        };
        let at = |e: String| format!("{}.{}: {e}", message.name, field.json);
        if field.inline {
            if let (Some(child), Raw::Len(inner)) = (field.ty.message(), raw) {
                fields(inner, child, map, depth + 1).map_err(at)?;
            }
            continue;
        }
        match field.rep {
            Rep::Single => {
                let value = single(field, raw, depth).map_err(at)?;
                if field.omit_zero && is_zero(&value) {
                    continue;
                }
                map.insert(field.json.to_owned(), value);
            }
            Rep::Repeated => {
                let items = map
                    .entry(field.json.to_owned())
                    .or_insert_with(|| Value::Array(Vec::new()));
                let Value::Array(items) = items else {
                    unreachable!("inserted as an array")
                };
                match (field.ty, raw) {
                    // A packed run of scalars: fixed-width ones in 8 or 4 bytes, others varints.
                    (Ty::Double, Raw::Len(run)) => {
                        for chunk in run.chunks(8) {
                            let bits = <[u8; 8]>::try_from(chunk)
                                .map_err(|_| at("a cut packed double".into()))?;
                            items.push(
                                single(field, Raw::Fixed64(u64::from_le_bytes(bits)), depth)
                                    .map_err(at)?,
                            );
                        }
                    }
                    (Ty::Float, Raw::Len(run)) => {
                        for chunk in run.chunks(4) {
                            let bits = <[u8; 4]>::try_from(chunk)
                                .map_err(|_| at("a cut packed float".into()))?;
                            items.push(
                                single(field, Raw::Fixed32(u32::from_le_bytes(bits)), depth)
                                    .map_err(at)?,
                            );
                        }
                    }
                    (ty, Raw::Len(run)) if !matches!(ty, Ty::Str | Ty::Bytes | Ty::Message(_)) => {
                        for v in Reader::packed(run).map_err(at)? {
                            items.push(single(field, Raw::Varint(v), depth).map_err(at)?);
                        }
                    }
                    _ => items.push(single(field, raw, depth).map_err(at)?),
                }
            }
            Rep::Map => {
                let Raw::Len(entry) = raw else {
                    return Err(at("a map entry that is not length-delimited".into()));
                };
                let (mut key, mut value) = (String::new(), None);
                let mut reader = Reader::new(entry);
                while let Some((n, raw)) = reader.next().map_err(at)? {
                    match (n, raw) {
                        (1, Raw::Len(k)) => key = utf8(k).map_err(at)?,
                        (2, raw) => {
                            value = Some(single(&entry_value(field.ty), raw, depth).map_err(at)?)
                        }
                        _ => {}
                    }
                }
                let value = match value {
                    Some(value) => value,
                    None => zero(field.ty, depth).map_err(at)?,
                };
                let entries = map
                    .entry(field.json.to_owned())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(entries) = entries {
                    entries.insert(key, value);
                }
            }
        }
    }
    Ok(())
}

/// One value of `field`.
fn single(field: &Field, raw: Raw<'_>, depth: usize) -> Result<Value, String> {
    let wrong = || format!("a {:?} value sent as {raw:?}", field.ty);
    Ok(match (field.ty, raw) {
        (Ty::Str, Raw::Len(bytes)) => Value::String(utf8(bytes)?),
        (Ty::Bytes, Raw::Len(bytes)) => Value::String(STANDARD.encode(bytes)),
        (Ty::Bool, Raw::Varint(v)) => Value::Bool(v != 0),
        (Ty::Int32, Raw::Varint(v)) => Value::from(v as u32 as i32),
        (Ty::Int64, Raw::Varint(v)) => Value::from(v as i64),
        (Ty::Uint32, Raw::Varint(v)) => Value::from(v as u32),
        (Ty::Uint64, Raw::Varint(v)) => Value::from(v),
        (Ty::Double, Raw::Fixed64(v)) => Value::from(f64::from_bits(v)),
        (Ty::Float, Raw::Fixed32(v)) => Value::from(f32::from_bits(v)),
        (Ty::Message(_), Raw::Len(bytes)) => shaped(
            bytes,
            field.ty.message().expect("a message type"),
            depth + 1,
        )?,
        _ => return Err(wrong()),
    })
}

/// A message's JSON, by its shape.
fn shaped(bytes: &[u8], message: &Message, depth: usize) -> Result<Value, String> {
    Ok(match message.shape {
        Shape::Object => {
            let mut map = Map::new();
            fields(bytes, message, &mut map, depth)?;
            Value::Object(map)
        }
        Shape::List => {
            let mut map = Map::new();
            fields(bytes, message, &mut map, depth)?;
            map.into_iter()
                .next()
                .map_or(Value::Array(Vec::new()), |(_, v)| v)
        }
        Shape::Time | Shape::MicroTime => {
            let (mut seconds, mut nanos) = (None, 0i32);
            let mut reader = Reader::new(bytes);
            while let Some((n, raw)) = reader.next()? {
                match (n, raw) {
                    (1, Raw::Varint(v)) => seconds = Some(v as i64),
                    (2, Raw::Varint(v)) => nanos = v as u32 as i32,
                    _ => {}
                }
            }
            let Some(seconds) = seconds else {
                return Ok(Value::Null); // a zero time
            };
            let micro = message.shape == Shape::MicroTime;
            let nanos = if micro { nanos - nanos % 1000 } else { 0 };
            let at = jiff::Timestamp::new(seconds, nanos)
                .map_err(|e| format!("a time out of range ({seconds} s): {e}"))?;
            Value::String(if micro {
                format!("{at:.6}")
            } else {
                format!("{at:.0}")
            })
        }
        Shape::Quantity => string_field(bytes, 1)?.map_or(Value::Null, Value::String),
        Shape::IntOrString => {
            let (mut is_string, mut int, mut string) = (false, 0i32, String::new());
            let mut reader = Reader::new(bytes);
            while let Some((n, raw)) = reader.next()? {
                match (n, raw) {
                    (1, Raw::Varint(v)) => is_string = v == 1,
                    (2, Raw::Varint(v)) => int = v as u32 as i32,
                    (3, Raw::Len(s)) => string = utf8(s)?,
                    _ => {}
                }
            }
            if is_string {
                Value::String(string)
            } else {
                Value::from(int)
            }
        }
        Shape::RawJson => match bytes_field(bytes, 1)? {
            Some(raw) if !raw.is_empty() => serde_json::from_slice(raw)
                .map_err(|e| format!("embedded JSON that does not parse: {e}"))?,
            _ => Value::Null,
        },
        Shape::Duration => return Err("a metav1.Duration (no built-in kind has one)".into()),
    })
}

fn bytes_field(bytes: &[u8], number: u32) -> Result<Option<&[u8]>, String> {
    let mut reader = Reader::new(bytes);
    let mut found = None;
    while let Some((n, raw)) = reader.next()? {
        if let (true, Raw::Len(b)) = (n == number, raw) {
            found = Some(b);
        }
    }
    Ok(found)
}

fn string_field(bytes: &[u8], number: u32) -> Result<Option<String>, String> {
    bytes_field(bytes, number)?.map(utf8).transpose()
}

fn utf8(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a string that is not UTF-8".to_owned())
}

/// The zero of a map's value type (an entry without its value): an empty message reads
/// as what its shape makes of nothing (`null` for a time).
fn zero(ty: Ty, depth: usize) -> Result<Value, String> {
    Ok(match ty {
        Ty::Str | Ty::Bytes => Value::String(String::new()),
        Ty::Bool => Value::Bool(false),
        Ty::Message(_) => shaped(&[], ty.message().expect("a message type"), depth + 1)?,
        _ => Value::from(0),
    })
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}
