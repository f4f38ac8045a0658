//! Merging lists: items of a merging list of objects are matched by their merge key and
//! merged, scalars are united as a set, and the result is ordered as the real server orders
//! it (items named by the patch in the patch's order, the others in the live order,
//! interleaved where the live list relates them; new items go before the remaining live ones).

use serde_json::Value;

use super::{
    DIRECTIVE, Kind, LIST_OF_LISTS, Schema, StrategicError, bad_patch_type, gofmt, kind,
    map::merge_map, no_merge_key,
};

/// Merges `patch` into `live`, a list with the merge strategy (or a
/// `$deleteFromPrimitiveList`, when `delete_list`).
pub(super) fn merge_list(
    live: Vec<Value>,
    patch: Vec<Value>,
    items: Schema,
    merge_key: &str,
    delete_list: bool,
) -> Result<Vec<Value>, StrategicError> {
    if live.is_empty() && patch.is_empty() {
        return Ok(live);
    }
    let element = element_kind(&[&live, &patch])?;
    let (live, patch, merged) = if element == Kind::Map {
        if merge_key.is_empty() {
            return Err(StrategicError::Failed(
                "cannot merge lists without merge key for ".into(),
            ));
        }
        let (live, patch) = apply_special_items(live, patch, merge_key)?;
        let merged = merge_items(live.clone(), &patch, items, merge_key)?;
        (live, patch, merged)
    } else {
        if delete_list {
            return Ok(live.into_iter().filter(|v| !patch.contains(v)).collect());
        }
        let mut merged: Vec<Value> = Vec::with_capacity(live.len() + patch.len());
        for v in live.iter().chain(&patch) {
            if !merged.contains(v) {
                merged.push(v.clone());
            }
        }
        (live, patch, merged)
    };
    let (in_patch, server_only) = partition(merged, &patch, merge_key, element)?;
    normalize_order(in_patch, server_only, &patch, &live, merge_key, element)
}

/// The one element type of the lists (Go's `reflect.Type`): mixed types and lists of lists
/// are refused.
pub(super) fn element_kind(lists: &[&[Value]]) -> Result<Kind, StrategicError> {
    let mut seen = None;
    for item in lists.iter().flat_map(|l| l.iter()) {
        let k = kind(item);
        match seen {
            None if k == Kind::List => return Err(StrategicError::Unprocessable(LIST_OF_LISTS)),
            None => seen = Some(k),
            Some(s) if s != k => {
                return Err(StrategicError::Failed(format!(
                    "list element types are not identical: {}",
                    gofmt::go_lists(lists)
                )));
            }
            Some(_) => {}
        }
    }
    seen.ok_or_else(|| StrategicError::Failed("no elements in any of the given slices".into()))
}

/// `{"$patch": "delete", <key>: v}` removes the live items with that key; `{"$patch":
/// "replace"}` makes the rest of the patch the whole list.
fn apply_special_items(
    mut live: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>), StrategicError> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    for item in patch {
        let Some(directive) = item.get(DIRECTIVE) else {
            plain.push(item);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let Some(value) = item.get(merge_key) else {
                    return Err(no_merge_key(&item, merge_key));
                };
                live.retain(|v| v.get(merge_key) != Some(value));
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(StrategicError::Failed(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            _ => return Err(bad_patch_type(directive, &item)),
        }
    }
    Ok(if replace {
        (plain, Vec::new())
    } else {
        (live, plain)
    })
}

/// Each patch item merged into the first live item with its key, or appended.
fn merge_items(
    mut live: Vec<Value>,
    patch: &[Value],
    items: Schema,
    merge_key: &str,
) -> Result<Vec<Value>, StrategicError> {
    for item in patch {
        let Some(value) = item.get(merge_key) else {
            return Err(no_merge_key(item, merge_key));
        };
        let mut found = None;
        for (i, candidate) in live.iter().enumerate() {
            let Value::Object(candidate) = candidate else {
                return Err(StrategicError::Failed(format!(
                    "value for key {i} is not a map"
                )));
            };
            if candidate.get(merge_key) == Some(value) {
                found = Some(i);
                break;
            }
        }
        match (found, item) {
            (Some(i), Value::Object(patch_item)) => {
                let Value::Object(current) = live[i].take() else {
                    unreachable!("checked above")
                };
                live[i] = Value::Object(merge_map(current, patch_item.clone(), items)?);
            }
            _ => live.push(item.clone()),
        }
    }
    Ok(live)
}

/// Splits `merged` into the items `by` names (by merge key, or by value for scalars) and the
/// others.
pub(super) fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: &str,
    element: Kind,
) -> Result<(Vec<Value>, Vec<Value>), StrategicError> {
    let mut named = Vec::new();
    let mut others = Vec::new();
    for item in merged {
        let present = if merge_key.is_empty() {
            by.contains(&item)
        } else {
            if element == Kind::Map && item.get(merge_key).is_none() {
                return Err(no_merge_key(&item, merge_key));
            }
            let value = item.get(merge_key);
            by.iter().any(|b| b.get(merge_key) == value)
        };
        if present {
            named.push(item);
        } else {
            others.push(item);
        }
    }
    Ok((named, others))
}

