//! Server-side apply's field ownership, the same on both servers: a manager that stops
//! applying a field removes it, a field another manager owns is a 409 naming it (unless
//! forced), updates take the fields they change, and keyed lists merge by key. Each
//! expectation is what kube-apiserver 1.36 answered to the same requests.

use e2e::{Answer, Backend, both, send};
use serde_json::{Value, json};

const APPLY: &str = "application/apply-patch+yaml";
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

async fn apply(backend: &Backend, path: &str, manager: &str, force: bool, body: &Value) -> Answer {
    let query = format!(
        "?fieldManager={manager}{}",
        if force { "&force=true" } else { "" }
    );
    send(
        &backend.client(),
        "PATCH",
        &format!("{path}{query}"),
        APPLY,
        &body.to_string(),
    )
    .await
}

/// `(manager, operation, fieldsV1)` of each `managedFields` entry, by operation and manager
/// (the stored order also depends on each entry's time, to the second).
fn owners(object: &Value) -> Vec<(String, String, Value)> {
    let mut owners: Vec<_> = object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (text("manager"), text("operation"), e["fieldsV1"].clone())
        })
        .collect();
    owners.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
    owners
}

fn owner(manager: &str, operation: &str, fields: Value) -> (String, String, Value) {
    (manager.into(), operation.into(), fields)
}

/// The conflict's message and its causes as `(field, message)`.
fn refusal(answer: &Answer) -> (String, Vec<(String, String)>) {
    match answer {
        Answer::Error {
            code: 409,
            reason,
            causes,
            fields,
            message,
        } if reason == "Conflict" && causes.iter().all(|c| c == "FieldManagerConflict") => {
            (message.clone(), fields.clone())
        }
        other => panic!("expected an apply conflict, got {other:?}"),
    }
}

async fn applied_fields_have_owners(backend: Backend) {
    let name = backend.name();
    let c1 = format!("{CONFIGMAPS}/c1");
    apply(
        &backend,
        &c1,
        "m1",
        false,
        &configmap("c1", json!({"a": "1"})),
    )
    .await
    .object();
    let second = apply(
        &backend,
        &c1,
        "m1",
        false,
        &configmap("c1", json!({"b": "2"})),
    )
    .await
    .object();
    assert_eq!(second["data"], json!({"b": "2"}), "{name}: `a` given up");
    assert_eq!(
        owners(&second),
        [owner("m1", "Apply", json!({"f:data": {"f:b": {}}}))]
    );

    let other = configmap("c1", json!({"b": "3", "c": "4"}));
    let refused = apply(&backend, &c1, "m2", false, &other).await;
    assert_eq!(
        refusal(&refused).0,
        "Apply failed with 1 conflict: conflict with \"m1\": .data.b",
        "{name}"
    );
    let forced = apply(&backend, &c1, "m2", true, &other).await.object();
    assert_eq!(
        owners(&forced),
        [owner(
            "m2",
            "Apply",
            json!({"f:data": {"f:b": {}, "f:c": {}}})
        )],
        "{name}: m1 lost its only field"
    );
    let third = apply(
        &backend,
        &c1,
        "m1",
        false,
        &configmap("c1", json!({"d": "5"})),
    )
    .await
    .object();
    assert_eq!(
        third["data"],
        json!({"b": "3", "c": "4", "d": "5"}),
        "{name}"
    );

    // Giving everything up leaves no empty map, no entry, and a no-op answer keeps its version.
    let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c3", "labels": {"a": "1"}}, "data": {"a": "1"}});
    let c3 = format!("{CONFIGMAPS}/c3");
    apply(&backend, &c3, "m1", false, &bare).await.object();
    let nothing = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c3"}});
    let emptied = apply(&backend, &c3, "m1", false, &nothing).await.object();
    assert_eq!(emptied.get("data"), None, "{name}");
    assert_eq!(emptied["metadata"].get("labels"), None, "{name}");
    assert_eq!(emptied["metadata"].get("managedFields"), None, "{name}");
    let again = apply(&backend, &c3, "m1", false, &nothing).await.object();
    assert_eq!(
        again["metadata"]["resourceVersion"], emptied["metadata"]["resourceVersion"],
        "{name}: a no-op apply writes nothing"
    );
}

both!(applied_fields_have_owners);

