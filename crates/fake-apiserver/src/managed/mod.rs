//! Managed fields: which manager owns which field, kept in `metadata.managedFields` as the
//! real server keeps it, and server-side apply built on it.
//!
//! - An update (create, PUT, PATCH) gives its manager the fields it added or changed, and
//!   takes them from every other manager; removed fields leave every set.
//! - An apply makes its manager own exactly the fields of the configuration it sent. A field
//!   it applied before and no longer sends is removed from the object, unless another
//!   manager owns it too. Changing a field another manager owns is a 409 conflict naming
//!   both, unless the apply is forced (then the field changes hands).
//!
//! Differences from kube-apiserver, all in what is recorded rather than in who wins: maps
//! that Go always serializes (`spec`, `template`) are recorded as added on create (`".": {}`);
//! a list keyed by several fields (`ports`: `containerPort` and `protocol`) is keyed by its
//! patch merge key alone; a custom resource's lists are atomic whatever its schema says.

mod merge;
mod path;
#[cfg(test)]
mod tests;
mod walk;

use std::collections::BTreeMap;

use serde_json::{Value, json};

pub(crate) use self::walk::Scope;
use self::{
    merge::{merge, remove},
    path::{FieldSet, Path, dotted, from_fields_v1, to_fields_v1},
    walk::{Node, applied_set, nodes},
};
use crate::status::ApiError;

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    set: FieldSet,
}

impl Entry {
    fn read(value: &Value) -> Option<Self> {
        Some(Self {
            manager: value["manager"].as_str()?.to_owned(),
            operation: value["operation"].as_str()?.to_owned(),
            api_version: value["apiVersion"].as_str().unwrap_or_default().to_owned(),
            time: value["time"].as_str().unwrap_or_default().to_owned(),
            subresource: value["subresource"].as_str().map(str::to_owned),
            set: from_fields_v1(&value["fieldsV1"]),
        })
    }

    fn written(&self) -> Value {
        let mut entry = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(&self.set),
        });
        if let Some(subresource) = &self.subresource {
            entry["subresource"] = json!(subresource);
        }
        entry
    }

    fn is(&self, manager: &str, operation: &str, scope: Scope) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == sub(scope)
    }

    /// How a conflict message names the manager: an updater with the version it wrote.
    fn named(&self) -> String {
        match self.operation.as_str() {
            "Update" => format!("{:?} using {}", self.manager, self.api_version),
            _ => format!("{:?}", self.manager),
        }
    }
}

fn sub(scope: Scope) -> Option<String> {
    (scope == Scope::Status).then(|| "status".to_owned())
}

fn read_entries(object: Option<&Value>) -> Vec<Entry> {
    object
        .and_then(|o| o["metadata"]["managedFields"].as_array())
        .into_iter()
        .flatten()
        .filter_map(Entry::read)
        .collect()
}

/// Stores `entries` in the real server's order (applies first, then by time and manager);
/// an entry that owns nothing is dropped, and no entries leave no `managedFields`.
fn store(object: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.api_version).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.api_version,
        ))
    });
    let Some(meta) = object["metadata"].as_object_mut() else {
        return;
    };
    match entries.is_empty() {
        true => meta.remove("managedFields"),
        false => meta.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::written).collect()),
        ),
    };
}

/// `manager`'s entry for `operation`, made if it has none yet.
fn entry_of<'e>(
    entries: &'e mut Vec<Entry>,
    manager: &str,
    operation: &str,
    api_version: &str,
    scope: Scope,
) -> &'e mut Entry {
    let at = match entries.iter().position(|e| e.is(manager, operation, scope)) {
        Some(at) => at,
        None => {
            entries.push(Entry {
                manager: manager.to_owned(),
                operation: operation.to_owned(),
                api_version: api_version.to_owned(),
                time: String::new(),
                subresource: sub(scope),
                set: FieldSet::new(),
            });
            entries.len() - 1
        }
    };
    &mut entries[at]
}

/// Sets `entry`'s fields, and its time when they changed.
fn claim(entry: &mut Entry, set: FieldSet, api_version: &str, now: &str) {
    if entry.set != set || entry.time.is_empty() {
        entry.time = now.to_owned();
    }
    entry.set = set;
    entry.api_version = api_version.to_owned();
}

