//! Merging one map into another: directives first (`$patch`, `$retainKeys`,
//! `$setElementOrder`), then each key by its type and its field's strategy.

use serde_json::{Map, Value};

use super::{
    BAD_ELEMENT_ORDER, BAD_PRIMITIVE_LIST, BAD_RETAIN_KEYS, DELETE_FROM_LIST, DIRECTIVE,
    ELEMENT_ORDER, RETAIN_KEYS, Schema, StrategicError, bad_arg_type, bad_patch_type,
    directive_target, discard_nulls, kind, list, remove_directives,
};

/// A field's patch strategy, with `retainKeys` split off (it acts through the `$retainKeys`
/// directive the client sends, not here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Strategy {
    Merge,
    Replace,
    Default,
}

pub(super) fn strategy(declared: Option<&str>) -> Strategy {
    let declared = declared.unwrap_or("");
    match declared
        .split(',')
        .find(|s| !s.is_empty() && *s != "retainKeys")
    {
        Some("merge") => Strategy::Merge,
        Some("replace") => Strategy::Replace,
        _ => Strategy::Default,
    }
}

pub(super) fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Schema,
) -> Result<Map<String, Value>, StrategicError> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                patch.remove(DIRECTIVE);
                Ok(patch)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(bad_patch_type(directive, &Value::Object(patch.clone()))),
        };
    }
    retain_keys(&mut original, &mut patch)?;
    set_element_orders(&mut original, &mut patch, schema)?;

    for (key, value) in patch {
        let (key, delete_list) = if key.starts_with(DELETE_FROM_LIST) {
            let field = directive_target(&key, DELETE_FROM_LIST, BAD_PRIMITIVE_LIST)?;
            (field.to_owned(), true)
        } else {
            (key, false)
        };
        if value.is_null() {
            original.remove(&key);
            continue;
        }
        let Some(current) = original.get_mut(&key) else {
            if !delete_list {
                take_patch_value(&mut original, key, value);
            }
            continue;
        };
        if kind(current) != kind(&value) {
            if !delete_list {
                take_patch_value(&mut original, key, value);
            }
            continue;
        }
        let (below, meta) = schema.field(&key);
        let merged = match (current.take(), value) {
            (Value::Object(current), Value::Object(value)) => {
                if strategy(meta.strategy.as_deref()) == Strategy::Replace {
                    Value::Object(value)
                } else {
                    Value::Object(merge_map(current, value, below)?)
                }
            }
            (Value::Array(current), Value::Array(value)) => {
                if strategy(meta.strategy.as_deref()) == Strategy::Merge || delete_list {
                    let key = meta.key.as_deref().unwrap_or("");
                    Value::Array(list::merge_list(current, value, below, key, delete_list)?)
                } else {
                    Value::Array(value)
                }
            }
            (_, value) => match remove_directives(value) {
                Some(value) => value,
                None => {
                    original.remove(&key);
                    continue;
                }
            },
        };
        original.insert(key, merged);
    }
    Ok(original)
}

/// A key the original lacks, or holds with another type: the patch's value, without its
/// nulls and directives.
fn take_patch_value(original: &mut Map<String, Value>, key: String, mut value: Value) {
    discard_nulls(&mut value);
    match remove_directives(value) {
        Some(value) => original.insert(key, value),
        None => original.remove(&key),
    };
}

/// `$retainKeys`: the map keeps only the keys listed, and the patch may set no others.
fn retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<(), StrategicError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(StrategicError::BadRequest(BAD_RETAIN_KEYS));
    };
    let listed = |key: &str| retain.iter().any(|k| k.as_str() == Some(key));
    let stray = patch.iter().any(|(k, v)| {
        !v.is_null()
            && !k.starts_with(DELETE_FROM_LIST)
            && !k.starts_with(ELEMENT_ORDER)
            && !listed(k)
    });
    if stray {
        return Err(StrategicError::BadRequest(BAD_RETAIN_KEYS));
    }
    original.retain(|k, _| listed(k));
    Ok(())
}

/// Every `$setElementOrder/<list>` directive: the list is merged with its patch list (if any)
/// and ordered by the directive, then the patch order, then the live order.
fn set_element_orders(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Schema,
) -> Result<(), StrategicError> {
    let directives: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(ELEMENT_ORDER))
        .cloned()
        .collect();
    for directive in directives {
        let order = patch.remove(&directive).expect("listed above");
        let Value::Array(order) = order else {
            return Err(bad_arg_type("[]interface {}", &order));
        };
        let field = directive_target(&directive, ELEMENT_ORDER, BAD_ELEMENT_ORDER)?.to_owned();
        let live = match original.get(&field) {
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => return Err(bad_arg_type("[]interface {}", other)),
            None => None,
        };
        let patched = match patch.get(&field) {
            Some(Value::Array(items)) => Some(items.clone()),
            Some(other) => return Err(bad_arg_type("[]interface {}", other)),
            None => None,
        };
        let (below, meta) = schema.field(&field);
        let merge_key = meta.key.as_deref().unwrap_or("");
        list::check_element_order(patched.as_deref().unwrap_or(&[]), &order, merge_key)?;
        let merged = match (&live, &patched) {
            (Some(live), None) => live.clone(),
            (None, Some(patched)) => match remove_directives(Value::Array(patched.clone())) {
                Some(Value::Array(items)) => items,
                _ => continue,
            },
            (Some(live), Some(patched)) => {
                if strategy(meta.strategy.as_deref()) == Strategy::Merge {
                    list::merge_list(live.clone(), patched.clone(), below, merge_key, false)?
                } else {
                    patched.clone()
                }
            }
            (None, None) => continue,
        };
        let live = live.unwrap_or_default();
        let element = list::element_kind(&[&live, patched.as_deref().unwrap_or(&[])])?;
        let (in_order, server_only) = list::partition(merged, &order, merge_key, element)?;
        let ordered =
            list::normalize_order(in_order, server_only, &order, &live, merge_key, element)?;
        original.insert(field.clone(), Value::Array(ordered));
        patch.remove(&field);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retain_keys_is_split_off_the_strategy() {
        assert_eq!(strategy(Some("merge,retainKeys")), Strategy::Merge);
        assert_eq!(strategy(Some("retainKeys")), Strategy::Default);
        assert_eq!(strategy(Some("replace")), Strategy::Replace);
        assert_eq!(strategy(None), Strategy::Default);
    }
}
