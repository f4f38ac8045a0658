//! Server-side apply's merge of a configuration into the live object, and the removal of
//! the fields a manager stopped applying.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{
    path::{FieldSet, Path, Step},
    walk::{ListKind, item_key, root_schema, set_item},
};
use crate::strategic::{FieldMeta, Schema};

/// `config` merged into `live`: maps field by field, keyed lists item by item, sets by
/// value, everything else replaced. Items the configuration names keep its order; live items
/// it does not name stay where they were.
pub(crate) fn merge(live: &mut Value, config: &Value) {
    let schema = root_schema(config);
    let granular = Schema::untyped().field("");
    let (Some(live_map), Some(config)) = (live.as_object_mut(), config.as_object()) else {
        *live = config.clone();
        return;
    };
    for (name, value) in config {
        let shape = match name.as_str() {
            "metadata" => (Schema::object_meta(), granular.1),
            _ => schema.field(name),
        };
        match live_map.get_mut(name) {
            Some(live) => merge_value(live, value, shape),
            None => {
                live_map.insert(name.clone(), value.clone());
            }
        }
    }
}

fn merge_value(live: &mut Value, config: &Value, (schema, meta): (Schema, &'static FieldMeta)) {
    match (live, config) {
        (Value::Object(live), Value::Object(config)) if !meta.atomic => {
            merge_fields(live, config, schema);
        }
        (Value::Array(live), Value::Array(config)) => match ListKind::of(meta) {
            ListKind::Set => {
                let merged = interleave(
                    std::mem::take(live),
                    config,
                    |i| Some(set_item(i)),
                    |_, _| {},
                );
                *live = merged;
            }
            ListKind::Map(key)
                if live
                    .iter()
                    .chain(config)
                    .all(|i| item_key(i, key).is_some()) =>
            {
                let merged = interleave(
                    std::mem::take(live),
                    config,
                    |i| item_key(i, key),
                    |live, config| {
                        if let (Value::Object(live), Value::Object(config)) = (live, config) {
                            merge_fields(live, config, schema);
                        }
                    },
                );
                *live = merged;
            }
            _ => *live = config.clone(),
        },
        (live, config) => *live = config.clone(),
    }
}

fn merge_fields(live: &mut Map<String, Value>, config: &Map<String, Value>, schema: Schema) {
    for (name, value) in config {
        match live.get_mut(name) {
            Some(live) => merge_value(live, value, schema.field(name)),
            None => {
                live.insert(name.clone(), value.clone());
            }
        }
    }
}

/// The live items with the configuration's merged in: a configured item takes its place in
/// the configuration's order, ahead of the next live item the configuration also names.
fn interleave(
    live: Vec<Value>,
    config: &[Value],
    id: impl Fn(&Value) -> Option<Step>,
    merge_item: impl Fn(&mut Value, &Value),
) -> Vec<Value> {
    let position: HashMap<Step, usize> = config
        .iter()
        .enumerate()
        .filter_map(|(at, item)| Some((id(item)?, at)))
        .collect();
    let mut live_items: HashMap<Step, Value> = HashMap::new();
    let mut order = Vec::new();
    for item in live {
        match id(&item) {
            Some(step) if position.contains_key(&step) => {
                order.push(Err(step.clone()));
                live_items.insert(step, item);
            }
            _ => order.push(Ok(item)),
        }
    }
    let mut out = Vec::new();
    let mut emitted: HashSet<Step> = HashSet::new();
    let mut next = 0;
    let mut emit_through = |upto: usize, out: &mut Vec<Value>, live_items: &mut HashMap<_, _>| {
        while next <= upto && next < config.len() {
            let item = &config[next];
            next += 1;
            let Some(step) = id(item) else { continue };
            if !emitted.insert(step.clone()) {
                continue;
            }
            match live_items.remove(&step) {
                Some(mut live) => {
                    merge_item(&mut live, item);
                    out.push(live);
                }
                None => out.push(item.clone()),
            }
        }
    };
    for entry in order {
        match entry {
            Ok(item) => out.push(item),
            Err(step) => emit_through(position[&step], &mut out, &mut live_items),
        }
    }
    emit_through(usize::MAX, &mut out, &mut live_items);
    out
}

/// The node at `path`, if it exists.
fn get_mut<'v>(value: &'v mut Value, path: &[Step]) -> Option<&'v mut Value> {
    let Some((step, rest)) = path.split_first() else {
        return Some(value);
    };
    let child = match step {
        Step::Field(name) => value.as_object_mut()?.get_mut(name)?,
        Step::Key(_) | Step::Value(_) => {
            let items = value.as_array_mut()?;
            let at = items.iter().position(|i| matches_item(i, step))?;
            &mut items[at]
        }
    };
    get_mut(child, rest)
}

fn matches_item(item: &Value, step: &Step) -> bool {
    match step {
        Step::Value(_) => set_item(item) == *step,
        Step::Key(key) => serde_json::from_str::<Map<String, Value>>(key)
            .ok()
            .and_then(|key| key.into_iter().next())
            .is_some_and(|(k, v)| item.get(&k) == Some(&v)),
        Step::Field(_) => false,
    }
}

/// Removes the node at `path`, and then each map or list above it that the removal left
/// empty and that nobody in `owned` holds (the real server leaves no `data: {}` behind).
pub(crate) fn remove(object: &mut Value, path: &Path, owned: &FieldSet) {
    for depth in (1..=path.len()).rev() {
        let (parent, last) = (&path[..depth - 1], &path[depth - 1]);
        if depth < path.len() {
            let node = get_mut(object, &path[..depth]);
            let empty = node.is_some_and(|n| match n {
                Value::Object(m) => m.is_empty(),
                Value::Array(a) => a.is_empty(),
                _ => false,
            });
            let kept = owned.contains(&path[..depth].to_vec());
            if !empty || kept || path[..depth] == [Step::Field("metadata".into())] {
                return;
            }
        }
        match (get_mut(object, parent), last) {
            (Some(Value::Object(map)), Step::Field(name)) => {
                map.remove(name);
            }
            (Some(Value::Array(items)), step) => items.retain(|i| !matches_item(i, step)),
            _ => return,
        }
    }
}
