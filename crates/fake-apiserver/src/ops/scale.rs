//! The `scale` subresource (`autoscaling/v1` `Scale`) of Deployments, ReplicaSets and
//! StatefulSets, as `kubectl scale` and autoscalers use it: a view of the parent's
//! `spec.replicas`, `status.replicas` and label selector, written back into the parent.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Part;
use crate::{Inner, registry::ResourceType, status::ApiError};

impl Inner {
    /// The Scale of an object.
    pub(crate) fn scale(
        &self,
        ty: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let object = self.get(&ty.gvr, namespace, name)?;
        Ok(to_scale(&object.value(&ty.kind, &ty.gvr.api_version())))
    }

    /// Writes the Scale `change` makes of the current one into the parent's
    /// `spec.replicas` (a `resourceVersion` in it is a precondition, as on the parent), and
    /// answers with the new Scale.
    pub(crate) fn rescale(
        self: &Arc<Self>,
        ty: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        manager: &str,
        change: impl FnOnce(Value) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        let object = self.write_existing(
            &ty.gvr,
            namespace,
            name,
            super::Writer::Update(manager),
            Part::Object,
            |mut parent| {
                let scale = change(to_scale(&parent))?;
                parent["spec"]["replicas"] = json!(replicas(&scale, name)?);
                if let Some(rv) = scale["metadata"].get("resourceVersion") {
                    parent["metadata"]["resourceVersion"] = rv.clone();
                }
                Ok(parent)
            },
        )?;
        Ok(to_scale(&object.value(&ty.kind, &ty.gvr.api_version())))
    }
}

/// `spec.replicas` of a Scale, checked as the real server checks it (0 when absent).
fn replicas(scale: &Value, name: &str) -> Result<i64, ApiError> {
    let replicas = match &scale["spec"]["replicas"] {
        Value::Null => 0,
        value => value.as_i64().ok_or_else(|| {
            ApiError::bad_request(format!("spec.replicas must be an integer, not {value}"))
        })?,
    };
    if replicas < 0 {
        let detail = format!("Invalid value: {replicas}: must be greater than or equal to 0");
        let mut error = ApiError::invalid(
            "Scale.autoscaling",
            name,
            "spec.replicas",
            "FieldValueInvalid",
            &detail,
        );
        error.body["details"]["kind"] = json!("Scale");
        error.body["details"]["group"] = json!("autoscaling");
        return Err(error);
    }
    Ok(replicas)
}

/// The Scale the real server shows for `object`: its identity, desired and current replicas,
/// and its selector as a string.
pub(crate) fn to_scale(object: &Value) -> Value {
    let meta = &object["metadata"];
    let mut metadata = serde_json::Map::new();
    for key in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = meta.get(key) {
            metadata.insert(key.into(), v.clone());
        }
    }
    let mut spec = json!({});
    if let Some(n) = object["spec"]["replicas"].as_i64().filter(|n| *n != 0) {
        spec["replicas"] = json!(n);
    }
    let mut status = json!({"replicas": object["status"]["replicas"].as_i64().unwrap_or(0)});
    let selector = selector_string(&object["spec"]["selector"]);
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": metadata, "spec": spec, "status": status})
}

/// A `LabelSelector` as the label-selector string the real server prints (`app=web,tier in
/// (a,b)`): requirements sorted by key, values sorted.
pub(crate) fn selector_string(selector: &Value) -> String {
    let mut requirements: Vec<(String, String)> = Vec::new();
    for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
        let value = value.as_str().unwrap_or_default();
        requirements.push((key.clone(), format!("{key}={value}")));
    }
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let mut values: Vec<&str> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        values.sort_unstable();
        let values = values.join(",");
        let text = match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_owned(),
            "DoesNotExist" => format!("!{key}"),
            _ => continue,
        };
        requirements.push((key.to_owned(), text));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    requirements
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_print_as_the_real_server_prints_them() {
        let selector = json!({
            "matchLabels": {"tier": "web", "app": "shop"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                {"key": "zone", "operator": "DoesNotExist"},
                {"key": "canary", "operator": "Exists"},
                {"key": "gpu", "operator": "NotIn", "values": ["b", "a"]},
            ],
        });
        assert_eq!(
            selector_string(&selector),
            "app=shop,canary,env in (dev,prod),gpu notin (a,b),tier=web,!zone"
        );
        assert_eq!(selector_string(&Value::Null), "");
    }

    #[test]
    fn a_scale_of_zero_has_an_empty_spec() {
        let scale = to_scale(&json!({"metadata": {"name": "w"}, "spec": {"replicas": 0}}));
        assert_eq!(scale["spec"], json!({}));
        assert_eq!(scale["status"], json!({"replicas": 0}));
        assert_eq!(scale["metadata"], json!({"name": "w"}));
    }
}
