//! [`Meta`]: what the server reads from an object's metadata, once, when it is stored:
//! what routing, selectors and validation need without parsing the object again; and
//! [`ObjKey`], where an object lives.

use std::collections::BTreeMap;

use serde_json::Value;

/// Where an object lives: namespace (`""` when cluster-scoped) and name. Ordered as etcd
/// orders keys, which is the order of LIST results.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ObjKey {
    pub(crate) namespace: String,
    pub(crate) name: String,
}

impl ObjKey {
    pub(crate) fn new(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.unwrap_or("").to_owned(),
            name: name.to_owned(),
        }
    }

    /// The text used in continue tokens: `namespace/name` or `name`.
    pub(crate) fn to_token(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }

    pub(crate) fn from_token(token: &str) -> Self {
        match token.split_once('/') {
            Some((ns, name)) => Self::new(Some(ns), name),
            None => Self::new(None, token),
        }
    }
}

/// What the server reads from an object's metadata.
#[derive(Clone, Debug, Default)]
pub(crate) struct Meta {
    pub(crate) name: String,
    pub(crate) namespace: Option<String>,
    pub(crate) uid: String,
    pub(crate) labels: BTreeMap<String, String>,
    /// Selectable fields beyond name and namespace (e.g. a pod's `spec.nodeName`).
    pub(crate) fields: Vec<(&'static str, String)>,
    pub(crate) has_finalizers: bool,
    pub(crate) deleting: bool,
}

impl Meta {
    pub(crate) fn from_value(value: &Value) -> Self {
        let meta = &value["metadata"];
        let text = |v: &Value| v.as_str().map(str::to_owned);
        let labels = meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let mut fields = Vec::new();
        if let Some(node) = value["spec"]["nodeName"].as_str() {
            fields.push(("spec.nodeName", node.to_owned()));
        }
        if let Some(phase) = value["status"]["phase"].as_str() {
            fields.push(("status.phase", phase.to_owned()));
        }
        Self {
            name: text(&meta["name"]).unwrap_or_default(),
            namespace: text(&meta["namespace"]).filter(|ns| !ns.is_empty()),
            uid: text(&meta["uid"]).unwrap_or_default(),
            labels,
            fields,
            has_finalizers: meta["finalizers"].as_array().is_some_and(|f| !f.is_empty()),
            deleting: meta["deletionTimestamp"].is_string(),
        }
    }

    pub(crate) fn key(&self) -> ObjKey {
        ObjKey::new(self.namespace.as_deref(), &self.name)
    }

    /// The value of a selectable field, or `None` if the field is not supported.
    pub(crate) fn field(&self, path: &str) -> Option<&str> {
        match path {
            "metadata.name" => Some(&self.name),
            "metadata.namespace" => Some(self.namespace.as_deref().unwrap_or("")),
            _ => self
                .fields
                .iter()
                .find(|(p, _)| *p == path)
                .map(|(_, v)| v.as_str())
                .or(match path {
                    // Supported for pods even when unset.
                    "spec.nodeName" | "status.phase" => Some(""),
                    _ => None,
                }),
        }
    }
}
