//! JSON objects to protobuf messages, by the schema: what kube-apiserver writes for the
//! built-in kinds (fields in number order; a field JSON leaves out is left out).

use base64::{Engine, engine::general_purpose::STANDARD};
use kube_protobuf_schema::{Field, Message, Rep, Shape, Ty};
use serde_json::{Map, Value};

use super::wire::{len_field, nested, varint, varint_field};

/// Why an object could not be written: the field's path and what was wrong with it.
pub(crate) type EncodeError = String;

/// Appends `value`'s fields as `message` (an object-shaped message's body).
pub(crate) fn object(
    out: &mut Vec<u8>,
    message: &Message,
    value: &Value,
) -> Result<(), EncodeError> {
    let map = value
        .as_object()
        .ok_or_else(|| format!("{} is {}, not an object", message.name, kind_of(value)))?;
    fields(out, message, map)
}

fn fields(
    out: &mut Vec<u8>,
    message: &Message,
    map: &Map<String, Value>,
) -> Result<(), EncodeError> {
    for field in message.fields {
        if field.inline {
            if let Some(child) = field.ty.message() {
                // An embedded Go struct: its fields are the parent's JSON keys.
                nested(out, field.number, |inner| fields(inner, child, map))?;
            }
            continue;
        }
        let Some(value) = map.get(field.json).filter(|v| !v.is_null()) else {
            continue;
        };
        let at = |e: EncodeError| format!("{}: {e}", field.json);
        match field.rep {
            Rep::Single => single(out, field, value).map_err(at)?,
            Rep::Repeated => {
                let items = value
                    .as_array()
                    .ok_or_else(|| at(format!("{} is not an array", kind_of(value))))?;
                for item in items {
                    single(out, field, item).map_err(at)?;
                }
            }
            Rep::Map => {
                let entries = value
                    .as_object()
                    .ok_or_else(|| at(format!("{} is not an object", kind_of(value))))?;
                for (key, item) in entries {
                    nested(out, field.number, |entry| {
                        len_field(entry, 1, key.as_bytes());
                        if !item.is_null() {
                            single(entry, &entry_value(field.ty), item)?;
                        }
                        Ok::<_, EncodeError>(())
                    })
                    .map_err(|e| at(format!("{key}: {e}")))?;
                }
            }
        }
    }
    Ok(())
}

/// A map entry's value field (number 2), given the map's value type.
pub(crate) fn entry_value(ty: Ty) -> Field {
    Field {
        number: 2,
        json: "value",
        ty,
        rep: Rep::Single,
        omit_zero: false,
        inline: false,
    }
}

/// Appends one value of `field`.
fn single(out: &mut Vec<u8>, field: &Field, value: &Value) -> Result<(), EncodeError> {
    let number = field.number;
    match field.ty {
        Ty::Str => len_field(out, number, text(value)?.as_bytes()),
        Ty::Bytes => {
            let text = value.as_str().ok_or("bytes that are not a base64 string")?;
            let bytes = STANDARD
                .decode(text)
                .map_err(|e| format!("bytes that are not base64: {e}"))?;
            len_field(out, number, &bytes);
        }
        Ty::Bool => {
            let b = value
                .as_bool()
                .ok_or_else(|| format!("{} is not a boolean", kind_of(value)))?;
            varint_field(out, number, u64::from(b));
        }
        Ty::Int32 | Ty::Int64 => varint_field(out, number, integer(value)? as u64),
        Ty::Uint32 | Ty::Uint64 => varint_field(out, number, integer(value)? as u64),
        Ty::Double => {
            let x = value.as_f64().ok_or("not a number")?;
            varint(out, (u64::from(number) << 3) | 1);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Ty::Float => {
            let x = value.as_f64().ok_or("not a number")? as f32;
            varint(out, (u64::from(number) << 3) | 5);
            out.extend_from_slice(&x.to_le_bytes());
        }
        Ty::Message(_) => {
            let message = field.ty.message().expect("a message type");
            nested(out, number, |inner| shaped(inner, message, value))?;
        }
    }
    Ok(())
}

/// A message's body, by its shape.
fn shaped(out: &mut Vec<u8>, message: &Message, value: &Value) -> Result<(), EncodeError> {
    match message.shape {
        Shape::Object => object(out, message, value),
        Shape::List => {
            let field = message.field(1).ok_or("a list message without field 1")?;
            let items = value
                .as_array()
                .ok_or_else(|| format!("{} is not an array", kind_of(value)))?;
            items.iter().try_for_each(|item| single(out, field, item))
        }
        Shape::Time | Shape::MicroTime => {
            let text = value
                .as_str()
                .ok_or_else(|| format!("a time that is {}", kind_of(value)))?;
            let at: jiff::Timestamp = text
                .parse()
                .map_err(|e| format!("a time that is not RFC 3339 ({text:?}): {e}"))?;
            varint_field(out, 1, at.as_second() as u64);
            let nanos = at.subsec_nanosecond();
            if nanos != 0 {
                varint_field(out, 2, nanos as u64);
            }
            Ok(())
        }
        Shape::Quantity => {
            len_field(out, 1, text(value)?.as_bytes());
            Ok(())
        }
        Shape::IntOrString => {
            // All three fields, as Go writes them.
            let (kind, int, string) = match value {
                Value::String(s) => (1, 0, s.as_str()),
                other => (0, integer(other)?, ""),
            };
            varint_field(out, 1, kind);
            varint_field(out, 2, int as u64);
            len_field(out, 3, string.as_bytes());
            Ok(())
        }
        Shape::RawJson => {
            let raw = serde_json::to_vec(value).map_err(|e| e.to_string())?;
            len_field(out, 1, &raw);
            Ok(())
        }
        Shape::Duration => Err("a metav1.Duration (no built-in kind has one)".into()),
    }
}

/// A string field's text; numbers and booleans are written as JSON writes them, so a
/// quantity given as `1` is `"1"`.
fn text(value: &Value) -> Result<std::borrow::Cow<'_, str>, EncodeError> {
    match value {
        Value::String(s) => Ok(s.as_str().into()),
        Value::Number(n) => Ok(n.to_string().into()),
        other => Err(format!("{} is not a string", kind_of(other))),
    }
}

fn integer(value: &Value) -> Result<i64, EncodeError> {
    value
        .as_i64()
        .or_else(|| value.as_u64().map(|u| u as i64))
        .ok_or_else(|| format!("{} is not an integer", kind_of(value)))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
