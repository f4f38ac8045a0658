//! What a DELETE does to an object that stays (finalizers, a grace period): like the real
//! server (k8s.io/apiserver's `markAsDeleting` and `rest.BeforeDelete`), setting
//! `deletionTimestamp` the first time bumps a `generation` that is `> 0`, and only then.

use crate::common;

use common::{call, call_with, cm, get, server};
use fake_apiserver::ServerConfig;
use hyper::Method;
use serde_json::{Value, json};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/demo/deployments";
const CMS: &str = "/api/v1/namespaces/demo/configmaps";

fn deployment(name: &str, namespace: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": name, "namespace": namespace, "finalizers": ["example.com/hold"]},
           "spec": {"selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
}

async fn release(server: &fake_apiserver::FakeApiServer, uri: &str) {
    let merge = "application/merge-patch+json";
    let released = call_with(
        server,
        Method::PATCH,
        uri,
        merge,
        Some(&json!({"metadata": {"finalizers": null}})),
    )
    .await;
    assert_eq!(released.status, 200);
    assert_eq!(get(server, uri).await.status, 404, "released: gone");
}

#[tokio::test]
async fn a_finalizer_held_delete_bumps_the_generation_once() {
    let server = server(ServerConfig::default()).await;
    let created = call(
        &server,
        Method::POST,
        DEPLOYMENTS,
        Some(&deployment("held", "demo")),
    )
    .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.json()["metadata"]["generation"], 1);

    let uri = format!("{DEPLOYMENTS}/held");
    let deleting = call(&server, Method::DELETE, &uri, None).await;
    assert_eq!(deleting.status, 200);
    let deleting = deleting.json();
    assert_eq!(deleting["kind"], "Deployment");
    assert!(deleting["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(deleting["metadata"]["generation"], 2);
    assert_eq!(get(&server, &uri).await.json(), deleting);

    // Already terminating: a second DELETE changes nothing, generation included.
    let again = call(&server, Method::DELETE, &uri, None).await;
    assert_eq!(again.status, 200);
    let again = again.json();
    assert_eq!(again["metadata"]["generation"], 2);
    assert_eq!(
        again["metadata"]["resourceVersion"],
        deleting["metadata"]["resourceVersion"]
    );
    assert_eq!(
        again["metadata"]["deletionTimestamp"],
        deleting["metadata"]["deletionTimestamp"]
    );

    release(&server, &uri).await;
}

#[tokio::test]
async fn an_object_without_a_generation_gets_none_when_deleted() {
    let server = server(ServerConfig::default()).await;
    let mut held = cm("held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let created = call(&server, Method::POST, CMS, Some(&held)).await.json();
    assert!(created["metadata"].get("generation").is_none());

    let uri = format!("{CMS}/held");
    let deleting = call(&server, Method::DELETE, &uri, None).await.json();
    assert!(deleting["metadata"]["deletionTimestamp"].is_string());
    assert!(
        deleting["metadata"].get("generation").is_none(),
        "no generation appears: {deleting}"
    );
    release(&server, &uri).await;
}

#[tokio::test]
async fn a_graceful_delete_bumps_the_generation() {
    let server = server(ServerConfig::default()).await;
    let pods = "/api/v1/namespaces/demo/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "p", "finalizers": ["example.com/hold"]},
                     "spec": {"containers": [{"name": "c", "image": "x"}]}});
    call(&server, Method::POST, pods, Some(&pod)).await;
    let uri = format!("{pods}/p");
    let deleting = call(
        &server,
        Method::DELETE,
        &uri,
        Some(&json!({"gracePeriodSeconds": 30})),
    )
    .await
    .json();
    assert_eq!(deleting["metadata"]["deletionGracePeriodSeconds"], 30);
    assert_eq!(deleting["metadata"]["generation"], 2);
}

#[tokio::test]
async fn a_terminating_namespace_bumps_the_generation_of_what_it_holds() {
    let server = server(ServerConfig::default()).await;
    call(
        &server,
        Method::POST,
        "/api/v1/namespaces",
        Some(&json!({"metadata": {"name": "probe"}})),
    )
    .await;
    let deployments = "/apis/apps/v1/namespaces/probe/deployments";
    let created = call(
        &server,
        Method::POST,
        deployments,
        Some(&deployment("held", "probe")),
    )
    .await;
    assert_eq!(created.status, 201);
    call(&server, Method::DELETE, "/api/v1/namespaces/probe", None).await;

    let uri = format!("{deployments}/held");
    let held = get(&server, &uri).await.json();
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(held["metadata"]["generation"], 2);
    release(&server, &uri).await;
    assert_eq!(
        get(&server, "/api/v1/namespaces/probe").await.status,
        404,
        "empty: gone"
    );
}
