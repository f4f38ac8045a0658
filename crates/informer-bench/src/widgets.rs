//! A custom resource as operators define one (`widgets.example.com/v1`): a nested spec
//! with maps, lists and free-form settings (`x-kubernetes-preserve-unknown-fields`), a
//! status with conditions, and the managedFields a controller and its users leave. Served
//! as JSON only, as kube-apiserver serves custom resources (no protobuf).

use std::{borrow::Cow, collections::BTreeMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The custom resource, typed as a kube-rs or kube-informer user types it (what
/// `#[derive(CustomResource)]` generates, written out).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Widget {
    pub(crate) metadata: ObjectMeta,
    pub(crate) spec: WidgetSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) status: Option<WidgetStatus>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WidgetSpec {
    pub(crate) replicas: i32,
    pub(crate) image: String,
    pub(crate) tier: String,
    #[serde(default)]
    pub(crate) resources: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) ports: Vec<WidgetPort>,
    #[serde(default)]
    pub(crate) env: Vec<WidgetEnv>,
    #[serde(default)]
    pub(crate) selector: BTreeMap<String, String>,
    /// Free-form, as a CRD with `x-kubernetes-preserve-unknown-fields` keeps it.
    #[serde(default)]
    pub(crate) settings: Value,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WidgetPort {
    pub(crate) name: String,
    pub(crate) port: i32,
    pub(crate) protocol: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct WidgetEnv {
    pub(crate) name: String,
    pub(crate) value: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WidgetStatus {
    #[serde(default)]
    pub(crate) observed_generation: i64,
    #[serde(default)]
    pub(crate) ready_replicas: i32,
    #[serde(default)]
    pub(crate) conditions: Vec<Condition>,
    #[serde(default)]
    pub(crate) endpoints: Vec<String>,
}

impl kube::Resource for Widget {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Widget".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        "example.com".into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "widgets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Widget `i` at `resource_version`, after `revision` status changes, as kube-apiserver
/// renders a custom resource.
pub(crate) fn widget_bytes(i: usize, resource_version: u64, revision: u64) -> Vec<u8> {
    let time = |minute: u64| format!("2026-11-20T10:{:02}:{:02}Z", minute / 60 % 60, minute % 60);
    let widget = json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {
            "name": format!("widget-{i:06}"),
            "namespace": format!("team-{}", i % 50),
            "uid": format!("3c1e9a7b-5d2f-4a8e-b6c4-{i:012}"),
            "resourceVersion": resource_version.to_string(),
            "generation": 3,
            "creationTimestamp": "2026-11-20T10:00:00Z",
            "labels": {"app.kubernetes.io/name": "widget", "app.kubernetes.io/instance": format!("widget-{}", i % 100), "tier": "backend"},
            "annotations": {"example.com/owner": "team-platform", "example.com/revision": "3"},
            "finalizers": ["example.com/cleanup"],
            "managedFields": [
                {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "example.com/v1", "time": "2026-11-20T10:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:example.com/owner": {}}, "f:labels": {".": {}, "f:app.kubernetes.io/instance": {}, "f:app.kubernetes.io/name": {}, "f:tier": {}}},
                              "f:spec": {".": {}, "f:env": {}, "f:image": {}, "f:ports": {}, "f:replicas": {}, "f:resources": {".": {}, "f:cpu": {}, "f:memory": {}}, "f:selector": {}, "f:settings": {}, "f:tier": {}}}},
                {"manager": "widget-operator", "operation": "Update", "apiVersion": "example.com/v1", "time": time(revision), "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {".": {}, "f:conditions": {}, "f:endpoints": {}, "f:observedGeneration": {}, "f:readyReplicas": {}}}}
            ]
        },
        "spec": {
            "replicas": 3,
            "image": "registry.example.com/widget:4.2.0",
            "tier": "backend",
            "resources": {"cpu": "500m", "memory": "512Mi"},
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "metrics", "port": 9090, "protocol": "TCP"}],
            "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "REGION", "value": "eu-west-1"}, {"name": "SHARD", "value": (i % 16).to_string()}],
            "selector": {"app.kubernetes.io/name": "widget", "app.kubernetes.io/instance": format!("widget-{}", i % 100)},
            "settings": {"cache": {"size": "256Mi", "ttlSeconds": 300}, "features": ["fast-path", "audit"], "retries": 5}
        },
        "status": {
            "observedGeneration": 3,
            "readyReplicas": 3,
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "AllReplicasReady", "message": "3 of 3 replicas ready", "lastTransitionTime": time(revision), "observedGeneration": 3},
                {"type": "Progressing", "status": "False", "reason": "Stable", "message": "", "lastTransitionTime": "2026-11-20T10:00:05Z", "observedGeneration": 3}
            ],
            "endpoints": [format!("10.{}.{}.1:8080", i % 250, i / 250 % 250), format!("10.{}.{}.2:8080", i % 250, i / 250 % 250)],
        }
    });
    serde_json::to_vec(&widget).expect("a Value renders")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendered_widget_reads_back_typed() {
        let widget: Widget = serde_json::from_slice(&widget_bytes(7, 42, 2)).unwrap();
        assert_eq!(widget.metadata.name.as_deref(), Some("widget-000007"));
        assert_eq!(widget.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(widget.spec.ports.len(), 2);
        assert_eq!(widget.spec.settings["retries"], 5);
        let status = widget.status.unwrap();
        assert_eq!(
            status.conditions[0].last_transition_time.0.to_string(),
            "2026-11-20T10:00:02Z"
        );
    }
}
