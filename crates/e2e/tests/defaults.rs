//! The defaults the real server writes into new objects of the core and apps kinds, the same
//! on both servers: a controller that compares the spec it wants with the stored one meets
//! the same fields on the fake as on a cluster. Each expected spec is what kube-apiserver
//! 1.36 answered for the body beside it.

use e2e::{Backend, both, send};
use serde_json::{Value, json};

const JSON: &str = "application/json";

/// A pod template of one container (`image`, with a port) and a ConfigMap volume.
fn template(labels: Value, image: &str) -> Value {
    json!({"metadata": {"labels": labels}, "spec": {
        "containers": [{"name": "main", "image": image, "ports": [{"containerPort": 80}]}],
        "volumes": [{"name": "v", "configMap": {"name": "cm"}}],
    }})
}

/// The defaulted pod spec of [`template`].
fn defaulted_pod_spec(pull: &str, image: &str) -> Value {
    json!({
        "containers": [{"name": "main", "image": image, "imagePullPolicy": pull,
            "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
        "securityContext": {}, "terminationGracePeriodSeconds": 30,
        "volumes": [{"name": "v", "configMap": {"name": "cm", "defaultMode": 420}}],
    })
}

async fn created_spec(backend: &Backend, collection: &str, body: Value) -> Value {
    let created = send(
        &backend.client(),
        "POST",
        collection,
        JSON,
        &body.to_string(),
    )
    .await
    .object();
    created["spec"].clone()
}

async fn new_objects_get_the_real_servers_defaults(backend: Backend) {
    let labels = json!({"app": "web"});
    let selector = json!({"matchLabels": labels});
    let apps = "/apis/apps/v1/namespaces/default";

    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": selector, "template": template(labels.clone(), "nginx")}});
    let spec = created_spec(&backend, &format!("{apps}/deployments"), deployment).await;
    let expected = json!({
        "progressDeadlineSeconds": 600, "replicas": 1, "revisionHistoryLimit": 10,
        "selector": selector,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        "template": {"metadata": {"labels": labels}, "spec": defaulted_pod_spec("Always", "nginx")},
    });
    assert_eq!(spec, expected, "{}: Deployment", backend.name());

    let stateful = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"selector": selector, "template": template(labels.clone(), "postgres:17")}});
    let spec = created_spec(&backend, &format!("{apps}/statefulsets"), stateful).await;
    let expected = json!({
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
        "podManagementPolicy": "OrderedReady", "replicas": 1, "revisionHistoryLimit": 10,
        "selector": selector, "serviceName": "",
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "template": {"metadata": {"labels": labels}, "spec": defaulted_pod_spec("IfNotPresent", "postgres:17")},
    });
    assert_eq!(spec, expected, "{}: StatefulSet", backend.name());

    let daemon = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": selector, "template": template(labels.clone(), "agent:latest")}});
    let spec = created_spec(&backend, &format!("{apps}/daemonsets"), daemon).await;
    let expected = json!({
        "revisionHistoryLimit": 10, "selector": selector,
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
        "template": {"metadata": {"labels": labels}, "spec": defaulted_pod_spec("Always", "agent:latest")},
    });
    assert_eq!(spec, expected, "{}: DaemonSet", backend.name());

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]}});
    let spec = created_spec(&backend, "/api/v1/namespaces/default/pods", pod).await;
    let toleration = |key: &str| json!({"effect": "NoExecute", "key": key, "operator": "Exists", "tolerationSeconds": 300});
    let expected = json!({
        "containers": [{"name": "main", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
            "resources": {}, "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File"}],
        "dnsPolicy": "ClusterFirst", "enableServiceLinks": true,
        "preemptionPolicy": "PreemptLowerPriority", "priority": 0, "restartPolicy": "Always",
        "schedulerName": "default-scheduler", "securityContext": {},
        "terminationGracePeriodSeconds": 30,
        "tolerations": [toleration("node.kubernetes.io/not-ready"), toleration("node.kubernetes.io/unreachable")],
    });
    assert_eq!(spec, expected, "{}: Pod", backend.name());

    // A write that leaves a default out gets it back, without a new generation.
    let deployments = format!("{apps}/deployments/web");
    let patch = json!({"spec": {"revisionHistoryLimit": null}});
    let patched = send(
        &backend.client(),
        "PATCH",
        &deployments,
        "application/merge-patch+json",
        &patch.to_string(),
    )
    .await
    .object();
    assert_eq!(
        patched["spec"]["revisionHistoryLimit"],
        10,
        "{}",
        backend.name()
    );
    assert_eq!(patched["metadata"]["generation"], 1, "{}", backend.name());
}

both!(new_objects_get_the_real_servers_defaults);