async fn updates_own_what_they_change(backend: Backend) {
    let name = backend.name();
    let client = backend.client();
    let mut created = configmap("c2", json!({"x": "1", "y": "2"}));
    created["metadata"]["labels"] = json!({"l": "1"});
    let body = created.to_string();
    let stored = send(
        &client,
        "POST",
        &format!("{CONFIGMAPS}?fieldManager=creator"),
        "application/json",
        &body,
    )
    .await
    .object();
    let c2 = format!("{CONFIGMAPS}/c2");
    let mut put = stored.clone();
    put["data"]["x"] = json!("9");
    put["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    let put = send(
        &client,
        "PUT",
        &format!("{c2}?fieldManager=upd"),
        "application/json",
        &put.to_string(),
    )
    .await
    .object();
    let patch = json!({"data": {"z": "3"}}).to_string();
    let patched = send(
        &client,
        "PATCH",
        &format!("{c2}?fieldManager=pm"),
        "application/merge-patch+json",
        &patch,
    )
    .await
    .object();
    assert_eq!(
        owners(&patched),
        [
            owner(
                "creator",
                "Update",
                json!({"f:data": {".": {}, "f:y": {}}, "f:metadata": {"f:labels": {".": {}, "f:l": {}}}})
            ),
            owner("pm", "Update", json!({"f:data": {"f:z": {}}})),
            owner("upd", "Update", json!({"f:data": {"f:x": {}}})),
        ],
        "{name}: {put}"
    );

    let mut config = configmap("c2", json!({"x": "7", "y": "2", "z": "3"}));
    config["metadata"]["labels"] = json!({"l": "2"});
    let (message, causes) = refusal(&apply(&backend, &c2, "m1", false, &config).await);
    assert_eq!(
        message,
        "Apply failed with 2 conflicts: conflicts with \"creator\" using v1:\n- .metadata.labels.l\nconflicts with \"upd\" using v1:\n- .data.x",
        "{name}"
    );
    let cause = |field: &str, who: &str| (field.to_owned(), format!("conflict with {who}"));
    // The real server lists the causes in no fixed order (a Go map's); the message groups
    // them by manager, sorted.
    let mut causes = causes;
    causes.sort();
    assert_eq!(
        causes,
        [
            cause(".data.x", "\"upd\" using v1"),
            cause(".metadata.labels.l", "\"creator\" using v1")
        ],
        "{name}"
    );

    // The same values are shared; giving `y` up then leaves it with its creator.
    apply(
        &backend,
        &c2,
        "m1",
        false,
        &configmap("c2", json!({"y": "2", "z": "3"})),
    )
    .await
    .object();
    let kept = apply(
        &backend,
        &c2,
        "m1",
        false,
        &configmap("c2", json!({"z": "3"})),
    )
    .await
    .object();
    assert_eq!(
        kept["data"],
        json!({"x": "9", "y": "2", "z": "3"}),
        "{name}"
    );
    assert_eq!(
        owners(&kept)[0],
        owner("m1", "Apply", json!({"f:data": {"f:z": {}}})),
        "{name}"
    );

    // A manager's own update conflicts with its apply too.
    let c4 = configmap("c4", json!({"x": "1"})).to_string();
    send(
        &client,
        "POST",
        &format!("{CONFIGMAPS}?fieldManager=m3"),
        "application/json",
        &c4,
    )
    .await
    .object();
    let refused = apply(
        &backend,
        &format!("{CONFIGMAPS}/c4"),
        "m3",
        false,
        &configmap("c4", json!({"x": "2"})),
    )
    .await;
    assert_eq!(
        refusal(&refused).0,
        "Apply failed with 1 conflict: conflict with \"m3\" using v1: .data.x",
        "{name}"
    );
}

both!(updates_own_what_they_change);

fn deployment(containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d1"},
        "spec": {"template": {"spec": {"containers": containers}}}})
}

fn names(object: &Value) -> Vec<(String, String)> {
    object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            (
                c["name"].as_str().unwrap().into(),
                c["image"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).into(), (*b).into()))
        .collect()
}

async fn lists_merge_by_key(backend: Backend) {
    let name = backend.name();
    let d1 = "/apis/apps/v1/namespaces/default/deployments/d1";
    let selector = json!({"matchLabels": {"app": "d"}});
    let mut first =
        deployment(json!([{"name": "b", "image": "b:1"}, {"name": "a", "image": "a:1"}]));
    first["metadata"]["finalizers"] = json!(["x/y"]);
    first["spec"]["selector"] = selector.clone();
    first["spec"]["template"]["metadata"] = json!({"labels": {"app": "d"}});
    apply(&backend, d1, "m1", false, &first).await.object();

    let second = deployment(json!([{"name": "c", "image": "c:1"}, {"name": "a", "image": "a:2"}]));
    let (message, _) = refusal(&apply(&backend, d1, "m2", false, &second).await);
    assert_eq!(
        message,
        "Apply failed with 1 conflict: conflict with \"m1\": .spec.template.spec.containers[name=\"a\"].image",
        "{name}"
    );
    let merged = apply(&backend, d1, "m2", true, &second).await.object();
    assert_eq!(
        names(&merged),
        pairs(&[("b", "b:1"), ("c", "c:1"), ("a", "a:2")]),
        "{name}"
    );
    let m2 = json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
        "k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}},
        "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}});
    assert!(
        owners(&merged).contains(&owner("m2", "Apply", m2.clone())),
        "{name}"
    );

    // m1 drops container b and the finalizer; the selector is one value (an atomic map).
    let mut third = deployment(json!([{"name": "a", "image": "a:2"}]));
    third["spec"]["selector"] = selector;
    third["spec"]["template"]["metadata"] = json!({"labels": {"app": "d"}});
    let dropped = apply(&backend, d1, "m1", false, &third).await.object();
    assert_eq!(
        names(&dropped),
        pairs(&[("c", "c:1"), ("a", "a:2")]),
        "{name}"
    );
    assert_eq!(dropped["metadata"].get("finalizers"), None, "{name}");
    let m1 = json!({"f:spec": {"f:selector": {}, "f:template": {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}});
    assert_eq!(
        owners(&dropped),
        [owner("m1", "Apply", m1), owner("m2", "Apply", m2)],
        "{name}"
    );
}

both!(lists_merge_by_key);
