//! Writes as the real server takes them, compared with captures from kube-apiserver
//! v1.36.2: content types, body limits, patch types, the status subresource, namespace
//! lifecycle, and what a restart does to a resumed watch.

use crate::common;

use common::{
    Lines, assert_same_shape, assert_same_status, call, call_with, capture_json, cm, get, server,
};
use fake_apiserver::{Gvr, ServerConfig};
use hyper::Method;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/demo/configmaps";
const PODS: &str = "/api/v1/namespaces/demo/pods";

fn pod(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]},
           "status": {"phase": "Running"}})
}

async fn patch(
    server: &fake_apiserver::FakeApiServer,
    uri: &str,
    ty: &str,
    body: Value,
) -> common::Resp {
    call_with(server, Method::PATCH, uri, ty, Some(&body)).await
}

#[tokio::test]
async fn bodies_in_formats_the_server_does_not_read_are_415() {
    let server = server(ServerConfig::default()).await;
    let create = call_with(&server, Method::POST, CMS, "text/plain", Some(&cm("a"))).await;
    assert_eq!(create.status, 415);
    let real = capture_json("status-415-create-text-plain.json");
    assert_same_status(&create.json(), &real);
    // The real message lists YAML too; ours lists only what it reads (JSON, and protobuf
    // for a built-in kind).
    assert_eq!(
        create.json()["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/vnd.kubernetes.protobuf"
    );
    let real_message = real["message"].as_str().unwrap();
    assert!(real_message.contains("application/json"), "{real_message}");
    assert!(
        real_message.contains("application/vnd.kubernetes.protobuf"),
        "{real_message}"
    );

    call(&server, Method::POST, CMS, Some(&cm("a"))).await;
    let patched = patch(&server, &format!("{CMS}/a"), "text/plain", json!({})).await;
    assert_eq!(patched.status, 415);
    let real = capture_json("status-415-patch-text-plain.json");
    assert_same_status(&patched.json(), &real);
    assert_eq!(patched.json()["message"], real["message"]);
}

#[tokio::test]
async fn a_body_over_three_mebibytes_is_413_and_closes_the_connection() {
    let server = server(ServerConfig::default()).await;
    let mut big = cm("big");
    big["data"]["k"] = json!("x".repeat(3 * 1024 * 1024 + 10));
    let resp = call(&server, Method::POST, CMS, Some(&big)).await;
    assert_eq!(resp.status, 413);
    let real = capture_json("status-413-entity-too-large.json");
    assert_same_status(&resp.json(), &real);
    assert_eq!(resp.json()["message"], real["message"]);
    assert_eq!(resp.headers["connection"], "close");
    assert!(server.list(&Gvr::core("configmaps")).unwrap().is_empty());
}

#[tokio::test]
async fn json_patches_apply_and_a_failed_test_is_a_bare_422() {
    let server = server(ServerConfig::default()).await;
    let mut held = cm("held");
    held["metadata"]["finalizers"] = json!(["example.com/a", "example.com/b"]);
    call(&server, Method::POST, CMS, Some(&held)).await;
    let uri = format!("{CMS}/held");
    let ty = "application/json-patch+json";
    let remove_first = |expected: Value| {
        json!([{"op": "test", "path": "/metadata/finalizers", "value": expected},
               {"op": "remove", "path": "/metadata/finalizers/0"}])
    };

    let stale = patch(&server, &uri, ty, remove_first(json!(["example.com/b"]))).await;
    assert_eq!(stale.status, 422);
    assert_same_status(
        &stale.json(),
        &capture_json("status-422-json-patch-test-failed.json"),
    );

    let ok = patch(
        &server,
        &uri,
        ty,
        remove_first(json!(["example.com/a", "example.com/b"])),
    )
    .await;
    assert_eq!(ok.status, 200);
    assert_eq!(
        ok.json()["metadata"]["finalizers"],
        json!(["example.com/b"])
    );

    let not_a_list = patch(&server, &uri, ty, json!({"op": "remove"})).await;
    assert_eq!(not_a_list.status, 400);
    assert_same_status(
        &not_a_list.json(),
        &capture_json("status-400-json-patch-not-a-list.json"),
    );
}

#[tokio::test]
async fn apply_creates_then_merges_and_needs_a_field_manager() {
    let server = server(ServerConfig::default()).await;
    let ty = "application/apply-patch+yaml";
    let body = |data: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": data});
    let anonymous = patch(
        &server,
        &format!("{CMS}/applied"),
        ty,
        body(json!({"a": "1"})),
    )
    .await;
    assert_eq!(anonymous.status, 422);
    assert_same_status(
        &anonymous.json(),
        &capture_json("status-422-apply-without-field-manager.json"),
    );

    let uri = format!("{CMS}/applied?fieldManager=tests");
    let created = patch(&server, &uri, ty, body(json!({"a": "1"}))).await;
    assert_eq!(created.status, 201);
    let merged = patch(&server, &uri, ty, body(json!({"b": "2"}))).await;
    assert_eq!(merged.status, 200);
    assert_eq!(merged.json()["data"]["b"], "2");

    // Without apiVersion and kind, kube-apiserver 1.36 answers (seen by the fleet e2e):
    // 400 BadRequest, "invalid object type: /, Kind=".
    let untyped = json!({"metadata": {"name": "applied"}, "data": {"c": "3"}});
    let refused = patch(&server, &uri, ty, untyped).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.json()["reason"], "BadRequest");
    assert_eq!(refused.json()["message"], "invalid object type: /, Kind=");
}

