//! Whether a cache's selectors admit a written object: a write its cache will never show
//! (created outside the cache's label selector, say) is not waited for by its version, and
//! a write that took an object out of the selection is waited for by its removal.

use std::collections::BTreeMap;

use kube_informer::Selectors;

use super::written::Written;

/// A cache's selection, parsed once. `None` in a part: a selector this side cannot
/// evaluate (then the write is waited for by its version, as for a match).
#[derive(Debug)]
pub(super) struct Selection {
    /// Empty: every namespace (or a cluster-scoped kind).
    namespaces: Vec<String>,
    labels: Option<Vec<Label>>,
    fields: Option<Vec<Field>>,
}

#[derive(Debug, PartialEq)]
enum Label {
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

#[derive(Debug, PartialEq)]
struct Field {
    path: String,
    value: String,
    equal: bool,
}

impl Selection {
    /// The selection of a cache listing and watching `selectors` (resolved: the factory's
    /// defaults applied) of a kind in namespaces (`namespaced`) or not.
    pub(super) fn new(selectors: &Selectors, namespaced: bool) -> Self {
        let namespaces = match namespaced {
            true => selectors.namespaces().unwrap_or_default().to_vec(),
            false => Vec::new(),
        };
        Self {
            namespaces,
            labels: selectors.label_selector().map_or(Some(Vec::new()), labels),
            fields: selectors.field_selector().map_or(Some(Vec::new()), fields),
        }
    }

    /// Whether the cache lists `written`'s object as written; `None` if it cannot tell.
    pub(super) fn admits(&self, written: &Written) -> Option<bool> {
        if let Some(ns) = &written.namespace
            && !self.namespaces.is_empty()
            && !self.namespaces.contains(ns)
        {
            return Some(false);
        }
        let labels = self.labels.as_ref()?;
        if !labels.iter().all(|l| l.matches(&written.labels)) {
            return Some(false);
        }
        let mut known = true;
        for field in self.fields.as_ref()? {
            match written.field(&field.path) {
                Some(value) if (value == field.value) != field.equal => return Some(false),
                Some(_) => {}
                None => known = false,
            }
        }
        known.then_some(true)
    }
}

impl Label {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Exists(key) => labels.contains_key(key),
            Self::Absent(key) => !labels.contains_key(key),
            Self::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            Self::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
        }
    }
}

/// Splits `selector` at the commas outside parentheses.
fn requirements(selector: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&selector[start..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect()
}

/// A label selector as the API server takes it (`a=b,c!=d,e in (f,g),!h`).
fn labels(selector: &str) -> Option<Vec<Label>> {
    requirements(selector).into_iter().map(label).collect()
}

fn label(requirement: &str) -> Option<Label> {
    let set = |rest: &str| -> Option<Vec<String>> {
        let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
        Some(inner.split(',').map(|v| v.trim().to_owned()).collect())
    };
    if let Some(key) = requirement.strip_prefix('!') {
        return Some(Label::Absent(key.trim().to_owned()));
    }
    if let Some((key, value)) = requirement.split_once("!=") {
        return Some(Label::NotIn(
            key.trim().to_owned(),
            vec![value.trim().to_owned()],
        ));
    }
    if let Some((key, value)) = requirement.split_once('=') {
        let value = value.strip_prefix('=').unwrap_or(value);
        return Some(Label::In(
            key.trim().to_owned(),
            vec![value.trim().to_owned()],
        ));
    }
    if let Some((key, rest)) = requirement.split_once(" notin ") {
        return Some(Label::NotIn(key.trim().to_owned(), set(rest)?));
    }
    if let Some((key, rest)) = requirement.split_once(" in ") {
        return Some(Label::In(key.trim().to_owned(), set(rest)?));
    }
    let key = requirement.trim();
    (!key.contains([' ', '(', ')', '<', '>'])).then(|| Label::Exists(key.to_owned()))
}

/// A field selector (`metadata.name=web,status.phase!=Failed`); `None` for one with
/// escapes (`\,`), which this side does not read.
fn fields(selector: &str) -> Option<Vec<Field>> {
    if selector.contains('\\') {
        return None;
    }
    requirements(selector)
        .into_iter()
        .map(|requirement| {
            let (path, value, equal) = match requirement.split_once("!=") {
                Some((path, value)) => (path, value, false),
                None => {
                    let (path, value) = requirement.split_once('=')?;
                    (path, value.strip_prefix('=').unwrap_or(value), true)
                }
            };
            Some(Field {
                path: path.trim().to_owned(),
                value: value.trim().to_owned(),
                equal,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::{any::TypeId, sync::Arc};

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;

    use super::*;
    use crate::controller::own_writes::written::AsWritten;

    fn written(labels: &[(&str, &str)], json: serde_json::Value) -> Written {
        let meta = ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            resource_version: Some("7".into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        };
        let mut w = Written::new(&meta, None, TypeId::of::<()>(), false).unwrap();
        w.object = Some(AsWritten::Json(Arc::new(json)));
        w
    }

    fn admits(selectors: Selectors, w: &Written) -> Option<bool> {
        Selection::new(&selectors, true).admits(w)
    }

    #[test]
    fn label_selectors_are_evaluated_as_the_api_server_does() {
        let w = written(&[("app", "web"), ("tier", "front")], json!({}));
        let yes = [
            "app=web",
            "app==web,tier=front",
            "app in (web, db)",
            "tier notin (db)",
            "app",
            "!owner",
            "owner!=x",
        ];
        for selector in yes {
            assert_eq!(
                admits(Selectors::default().labels(selector), &w),
                Some(true),
                "{selector}"
            );
        }
        let no = [
            "app=db",
            "app notin (web)",
            "!app",
            "owner",
            "tier in (db,cache)",
        ];
        for selector in no {
            assert_eq!(
                admits(Selectors::default().labels(selector), &w),
                Some(false),
                "{selector}"
            );
        }
        let odd = Selectors::default().labels("app in web");
        assert_eq!(admits(odd, &w), None, "cannot tell: waited for as before");
    }

    #[test]
    fn field_selectors_read_the_written_object_and_namespaces_bound_the_cache() {
        let w = written(&[], json!({"type": "Opaque", "spec": {"nodeName": "n1"}}));
        let fields = |f: &str| Selectors::default().fields(f);
        assert_eq!(
            admits(fields("type=Opaque,metadata.name=web"), &w),
            Some(true)
        );
        assert_eq!(admits(fields("spec.nodeName!=n1"), &w), Some(false));
        assert_eq!(admits(fields("spec.nodeName="), &w), Some(false));
        let unset = admits(fields("status.phase="), &w);
        assert_eq!(
            unset, None,
            "unset: as the server defaults it, not known here"
        );
        let escaped = admits(fields(r"type=a\,b"), &w);
        assert_eq!(escaped, None, "escapes: not read here");
        let elsewhere = Selectors::default().in_namespace("other");
        assert_eq!(admits(elsewhere, &w), Some(false));
        // Recorded without its fields (by `wrote`): only metadata is known.
        let mut typed = w.clone();
        typed.object = None;
        assert_eq!(
            admits(fields("metadata.namespace=shop"), &typed),
            Some(true)
        );
        assert_eq!(admits(fields("type=Opaque"), &typed), None);
    }
}