/// Records an update by `manager` (create when `previous` is `None`) in `value`'s
/// `managedFields`.
pub(crate) fn record_update(
    value: &mut Value,
    previous: Option<&Value>,
    manager: &str,
    api_version: &str,
    now: &str,
    scope: Scope,
) {
    let old = previous.map(|p| nodes(p, scope)).unwrap_or_default();
    let new = nodes(value, scope);
    let mut touched: FieldSet = old
        .keys()
        .filter(|path| !new.contains_key(*path))
        .cloned()
        .collect();
    let removed = touched.clone();
    for (path, node) in &new {
        let changed = match (old.get(path), node) {
            (None, _) => true,
            (Some(Node::Leaf(before)), Node::Leaf(after)) => before != after,
            (Some(Node::Leaf(_)), _) | (Some(_), Node::Leaf(_)) => true,
            (Some(_), _) => false,
        };
        if changed {
            touched.insert(path.clone());
        }
    }
    let mut entries = read_entries(previous);
    for entry in entries.iter_mut() {
        if !entry.is(manager, "Update", scope) {
            entry.set.retain(|path| !touched.contains(path));
        }
    }
    let mine = entry_of(&mut entries, manager, "Update", api_version, scope);
    let set = mine
        .set
        .union(&touched)
        .filter(|path| !removed.contains(*path))
        .cloned()
        .collect();
    claim(mine, set, api_version, now);
    store(value, entries);
}

/// What a server-side apply asked for.
pub(crate) struct Apply<'a> {
    pub(crate) config: &'a Value,
    pub(crate) manager: &'a str,
    pub(crate) api_version: &'a str,
    pub(crate) force: bool,
    pub(crate) scope: Scope,
}

impl Apply<'_> {
    /// The object after the apply, with its `managedFields`: `config` merged into `live`
    /// (or made from `config` alone on create), the fields this manager gave up removed, and
    /// a 409 for fields it would take from another manager without `force`.
    pub(crate) fn onto(&self, live: Option<&Value>, now: &str) -> Result<Value, ApiError> {
        // The configuration, walked once: what it claims, and (below) its values.
        let config = nodes(self.config, self.scope);
        let applied = applied_set(&config);
        let mut entries = read_entries(live);
        let mut object = live.cloned().unwrap_or_else(|| json!({}));
        if let Some(live) = live {
            let conflicts = self.conflicts(live, &config, &entries);
            if !conflicts.is_empty() && !self.force {
                return Err(conflict_error(&conflicts, &entries));
            }
            for (path, at) in conflicts {
                entries[at].set.remove(&path);
            }
        }
        merge(&mut object, self.config);
        let before = entries
            .iter()
            .find(|e| e.is(self.manager, "Apply", self.scope))
            .map(|e| e.set.clone())
            .unwrap_or_default();
        let others: FieldSet = entries
            .iter()
            .filter(|e| !e.is(self.manager, "Apply", self.scope))
            .flat_map(|e| e.set.iter().cloned())
            .collect();
        let owned: FieldSet = others.union(&applied).cloned().collect();
        // Parents before their fields: a removed item takes its fields with it.
        let mut removed: Vec<&Path> = Vec::new();
        for path in before.difference(&applied) {
            let held_below = others
                .range(path.clone()..)
                .take_while(|p| p.starts_with(path))
                .any(|_| true);
            if !held_below && !removed.iter().any(|r| path.starts_with(r)) {
                remove(&mut object, path, &owned);
                removed.push(path);
            }
        }
        let mine = entry_of(
            &mut entries,
            self.manager,
            "Apply",
            self.api_version,
            self.scope,
        );
        claim(mine, applied, self.api_version, now);
        store(&mut object, entries);
        Ok(object)
    }

    /// The applied leaves whose value would change and that another manager owns, with the
    /// index of that manager's entry.
    fn conflicts(
        &self,
        live: &Value,
        config: &BTreeMap<Path, Node<'_>>,
        entries: &[Entry],
    ) -> Vec<(Path, usize)> {
        let live = nodes(live, self.scope);
        let mut out = Vec::new();
        for (path, node) in config {
            let (Some(Node::Leaf(before)), Node::Leaf(after)) = (live.get(path), node) else {
                continue;
            };
            if before == after {
                continue;
            }
            for (at, entry) in entries.iter().enumerate() {
                if !entry.is(self.manager, "Apply", self.scope) && entry.set.contains(path) {
                    out.push((path.clone(), at));
                }
            }
        }
        out
    }
}

/// The real server's 409 for an apply that would take fields from other managers.
fn conflict_error(conflicts: &[(Path, usize)], entries: &[Entry]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(path, at)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", entries[*at].named()),
                "field": dotted(path),
            })
        })
        .collect();
    let message = match conflicts {
        [(path, at)] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            entries[*at].named(),
            dotted(path)
        ),
        _ => {
            let mut by_manager: Vec<(String, Vec<String>)> = Vec::new();
            for (path, at) in conflicts {
                let name = entries[*at].named();
                match by_manager.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, paths)) => paths.push(dotted(path)),
                    None => by_manager.push((name, vec![dotted(path)])),
                }
            }
            by_manager.sort();
            let groups: Vec<String> = by_manager
                .iter()
                .map(|(name, paths)| format!("conflicts with {name}:\n- {}", paths.join("\n- ")))
                .collect();
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                groups.join("\n")
            )
        }
    };
    ApiError::apply_conflict(message, causes)
}
