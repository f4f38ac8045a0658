//! What a new cluster looks like to a controller's tests, the same on both servers: the four
//! namespaces kube-apiserver makes at start, and a custom resource with a status
//! subresource created without a status (whatever the create sent), where a built-in kind
//! starts with an empty one.

use std::time::Duration;

use e2e::{Answer, Backend, both, send};
use serde_json::{Value, json};

const JSON: &str = "application/json";

/// `path`'s object, polled until the server has it (setup, not a verdict: a minute at
/// most).
async fn until_served(backend: &Backend, path: &str) -> Value {
    for _ in 0..600 {
        if let Answer::Object(object) = send(&backend.client(), "GET", path, JSON, "").await {
            return object;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{}: {path} was never served", backend.name());
}

async fn a_new_cluster_has_four_namespaces(backend: Backend) {
    for name in ["default", "kube-node-lease", "kube-public", "kube-system"] {
        // kube-apiserver makes them within moments of starting.
        let namespace = until_served(&backend, &format!("/api/v1/namespaces/{name}")).await;
        assert_eq!(
            namespace["status"]["phase"],
            "Active",
            "{}: {name}",
            backend.name()
        );
    }
}

async fn a_custom_resource_is_created_without_a_status(backend: Backend) {
    let client = backend.client();
    let group = "fresh.e2e.example.com";
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}")},
        "spec": {
            "group": group, "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    });
    let crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    send(&client, "POST", crds, JSON, &crd.to_string())
        .await
        .object();
    let widgets = format!("/apis/{group}/v1/namespaces/default/widgets");
    until_served(&backend, &widgets).await;

    for (name, status) in [
        ("with-status", Some(json!({"phase": "Ready"}))),
        ("plain", None),
    ] {
        let mut widget = json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
            "metadata": {"name": name}, "spec": {"size": 1}});
        if let Some(status) = status {
            widget["status"] = status;
        }
        let created = send(&client, "POST", &widgets, JSON, &widget.to_string())
            .await
            .object();
        assert_eq!(
            created.get("status"),
            None,
            "{}: {name}: {created}",
            backend.name()
        );
        let read = until_served(&backend, &format!("{widgets}/{name}")).await;
        assert_eq!(
            read.get("status"),
            None,
            "{}: {name}: {read}",
            backend.name()
        );
    }

    // A built-in kind with a status subresource starts with an empty status.
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
        "status": {"replicas": 7}});
    let deployments = "/apis/apps/v1/namespaces/default/deployments";
    let created = send(&client, "POST", deployments, JSON, &deployment.to_string())
        .await
        .object();
    assert_eq!(
        created["status"],
        json!({}),
        "{}: {created}",
        backend.name()
    );

    let _ = send(
        &client,
        "DELETE",
        &format!("{crds}/widgets.{group}"),
        JSON,
        "",
    )
    .await;
}

both!(a_new_cluster_has_four_namespaces);
both!(a_custom_resource_is_created_without_a_status);
