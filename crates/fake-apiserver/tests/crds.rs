//! CustomResourceDefinitions written through the API: a CRD's changes follow through to what
//! it serves (a version no longer served goes, a new subresource applies), a CRD never
//! takes over a resource a built-in kind serves, and its `/status` is written as the real
//! server's (the spec kept from storage). The whole life of a CRD through kubectl, on both
//! servers, is `crates/e2e/tests/kubectl.rs`.

use crate::common;

use common::{call, get, server};
use fake_apiserver::ServerConfig;
use hyper::Method;
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

fn crd(group: &str, plural: &str, kind: &str, versions: Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": format!("{plural}.{group}")},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": plural, "kind": kind}, "versions": versions}})
}

#[tokio::test]
async fn a_crd_s_changes_follow_through_to_what_it_serves() {
    let server = server(ServerConfig::default()).await;
    let versions = json!([{"name": "v1", "served": true, "storage": true},
                          {"name": "v1beta1", "served": true, "storage": false}]);
    let created = call(
        &server,
        Method::POST,
        CRDS,
        Some(&crd("example.com", "widgets", "Widget", versions)),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.json());
    let widgets = "/apis/example.com/v1/namespaces/demo/widgets";
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}, "status": {"ready": false}});
    assert_eq!(
        call(&server, Method::POST, widgets, Some(&widget))
            .await
            .status,
        201
    );
    assert_eq!(
        get(&server, "/apis/example.com/v1beta1/namespaces/demo/widgets")
            .await
            .status,
        200
    );

    // v1beta1 no longer served, v1 given a status subresource.
    let mut changed = get(&server, &format!("{CRDS}/widgets.example.com"))
        .await
        .json();
    changed["spec"]["versions"] = json!([
        {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
        {"name": "v1beta1", "served": false, "storage": false}]);
    let updated = call(
        &server,
        Method::PUT,
        &format!("{CRDS}/widgets.example.com"),
        Some(&changed),
    )
    .await;
    assert_eq!(updated.status, 200, "{}", updated.json());
    assert_eq!(
        get(&server, "/apis/example.com/v1beta1/namespaces/demo/widgets")
            .await
            .status,
        404
    );
    // The object stayed; a write to it now keeps its status (the subresource rule).
    let mut w = get(&server, &format!("{widgets}/w")).await.json();
    w["status"] = json!({"ready": true});
    w["spec"] = json!({"size": 2});
    let written = call(&server, Method::PUT, &format!("{widgets}/w"), Some(&w))
        .await
        .json();
    assert_eq!(written["spec"]["size"], 2);
    assert_eq!(written["status"], json!({"ready": false}), "{written}");
    let discovery = get(&server, "/apis/example.com/v1").await.json();
    let names: Vec<&str> = discovery["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["widgets", "widgets/status"]);

    // The CRD's status is written with its spec kept from storage, as the real server does.
    let status = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                        "metadata": {"name": "widgets.example.com"}, "status": {"storedVersions": ["v1"]}});
    let put = call(
        &server,
        Method::PUT,
        &format!("{CRDS}/widgets.example.com/status"),
        Some(&status),
    )
    .await;
    assert_eq!(put.status, 200, "{}", put.json());
    assert_eq!(put.json()["spec"]["group"], "example.com");
}

#[tokio::test]
async fn a_crd_never_takes_over_a_built_in_kind() {
    let server = server(ServerConfig::default()).await;
    let deployments = "/apis/apps/v1/namespaces/demo/deployments";
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}}}});
    assert_eq!(
        call(&server, Method::POST, deployments, Some(&deployment))
            .await
            .status,
        201
    );
    let shadow = crd(
        "apps",
        "deployments",
        "Deployment",
        json!([{"name": "v1", "served": true, "storage": true}]),
    );
    assert_eq!(
        call(&server, Method::POST, CRDS, Some(&shadow))
            .await
            .status,
        201
    );
    let deleted = call(
        &server,
        Method::DELETE,
        &format!("{CRDS}/deployments.apps"),
        None,
    )
    .await;
    assert_eq!(deleted.status, 200, "{}", deleted.json());
    // The built-in kind, and its object, are untouched.
    assert_eq!(
        get(&server, &format!("{deployments}/web")).await.status,
        200
    );
    // So is the CRD kind itself, by a CRD of the same name.
    let of_crds = crd(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        json!([{"name": "v1", "served": true, "storage": true}]),
    );
    assert_eq!(
        call(&server, Method::POST, CRDS, Some(&of_crds))
            .await
            .status,
        201
    );
    let name = "customresourcedefinitions.apiextensions.k8s.io";
    assert_eq!(
        call(&server, Method::DELETE, &format!("{CRDS}/{name}"), None)
            .await
            .status,
        200
    );
    assert_eq!(get(&server, CRDS).await.status, 200);
}
