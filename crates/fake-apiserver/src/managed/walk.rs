//! An object seen as server-side apply sees it: which of its parts are owned whole (leaves:
//! scalars, atomic lists and maps) and which are made of parts (maps, the items of keyed
//! lists and sets). The built-in kinds' shapes come from the real server's OpenAPI (the
//! patch table); a custom resource's maps are granular and its lists atomic (the default for
//! a CRD schema without `x-kubernetes-list-type`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::path::{FieldSet, Path, Step};
use crate::strategic::{FieldMeta, Schema};

/// Which part of an object a write is about: the `status` subresource's writes own only
/// status, every other write everything but status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    Object,
    Status,
}

/// How a list is merged and owned.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ListKind {
    /// Replaced whole, owned whole.
    Atomic,
    /// Items are scalars, each owned on its own (`metadata.finalizers`).
    Set,
    /// Items are maps identified by one field (`containers` by `name`).
    Map(&'static str),
}

impl ListKind {
    pub(crate) fn of(meta: &'static FieldMeta) -> Self {
        let merges = meta
            .strategy
            .as_deref()
            .is_some_and(|s| s.split(',').any(|s| s == "merge"));
        match (merges, meta.key.as_deref()) {
            (true, Some(key)) => Self::Map(key),
            (true, None) => Self::Set,
            (false, _) => Self::Atomic,
        }
    }
}

/// One node of an object.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Node<'v> {
    /// Owned whole; compared by value.
    Leaf(&'v Value),
    /// A map or a list, owned through its parts.
    Inner,
    /// An item of a keyed list: owned itself (it exists because someone wants it) and
    /// through its fields.
    Item,
}

/// The schema of an object's kind (untyped for a custom resource).
pub(crate) fn root_schema(object: &Value) -> Schema {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    Schema::for_kind(api_version, kind).unwrap_or_else(Schema::untyped)
}

/// The metadata fields that have owners (the rest are the server's).
const OWNED_METADATA: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

/// Every node of `object` that `scope` covers, by path.
pub(crate) fn nodes(object: &Value, scope: Scope) -> BTreeMap<Path, Node<'_>> {
    let mut out = BTreeMap::new();
    let schema = root_schema(object);
    for (name, value) in object.as_object().into_iter().flatten() {
        let path = vec![Step::Field(name.clone())];
        match (name.as_str(), scope) {
            ("apiVersion" | "kind", _) => {}
            ("status", Scope::Status) => walk(value, schema.field(name), path, &mut out),
            (_, Scope::Status) | ("status", Scope::Object) => {}
            ("metadata", Scope::Object) => {
                let meta = Schema::object_meta();
                for field in OWNED_METADATA {
                    if let Some(value) = value.get(field) {
                        let mut path = path.clone();
                        path.push(Step::Field(field.into()));
                        walk(value, meta.field(field), path, &mut out);
                    }
                }
            }
            (_, Scope::Object) => walk(value, schema.field(name), path, &mut out),
        }
    }
    out
}

/// What a manager claims by applying a configuration whose nodes are `config`: its leaves
/// and the items of its keyed lists and sets (not the maps and lists that hold them).
pub(crate) fn applied_set(config: &BTreeMap<Path, Node<'_>>) -> FieldSet {
    config
        .iter()
        .filter(|(_, node)| !matches!(node, Node::Inner))
        .map(|(path, _)| path.clone())
        .collect()
}

/// The key step of a keyed list's item, if it has its key.
pub(crate) fn item_key(item: &Value, key: &str) -> Option<Step> {
    let value = item.get(key)?;
    Some(Step::Key(json!({ key: value }).to_string()))
}

/// The step of a set's item.
pub(crate) fn set_item(item: &Value) -> Step {
    Step::Value(item.to_string())
}

fn walk<'v>(
    value: &'v Value,
    (schema, meta): (Schema, &'static FieldMeta),
    path: Path,
    out: &mut BTreeMap<Path, Node<'v>>,
) {
    match value {
        Value::Object(map) if !meta.atomic && !map.is_empty() => {
            for (name, below) in map {
                let mut path = path.clone();
                path.push(Step::Field(name.clone()));
                walk(below, schema.field(name), path, out);
            }
            out.insert(path, Node::Inner);
        }
        Value::Array(items) => match ListKind::of(meta) {
            ListKind::Set if !items.is_empty() => {
                for item in items {
                    let mut path = path.clone();
                    path.push(set_item(item));
                    out.insert(path, Node::Leaf(item));
                }
                out.insert(path, Node::Inner);
            }
            ListKind::Map(key) if items.iter().all(|i| item_key(i, key).is_some()) => {
                for item in items {
                    let mut item_path = path.clone();
                    item_path.push(item_key(item, key).expect("checked"));
                    for (name, below) in item.as_object().into_iter().flatten() {
                        let mut path = item_path.clone();
                        path.push(Step::Field(name.clone()));
                        walk(below, schema.field(name), path, out);
                    }
                    out.insert(item_path, Node::Item);
                }
                if !items.is_empty() {
                    out.insert(path, Node::Inner);
                } else {
                    out.insert(path, Node::Leaf(value));
                }
            }
            _ => {
                out.insert(path, Node::Leaf(value));
            }
        },
        _ => {
            out.insert(path, Node::Leaf(value));
        }
    }
}