/// Checks that the patch list names its items in the `$setElementOrder` list's order.
pub(super) fn check_element_order(
    patch: &[Value],
    order: &[Value],
    merge_key: &str,
) -> Result<(), StrategicError> {
    if patch.is_empty() || order.is_empty() {
        return Ok(());
    }
    let kept: Vec<&Value> = patch
        .iter()
        .filter(|item| merge_key.is_empty() || !is_delete(item))
        .collect();
    let (mut p, mut o) = (0, 0);
    while p < kept.len() && o < order.len() {
        if kept[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        let same = if merge_key.is_empty() {
            kept[p] == &order[o]
        } else {
            let left = kept[p]
                .get(merge_key)
                .ok_or_else(|| no_merge_key(kept[p], merge_key))?;
            let right = order[o]
                .get(merge_key)
                .ok_or_else(|| no_merge_key(&order[o], merge_key))?;
            left == right
        };
        if same {
            p += 1;
        }
        o += 1;
    }
    if p < kept.len() {
        return Err(StrategicError::Failed(format!(
            "The order in patch list:\n{}\n doesn't match $setElementOrder list:\n{}\n",
            gofmt::go_value(&Value::Array(patch.to_vec())),
            gofmt::go_value(&Value::Array(order.to_vec())),
        )));
    }
    Ok(())
}

fn is_delete(item: &Value) -> bool {
    item.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

/// Sorts the named items by `order` and the server-only ones by `live`, then interleaves
/// them: a server-only item goes first only where the live list puts it before the next
/// named item.
pub(super) fn normalize_order(
    named: Vec<Value>,
    server_only: Vec<Value>,
    order: &[Value],
    live: &[Value],
    merge_key: &str,
    element: Kind,
) -> Result<Vec<Value>, StrategicError> {
    let identity = |v: &Value| -> Value {
        if element == Kind::Map {
            v.get(merge_key).cloned().unwrap_or(Value::Null)
        } else {
            v.clone()
        }
    };
    let index = |list: &[Value], v: &Value| {
        let id = identity(v);
        list.iter().position(|item| identity(item) == id)
    };
    let sort = |items: Vec<Value>, by: &[Value]| -> Result<Vec<Value>, StrategicError> {
        let (mut items, deletes) = if element == Kind::Map {
            for item in items.iter().chain(by) {
                if item.get(merge_key).is_none() {
                    return Err(no_merge_key(item, merge_key));
                }
            }
            items.into_iter().partition::<Vec<_>, _>(|i| !is_delete(i))
        } else {
            (items, Vec::new())
        };
        // Insertion sort with Go's comparator (an item missing from `by` moves ahead), so
        // that the order matches the real server's even in that corner.
        for i in 1..items.len() {
            let mut j = i;
            while j > 0 {
                let less = match (index(by, &items[j]), index(by, &items[j - 1])) {
                    (Some(a), Some(b)) => a < b,
                    _ => true,
                };
                if !less {
                    break;
                }
                items.swap(j, j - 1);
                j -= 1;
            }
        }
        items.extend(deletes);
        Ok(items)
    };
    let named = sort(named, order)?;
    let server_only = sort(server_only, live)?;
    let mut out = Vec::with_capacity(named.len() + server_only.len());
    let mut server_only = server_only.into_iter().peekable();
    let mut named = named.into_iter().peekable();
    loop {
        match (server_only.peek(), named.peek()) {
            (Some(left), Some(right)) => {
                let left_first = matches!(
                    (index(live, left), index(live, right)),
                    (Some(l), Some(r)) if l < r
                );
                let next = if left_first {
                    server_only.next()
                } else {
                    named.next()
                };
                out.extend(next);
            }
            (Some(_), None) => out.extend(server_only.next()),
            (None, Some(_)) => out.extend(named.next()),
            (None, None) => break,
        }
    }
    Ok(out)
}
