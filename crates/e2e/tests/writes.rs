//! Writes that controllers rely on, answered the same by both servers: the status
//! subresource, JSON patches guarded by `test` (finalizer removal), bodies in unknown
//! formats, namespaces that are missing or terminating, and deletes that finalizers hold.

use e2e::{Backend, both, ensure_namespace, error, send};
use serde_json::{Value, json};

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";

async fn status_is_written_through_its_subresource(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, "writes-status").await;
    let pods = "/api/v1/namespaces/writes-status/pods";
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]},
                     "status": {"phase": "Running"}});
    let created = send(&client, "POST", pods, JSON, &pod.to_string())
        .await
        .object();
    assert_eq!(created["status"]["phase"], "Pending", "{}", backend.name());

    let set_running = json!({"status": {"phase": "Running"}}).to_string();
    let main = send(&client, "PATCH", &format!("{pods}/p"), MERGE, &set_running)
        .await
        .object();
    assert_eq!(
        main["status"]["phase"],
        "Pending",
        "{}: the object's PATCH keeps status",
        backend.name()
    );

    let status = send(
        &client,
        "PATCH",
        &format!("{pods}/p/status"),
        MERGE,
        &set_running,
    )
    .await
    .object();
    assert_eq!(status["status"]["phase"], "Running", "{}", backend.name());

    let cms = "/api/v1/namespaces/writes-status/configmaps";
    send(&client, "POST", cms, JSON, r#"{"metadata":{"name":"c"}}"#)
        .await
        .object();
    let none = send(&client, "PATCH", &format!("{cms}/c/status"), MERGE, "{}").await;
    assert_eq!(none, error(404, "NotFound", &[]), "{}", backend.name());
}

both!(status_is_written_through_its_subresource);

async fn json_patch_tests_guard_a_finalizer_removal(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, "writes-patch").await;
    let cms = "/api/v1/namespaces/writes-patch/configmaps";
    let held =
        json!({"metadata": {"name": "held", "finalizers": ["example.com/a", "example.com/b"]}});
    send(&client, "POST", cms, JSON, &held.to_string())
        .await
        .object();
    let remove_first = |expected: Value| {
        json!([{"op": "test", "path": "/metadata/finalizers", "value": expected},
               {"op": "remove", "path": "/metadata/finalizers/0"}])
        .to_string()
    };
    let path = format!("{cms}/held");
    let stale = send(
        &client,
        "PATCH",
        &path,
        JSON_PATCH,
        &remove_first(json!(["example.com/b"])),
    )
    .await;
    assert_eq!(stale, error(422, "Invalid", &[]), "{}", backend.name());
    let current = remove_first(json!(["example.com/a", "example.com/b"]));
    let removed = send(&client, "PATCH", &path, JSON_PATCH, &current)
        .await
        .object();
    assert_eq!(
        removed["metadata"]["finalizers"],
        json!(["example.com/b"]),
        "{}",
        backend.name()
    );
    let unknown = send(&client, "PATCH", &path, "text/plain", "{}").await;
    assert_eq!(
        unknown,
        error(415, "UnsupportedMediaType", &[]),
        "{}",
        backend.name()
    );
    let body = send(
        &client,
        "POST",
        cms,
        "text/plain",
        r#"{"metadata":{"name":"t"}}"#,
    )
    .await;
    assert_eq!(
        body,
        error(415, "UnsupportedMediaType", &[]),
        "{}",
        backend.name()
    );
}

both!(json_patch_tests_guard_a_finalizer_removal);

async fn namespaces_refuse_content_when_missing_or_terminating(backend: Backend) {
    let client = backend.client();
    let missing = send(
        &client,
        "POST",
        "/api/v1/namespaces/writes-none/configmaps",
        JSON,
        r#"{"metadata":{"name":"x"}}"#,
    )
    .await;
    assert_eq!(missing, error(404, "NotFound", &[]), "{}", backend.name());

    ensure_namespace(&client, "writes-ns").await;
    let ns = send(&client, "GET", "/api/v1/namespaces/writes-ns", JSON, "")
        .await
        .object();
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "writes-ns",
        "{}",
        backend.name()
    );
    assert_eq!(
        ns["spec"]["finalizers"],
        json!(["kubernetes"]),
        "{}",
        backend.name()
    );
    // A finalizer keeps the namespace Terminating on both (the fake's namespace controller
    // would otherwise remove it; a bare kube-apiserver never does).
    let cms = "/api/v1/namespaces/writes-ns/configmaps";
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    send(&client, "POST", cms, JSON, &held.to_string())
        .await
        .object();
    let deleted = send(&client, "DELETE", "/api/v1/namespaces/writes-ns", JSON, "")
        .await
        .object();
    assert_eq!(
        deleted["status"]["phase"],
        "Terminating",
        "{}",
        backend.name()
    );
    let late = send(
        &client,
        "POST",
        cms,
        JSON,
        r#"{"metadata":{"name":"late"}}"#,
    )
    .await;
    assert_eq!(
        late,
        error(403, "Forbidden", &["NamespaceTerminating"]),
        "{}",
        backend.name()
    );
}

