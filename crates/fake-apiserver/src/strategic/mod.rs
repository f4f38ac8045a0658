//! Strategic merge patch (`application/strategic-merge-patch+json`), as kube-apiserver
//! applies it to built-in types: lists with a merge strategy merge item by item (containers
//! by `name`, ports by `containerPort`, finalizers as a set), the others are replaced; the
//! directives `$patch` (`replace`, `delete`), `$setElementOrder/<list>`, `$retainKeys` and
//! `$deleteFromPrimitiveList/<list>` act as on the real server and are never stored. The
//! result, the order of merged lists, and the error messages follow apimachinery's
//! `strategicpatch` package (v1.36), with the metadata taken from the real server's OpenAPI
//! ([`schema`]). Custom resources have no such metadata, and refuse this patch type (415).

mod gofmt;
mod list;
mod map;
mod schema;

use serde_json::Value;

pub use self::schema::strategic_patch_table;
pub(crate) use self::schema::{FieldMeta, Schema};

/// Why a strategic merge patch failed, sorted as the real server answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StrategicError {
    /// A malformed directive: 400 BadRequest.
    BadRequest(&'static str),
    /// A list of lists: 422, the message in the details' causes.
    Unprocessable(&'static str),
    /// Everything else (a missing merge key, an unknown `$patch`, an order mismatch): the real
    /// server answers 500 with no reason and the message as the text.
    Failed(String),
}

const BAD_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const BAD_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const BAD_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";
const LIST_OF_LISTS: &str = "lists of lists are not supported";

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const ELEMENT_ORDER: &str = "$setElementOrder";
const DELETE_FROM_LIST: &str = "$deleteFromPrimitiveList";

/// Applies `patch` (a JSON object) to `original` (an object of the kind `schema` describes).
pub(crate) fn apply(
    original: Value,
    patch: Value,
    schema: Schema,
) -> Result<Value, StrategicError> {
    let (Value::Object(original), Value::Object(patch)) = (original, patch) else {
        return Err(StrategicError::BadRequest("invalid JSON document"));
    };
    map::merge_map(original, patch, schema).map(Value::Object)
}

fn no_merge_key(item: &Value, key: &str) -> StrategicError {
    StrategicError::Failed(format!(
        "map: {} does not contain declared merge key: {key}",
        gofmt::go_value(item)
    ))
}

fn bad_patch_type(directive: &Value, map: &Value) -> StrategicError {
    StrategicError::Failed(format!(
        "unknown patch type: {} in map: {}",
        gofmt::go_value(directive),
        gofmt::go_value(map)
    ))
}

fn bad_arg_type(expected: &'static str, actual: &Value) -> StrategicError {
    StrategicError::Failed(format!(
        "expected a {expected}, but received a {}",
        gofmt::go_type(actual)
    ))
}

/// The list field a `$deleteFromPrimitiveList/<f>` or `$setElementOrder/<f>` key names.
fn directive_target<'k>(
    key: &'k str,
    prefix: &str,
    error: &'static str,
) -> Result<&'k str, StrategicError> {
    match key.split_once('/') {
        Some((head, field)) if head == prefix => Ok(field),
        _ => Err(StrategicError::BadRequest(error)),
    }
}

/// Drops every map holding a `$patch` directive (and list items that are such maps), as
/// the real server does to patch values it stores without merging.
fn remove_directives(value: Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            if map.contains_key(DIRECTIVE) {
                return None;
            }
            Some(Value::Object(
                map.into_iter()
                    .filter_map(|(k, v)| remove_directives(v).map(|v| (k, v)))
                    .collect(),
            ))
        }
        Value::Array(items) => Some(Value::Array(
            items.into_iter().filter_map(remove_directives).collect(),
        )),
        other => Some(other),
    }
}

/// Removes `null` map entries at every depth (a null for a key the object lacks is ignored).
fn discard_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(discard_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(discard_nulls),
        _ => {}
    }
}

/// Go's dynamic type of a decoded JSON value, as the merge compares them (integers and
/// floats differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Bool,
    Int,
    Float,
    String,
    List,
    Map,
}

fn kind(value: &Value) -> Kind {
    match value {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) if n.is_f64() => Kind::Float,
        Value::Number(_) => Kind::Int,
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::List,
        Value::Object(_) => Kind::Map,
    }
}

#[cfg(test)]
mod tests;
