//! The defaults kube-apiserver 1.36 writes into the core and apps kinds, taken from what
//! the real server answers (recorded with `kubectl create --dry-run=server -o json`, and held
//! to it by `crates/e2e/tests/defaults.rs`): a pod spec's scheduling and container fields,
//! and the workloads' rollout settings. Each is set only where the object leaves it out, on
//! every write (the real server defaults each body it decodes), so a controller comparing
//! what it wants with what is stored meets the same fields as on a cluster.
//!
//! Services are `services.rs`'s (their defaults need the allocated addresses).
//!
//! Not here: a Job's generated selector and labels, and what admission adds beyond a bare
//! pod's priority and tolerations (a service account, limit ranges).

use serde_json::{Value, json};

use crate::registry::ResourceType;

/// Fills in what the real server defaults in `value`, an object of `ty`; `created`: the
/// object is new (a bare pod then also gets what admission adds at creation).
pub(super) fn default_fields(ty: &ResourceType, value: &mut Value, created: bool) {
    let kind = (ty.gvr.group.as_str(), ty.gvr.resource.as_str());
    if kind == ("", "secrets") {
        secret(value);
        return;
    }
    let Some(spec) = at(value, &["spec"]).filter(|s| s.is_object()) else {
        return;
    };
    match kind {
        ("", "pods") => {
            pod_spec(spec);
            if created {
                admitted_pod(spec);
            }
        }
        ("apps", "deployments") => {
            replicas(spec);
            or(spec, "progressDeadlineSeconds", json!(600));
            or(spec, "revisionHistoryLimit", json!(10));
            if spec["strategy"]["type"].is_null() {
                spec["strategy"]["type"] = json!("RollingUpdate");
            }
            if spec["strategy"]["type"] == "RollingUpdate" {
                let rolling = &mut spec["strategy"]["rollingUpdate"];
                or(rolling, "maxSurge", json!("25%"));
                or(rolling, "maxUnavailable", json!("25%"));
            }
            template(spec);
        }
        ("apps", "statefulsets") => {
            replicas(spec);
            or(spec, "podManagementPolicy", json!("OrderedReady"));
            or(spec, "revisionHistoryLimit", json!(10));
            or(spec, "serviceName", json!(""));
            let retention = &mut spec["persistentVolumeClaimRetentionPolicy"];
            or(retention, "whenDeleted", json!("Retain"));
            or(retention, "whenScaled", json!("Retain"));
            if spec["updateStrategy"]["type"].is_null() {
                spec["updateStrategy"]["type"] = json!("RollingUpdate");
            }
            if spec["updateStrategy"]["type"] == "RollingUpdate" {
                or(
                    &mut spec["updateStrategy"]["rollingUpdate"],
                    "partition",
                    json!(0),
                );
            }
            template(spec);
        }
        ("apps", "daemonsets") => {
            or(spec, "revisionHistoryLimit", json!(10));
            if spec["updateStrategy"]["type"].is_null() {
                spec["updateStrategy"]["type"] = json!("RollingUpdate");
            }
            if spec["updateStrategy"]["type"] == "RollingUpdate" {
                let rolling = &mut spec["updateStrategy"]["rollingUpdate"];
                or(rolling, "maxSurge", json!(0));
                or(rolling, "maxUnavailable", json!(1));
            }
            template(spec);
        }
        ("apps", "replicasets") => {
            replicas(spec);
            template(spec);
        }
        ("", "services") => super::services::defaults(spec),
        _ => {}
    }
}

/// A Secret's `type` (`Opaque`), and its `stringData` written into `data` (base64), as
/// the real server stores it: `stringData` itself is never stored.
fn secret(value: &mut Value) {
    use base64::Engine as _;
    let Some(object) = value.as_object_mut() else {
        return;
    };
    object.entry("type").or_insert(json!("Opaque"));
    if let Some(Value::Object(strings)) = object.remove("stringData") {
        let data = object.entry("data").or_insert(json!({}));
        for (key, text) in strings {
            let text = text.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data[key] = json!(encoded);
        }
    }
}

/// The value at `path` under `value`, if every step is there (indexing a `&mut Value`
/// would insert what is missing).
fn at<'v>(value: &'v mut Value, path: &[&str]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |v, step| v.get_mut(*step))
}

/// Sets `field` of the object `at` to `default` unless it is there (`at` must be an object
/// or null; null becomes an object).
fn or(at: &mut Value, field: &str, default: Value) {
    if at.is_null() {
        *at = json!({});
    }
    if let Some(object) = at.as_object_mut() {
        object.entry(field).or_insert(default);
    }
}

/// `spec.replicas: 1`, shown by the workloads' `scale` subresource.
fn replicas(spec: &mut Value) {
    if spec.is_object() {
        or(spec, "replicas", json!(1));
    }
}

/// A workload's pod template's spec defaults, when it has one.
fn template(spec: &mut Value) {
    if let Some(pod) = at(spec, &["template", "spec"]) {
        pod_spec(pod);
    }
}

/// A pod spec's defaults, in a pod or a workload's template.
fn pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    or(spec, "dnsPolicy", json!("ClusterFirst"));
    or(spec, "restartPolicy", json!("Always"));
    or(spec, "schedulerName", json!("default-scheduler"));
    or(spec, "securityContext", json!({}));
    or(spec, "terminationGracePeriodSeconds", json!(30));
    for list in ["initContainers", "containers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            containers.iter_mut().for_each(container);
        }
    }
    if let Some(volumes) = spec.get_mut("volumes").and_then(Value::as_array_mut) {
        for volume in volumes {
            for source in ["configMap", "secret"] {
                if let Some(source) = volume.get_mut(source).filter(|s| s.is_object()) {
                    or(source, "defaultMode", json!(420));
                }
            }
        }
    }
}

/// A container's defaults.
fn container(container: &mut Value) {
    let pull = match container["image"].as_str() {
        Some(image) if pinned(image) => "IfNotPresent",
        _ => "Always",
    };
    or(container, "imagePullPolicy", json!(pull));
    or(container, "resources", json!({}));
    or(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    or(container, "terminationMessagePolicy", json!("File"));
    if let Some(ports) = container.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports {
            or(port, "protocol", json!("TCP"));
        }
    }
}

/// Whether `image` names a tag other than `latest`, or a digest (pulled if not present);
/// otherwise it is pulled always.
fn pinned(image: &str) -> bool {
    if image.contains('@') {
        return true;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag != "latest",
        None => false,
    }
}

/// What admission adds to a new bare pod: its priority, service links, and the tolerations
/// of not-ready and unreachable nodes (300 s each) unless it tolerates them itself.
fn admitted_pod(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    or(spec, "enableServiceLinks", json!(true));
    or(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    or(spec, "priority", json!(0));
    if spec["tolerations"].is_null() {
        spec["tolerations"] = json!([]);
    }
    let Some(tolerations) = spec["tolerations"].as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            (t["key"] == key || (t["key"].is_null() && t["operator"] == "Exists"))
                && (t["effect"].is_null() || t["effect"] == "NoExecute")
        });
        if !tolerated {
            tolerations.push(json!({"effect": "NoExecute", "key": key,
                "operator": "Exists", "tolerationSeconds": 300}));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pinned;

    #[test]
    fn a_tag_or_digest_pins_an_image_and_latest_does_not() {
        for image in [
            "nginx:1.27",
            "registry:5000/team/app:v2",
            "nginx@sha256:abc",
        ] {
            assert!(pinned(image), "{image}");
        }
        for image in ["nginx", "nginx:latest", "registry:5000/team/app"] {
            assert!(!pinned(image), "{image}");
        }
    }
}