#[tokio::test]
async fn status_is_written_only_through_its_subresource() {
    let server = server(ServerConfig::default()).await;
    let created = call(&server, Method::POST, PODS, Some(&pod("p")))
        .await
        .json();
    let real = capture_json("pod-created-status-reset.json");
    assert_eq!(
        created["status"], real["status"],
        "a create starts from the server's status"
    );

    let uri = format!("{PODS}/p");
    let merge = "application/merge-patch+json";
    let ignored = patch(
        &server,
        &uri,
        merge,
        json!({"status": {"phase": "Running"}}),
    )
    .await
    .json();
    assert_eq!(
        ignored["status"]["phase"], "Pending",
        "the object's own PATCH keeps status"
    );
    assert_eq!(
        ignored["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
        "and changes nothing, so no new resourceVersion"
    );

    let status = patch(
        &server,
        &format!("{uri}/status"),
        merge,
        json!({"status": {"phase": "Running"}, "spec": {"activeDeadlineSeconds": 5}}),
    )
    .await
    .json();
    assert_eq!(status["status"]["phase"], "Running");
    assert!(
        status["spec"].get("activeDeadlineSeconds").is_none(),
        "/status keeps the spec"
    );

    let no_status = patch(&server, &format!("{CMS}/x/status"), merge, json!({})).await;
    assert_eq!(
        no_status.status, 404,
        "configmaps have no status subresource"
    );
}

#[tokio::test]
async fn a_namespace_terminates_empties_and_goes() {
    let server = server(ServerConfig::default()).await;
    let namespaces = "/api/v1/namespaces";
    let created = call(
        &server,
        Method::POST,
        namespaces,
        Some(&json!({"metadata": {"name": "probe"}})),
    )
    .await
    .json();
    let real = capture_json("namespace-created.json");
    assert_same_shape(&created, &real, "namespace");
    assert_eq!(
        created["metadata"]["labels"],
        json!({"kubernetes.io/metadata.name": "probe"})
    );
    assert_eq!(
        (&created["spec"], &created["status"]),
        (&real["spec"], &real["status"])
    );

    let cms = "/api/v1/namespaces/probe/configmaps";
    let mut held = cm("held");
    held["metadata"]["namespace"] = json!("probe");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    call(&server, Method::POST, cms, Some(&held)).await;
    let mut free = cm("free");
    free["metadata"]["namespace"] = json!("probe");
    call(&server, Method::POST, cms, Some(&free)).await;

    let deleted = call(
        &server,
        Method::DELETE,
        &format!("{namespaces}/probe"),
        None,
    )
    .await;
    assert_eq!(deleted.status, 200);
    assert_same_shape(
        &deleted.json(),
        &capture_json("namespace-delete-terminating.json"),
        "ns",
    );
    assert_eq!(deleted.json()["status"]["phase"], "Terminating");

    let late = call(
        &server,
        Method::POST,
        cms,
        Some(&json!({"metadata": {"name": "late"}})),
    )
    .await;
    assert_eq!(late.status, 403);
    let real = capture_json("status-403-namespace-terminating.json");
    assert_same_status(&late.json(), &real);
    assert_eq!(late.json()["message"], real["message"]);

    // The namespace controller's part: the free object is gone, the held one waits.
    assert_eq!(get(&server, &format!("{cms}/free")).await.status, 404);
    assert_eq!(
        get(&server, &format!("{namespaces}/probe")).await.status,
        200
    );
    let release = json!({"metadata": {"finalizers": null}});
    patch(
        &server,
        &format!("{cms}/held"),
        "application/merge-patch+json",
        release,
    )
    .await;
    assert_eq!(
        get(&server, &format!("{namespaces}/probe")).await.status,
        404,
        "empty: gone"
    );

    let missing = call(
        &server,
        Method::POST,
        "/api/v1/namespaces/nonexistent/configmaps",
        Some(&json!({"metadata": {"name": "x"}})),
    )
    .await;
    let real = capture_json("status-404-namespace-missing.json");
    assert_same_status(&missing.json(), &real);
    assert_eq!(missing.json()["message"], real["message"]);
}

#[tokio::test]
async fn an_unknown_resource_version_match_is_422() {
    let server = server(ServerConfig::default()).await;
    let resp = get(
        &server,
        &format!("{CMS}?resourceVersion=1&resourceVersionMatch=Bogus"),
    )
    .await;
    assert_eq!(resp.status, 422);
    let real = capture_json("status-422-rvmatch-unsupported.json");
    assert_same_status(&resp.json(), &real);
    assert_eq!(resp.json()["message"], real["message"]);
}

#[tokio::test]
async fn after_a_restart_a_resumed_watch_is_410_even_when_nothing_changed() {
    let server = server(ServerConfig::default()).await;
    call(&server, Method::POST, CMS, Some(&cm("a"))).await;
    let rv = get(&server, CMS).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    server.restart();
    let mut watch = Lines::open(&server, &format!("{CMS}?watch=1&resourceVersion={rv}")).await;
    let event = watch.next().await.unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["code"], 410);
    // A list at that version (not older than) still works: the informer's way back.
    let list = get(
        &server,
        &format!("{CMS}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"),
    )
    .await;
    assert_eq!(list.status, 200);
}

#[tokio::test]
async fn a_terminated_server_refuses_connections_and_keeps_its_watches() {
    let server = server(ServerConfig::default()).await;
    let mut watch = Lines::open(&server, &format!("{CMS}?watch=1")).await;
    server.terminate();
    // The listener closes at once: a new connection is refused.
    let mut refused = false;
    for _ in 0..6000 {
        if tokio::net::TcpStream::connect(server.addr()).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(refused, "a terminated server stops listening");
    // The open watch goes on, events included.
    server
        .create(&Gvr::core("configmaps"), Some("demo"), cm("after"))
        .unwrap();
    let event = watch.events(1).await.remove(0);
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("after"))
    );
    assert_eq!(server.fault_counts()["terminate"], 1);
}