both!(namespaces_refuse_content_when_missing_or_terminating);

/// `kubectl get`'s Table: the same columns and cells from both servers.
async fn kubectl_get_tables_agree(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, "writes-table").await;
    let pods = "/api/v1/namespaces/writes-table/pods";
    let pod =
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
    send(&client, "POST", pods, JSON, &pod.to_string())
        .await
        .object();
    let cms = "/api/v1/namespaces/writes-table/configmaps";
    send(
        &client,
        "POST",
        cms,
        JSON,
        r#"{"metadata":{"name":"c"},"data":{"a":"1","b":"2"}}"#,
    )
    .await
    .object();
    let table = |path: &'static str| {
        let client = client.clone();
        async move {
            let request = http::Request::get(path)
                .header(
                    "accept",
                    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
                )
                .body(Vec::new())
                .unwrap();
            client.request::<Value>(request).await.expect("a Table")
        }
    };
    let name = backend.name();
    let pods = table("/api/v1/namespaces/writes-table/pods").await;
    let columns: Vec<&str> = pods["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        &columns[..5],
        ["Name", "Ready", "Status", "Restarts", "Age"],
        "{name}"
    );
    let cells = &pods["rows"][0]["cells"];
    assert_eq!(
        &cells.as_array().unwrap()[..4],
        &[json!("p"), json!("0/1"), json!("Pending"), json!("0")],
        "{name}"
    );
    assert_eq!(
        pods["rows"][0]["object"]["kind"], "PartialObjectMetadata",
        "{name}"
    );
    let cms = table("/api/v1/namespaces/writes-table/configmaps").await;
    let cells = &cms["rows"][0]["cells"];
    assert_eq!((&cells[0], &cells[1]), (&json!("c"), &json!(2)), "{name}");
}

both!(kubectl_get_tables_agree);

/// A DELETE that finalizers hold: `deletionTimestamp` is set and a tracked `generation`
/// goes 1 -> 2 (so a generation predicate sees the deletion), once; an object without a
/// generation gets none. Releasing the finalizer then deletes it.
async fn a_finalizer_held_delete_bumps_the_generation(backend: Backend) {
    let client = backend.client();
    let name = backend.name();
    ensure_namespace(&client, "writes-finalized").await;
    let deployments = "/apis/apps/v1/namespaces/writes-finalized/deployments";
    let deployment = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]},
        "spec": {"selector": {"matchLabels": {"app": "held"}},
                 "template": {"metadata": {"labels": {"app": "held"}},
                              "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    let created = send(&client, "POST", deployments, JSON, &deployment.to_string())
        .await
        .object();
    assert_eq!(created["metadata"]["generation"], 1, "{name}");

    let path = format!("{deployments}/held");
    let deleting = send(&client, "DELETE", &path, JSON, "").await.object();
    let meta = &deleting["metadata"];
    assert!(meta["deletionTimestamp"].is_string(), "{name}: {deleting}");
    assert_eq!(meta["deletionGracePeriodSeconds"], 0, "{name}");
    assert_eq!(
        meta["generation"], 2,
        "{name}: deletion bumps the generation"
    );
    let read = send(&client, "GET", &path, JSON, "").await.object();
    assert_eq!(read["metadata"]["generation"], 2, "{name}");

    // Already terminating: a second DELETE changes nothing.
    let again = send(&client, "DELETE", &path, JSON, "").await.object();
    assert_eq!(again["metadata"]["generation"], 2, "{name}: bumped once");
    assert_eq!(
        (
            &again["metadata"]["resourceVersion"],
            &again["metadata"]["deletionTimestamp"]
        ),
        (&meta["resourceVersion"], &meta["deletionTimestamp"]),
        "{name}: a no-op"
    );

    let cms = "/api/v1/namespaces/writes-finalized/configmaps";
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    send(&client, "POST", cms, JSON, &held.to_string())
        .await
        .object();
    let cm_path = format!("{cms}/held");
    let cm = send(&client, "DELETE", &cm_path, JSON, "").await.object();
    assert!(cm["metadata"]["deletionTimestamp"].is_string(), "{name}");
    assert_eq!(cm["metadata"].get("generation"), None, "{name}: {cm}");

    let release = json!({"metadata": {"finalizers": null}}).to_string();
    for path in [&path, &cm_path] {
        send(&client, "PATCH", path, MERGE, &release).await.object();
        let gone = send(&client, "GET", path, JSON, "").await;
        assert_eq!(gone, error(404, "NotFound", &[]), "{name}: {path} released");
    }
}

both!(a_finalizer_held_delete_bumps_the_generation);
