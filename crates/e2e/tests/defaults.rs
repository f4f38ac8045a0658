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

/// The spec with the allocated addresses taken out, after checking their shape: a cluster
/// IP in kube-apiserver's default range (10.0.0.0/24) and node ports in 30000–32767.
fn allocated(mut spec: Value, name: &str) -> Value {
    let ip = spec["clusterIP"].as_str().unwrap_or_default().to_owned();
    if ip != "None" && !ip.is_empty() {
        let last: u8 = ip
            .strip_prefix("10.0.0.")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{name}: {ip} is outside 10.0.0.0/24"));
        assert!(last > 1, "{name}: {ip}");
        assert_eq!(spec["clusterIPs"], json!([ip]), "{name}");
        spec["clusterIP"] = json!("<allocated>");
        spec["clusterIPs"] = json!(["<allocated>"]);
    }
    for port in spec["ports"].as_array_mut().into_iter().flatten() {
        if let Some(node_port) = port.get("nodePort").and_then(Value::as_u64) {
            assert!((30000..=32767).contains(&node_port), "{name}: {node_port}");
            port["nodePort"] = json!("<allocated>");
        }
    }
    spec
}

async fn services_and_secrets_get_the_real_servers_defaults(backend: Backend) {
    let name = backend.name();
    let services = "/api/v1/namespaces/default/services";
    let client = backend.client();
    let create = |body: Value| {
        let client = client.clone();
        async move {
            send(&client, "POST", services, JSON, &body.to_string())
                .await
                .object()
        }
    };
    let plain = create(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s1"},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}),
    )
    .await;
    assert_eq!(plain["status"], json!({"loadBalancer": {}}), "{name}");
    assert_eq!(plain["metadata"].get("generation"), None, "{name}");
    let family = json!({"ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "internalTrafficPolicy": "Cluster"});
    let mut expected = json!({"ports": [{"protocol": "TCP", "port": 80, "targetPort": 80}],
        "selector": {"app": "x"}, "clusterIP": "<allocated>", "clusterIPs": ["<allocated>"],
        "type": "ClusterIP", "sessionAffinity": "None"});
    expected
        .as_object_mut()
        .unwrap()
        .extend(family.as_object().unwrap().clone());
    assert_eq!(
        allocated(plain["spec"].clone(), name),
        expected,
        "{name}: ClusterIP"
    );

    let node_port = create(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s2"},
        "spec": {"type": "NodePort", "selector": {"app": "x"},
                 "ports": [{"port": 80, "targetPort": "http", "name": "web"}, {"port": 53, "protocol": "UDP", "name": "dns"}]}}))
    .await;
    let mut expected = json!({"ports": [
            {"name": "web", "protocol": "TCP", "port": 80, "targetPort": "http", "nodePort": "<allocated>"},
            {"name": "dns", "protocol": "UDP", "port": 53, "targetPort": 53, "nodePort": "<allocated>"}],
        "selector": {"app": "x"}, "clusterIP": "<allocated>", "clusterIPs": ["<allocated>"],
        "type": "NodePort", "sessionAffinity": "None", "externalTrafficPolicy": "Cluster"});
    expected
        .as_object_mut()
        .unwrap()
        .extend(family.as_object().unwrap().clone());
    assert_eq!(
        allocated(node_port["spec"].clone(), name),
        expected,
        "{name}: NodePort"
    );
    assert_ne!(
        node_port["spec"]["clusterIP"], plain["spec"]["clusterIP"],
        "{name}: one IP per Service"
    );

    let headless = create(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "h1"},
        "spec": {"clusterIP": "None", "selector": {"app": "x"}, "ports": [{"port": 80}]}}),
    )
    .await;
    assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]), "{name}");
    let external = create(
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "e1"},
        "spec": {"type": "ExternalName", "externalName": "example.com"}}),
    )
    .await;
    assert_eq!(
        external["spec"],
        json!({"type": "ExternalName", "sessionAffinity": "None", "externalName": "example.com"}),
        "{name}: ExternalName"
    );

    // A replace that leaves the allocated addresses out keeps them.
    let mut replaced = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s2"},
        "spec": {"type": "NodePort", "selector": {"app": "y"},
                 "ports": [{"port": 80, "targetPort": "http", "name": "web"}, {"port": 53, "protocol": "UDP", "name": "dns"}]}});
    replaced["metadata"]["resourceVersion"] = node_port["metadata"]["resourceVersion"].clone();
    let kept = send(
        &client,
        "PUT",
        &format!("{services}/s2"),
        JSON,
        &replaced.to_string(),
    )
    .await
    .object();
    assert_eq!(
        kept["spec"]["clusterIP"], node_port["spec"]["clusterIP"],
        "{name}"
    );
    assert_eq!(kept["spec"]["ports"], node_port["spec"]["ports"], "{name}");
    assert_eq!(kept["spec"]["selector"], json!({"app": "y"}), "{name}");

    let secret = send(&client, "POST", "/api/v1/namespaces/default/secrets", JSON,
        &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x1"}, "stringData": {"a": "b"}}).to_string())
    .await
    .object();
    assert_eq!(secret["type"], "Opaque", "{name}");
    assert_eq!(secret["data"], json!({"a": "Yg=="}), "{name}");
    assert_eq!(secret.get("stringData"), None, "{name}");
}

both!(services_and_secrets_get_the_real_servers_defaults);
