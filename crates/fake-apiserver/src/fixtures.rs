//! Realistic objects for benchmarks and tests.

use serde_json::{Value, json};

/// Pod number `i`, shaped like a real one (~4.1 KB of JSON once the server has added its
/// managedFields): in namespace `team-{i % 50}`, on node `node-{i % 200}`. Names are
/// `web-{i:06}-7d9c5b8f6-x2k4p`.
///
/// A pod shaped like a real one: labels, annotations, two containers with env, resources,
/// ports, probes and mounts, and a status; the server adds managedFields.
pub fn realistic_pod(i: usize) -> Value {
    let container = |name: &str, image: &str| {
        json!({
            "name": name,
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "LOG_LEVEL", "value": "info"}, {"name": "REGION", "value": "eu-west-1"}],
            "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "periodSeconds": 10, "timeoutSeconds": 1},
            "volumeMounts": [{"name": "config", "mountPath": "/etc/app"}, {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File"
        })
    };
    json!({
        "metadata": {
            "name": format!("web-{i:06}-7d9c5b8f6-x2k4p"),
            "namespace": format!("team-{}", i % 50),
            "labels": {"app": "web", "pod-template-hash": "7d9c5b8f6", "tier": "frontend", "version": "v2"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z", "prometheus.io/scrape": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9c5b8f6", "uid": "6f7d9a4e-1c2b-4e8f-9a3d-5b6c7d8e9f01", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "containers": [container("web", "registry.example.com/web:2.4.1"), container("sidecar", "registry.example.com/proxy:1.9.0")],
            "volumes": [{"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}}],
            "nodeName": format!("node-{}", i % 200),
            "serviceAccountName": "web",
            "restartPolicy": "Always",
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {
            "phase": "Running",
            "podIP": format!("10.{}.{}.{}", i % 250, (i / 250) % 250, i % 200),
            "hostIP": "192.168.1.10",
            "qosClass": "Burstable",
            "startTime": "2026-11-20T10:00:05Z",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-20T10:00:05Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-20T10:00:09Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-20T10:00:09Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-20T10:00:05Z"}
            ],
            "containerStatuses": [
                {"name": "web", "ready": true, "restartCount": 0, "image": "registry.example.com/web:2.4.1", "imageID": "registry.example.com/web@sha256:4f1c2d3e", "containerID": "containerd://8a7b6c5d4e3f", "started": true, "state": {"running": {"startedAt": "2026-11-20T10:00:07Z"}}},
                {"name": "sidecar", "ready": true, "restartCount": 0, "image": "registry.example.com/proxy:1.9.0", "imageID": "registry.example.com/proxy@sha256:9e8d7c6b", "containerID": "containerd://1f2e3d4c5b6a", "started": true, "state": {"running": {"startedAt": "2026-11-20T10:00:08Z"}}}
            ]
        }
    })
}
