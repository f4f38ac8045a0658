//! Ownership as kube-apiserver 1.36 recorded it for the same requests (the expected
//! `fieldsV1` and messages are its answers); `crates/e2e/tests/server_side_apply.rs` sends
//! the same requests to both servers.

use serde_json::{Value, json};

use super::*;

fn configmap(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<Value, ApiError> {
    let apply = Apply {
        config,
        manager,
        api_version: "v1",
        force,
        scope: Scope::Object,
    };
    apply.onto(live, "2026-11-27T00:00:00Z")
}

/// `(manager, operation, fieldsV1)` of each entry, in order.
fn owners(object: &Value) -> Vec<(String, String, Value)> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let text = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (text("manager"), text("operation"), e["fieldsV1"].clone())
        })
        .collect()
}

fn owner(manager: &str, operation: &str, fields: Value) -> (String, String, Value) {
    (manager.into(), operation.into(), fields)
}

#[test]
fn a_manager_that_stops_applying_a_field_removes_it() {
    let first = apply(None, &configmap("c", json!({"a": "1"})), "m1", false).unwrap();
    let second = apply(
        Some(&first),
        &configmap("c", json!({"b": "2"})),
        "m1",
        false,
    )
    .unwrap();
    assert_eq!(second["data"], json!({"b": "2"}));
    assert_eq!(
        owners(&second),
        [owner("m1", "Apply", json!({"f:data": {"f:b": {}}}))]
    );

    let nothing = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let emptied = apply(Some(&second), &nothing, "m1", false).unwrap();
    assert_eq!(emptied.get("data"), None, "no `data: {{}}` left behind");
    assert_eq!(emptied["metadata"].get("managedFields"), None);
}

#[test]
fn changing_another_managers_field_conflicts_unless_forced() {
    let live = apply(None, &configmap("c", json!({"b": "2"})), "m1", false).unwrap();
    let config = configmap("c", json!({"b": "3", "c": "4"}));
    let refused = apply(Some(&live), &config, "m2", false).unwrap_err();
    assert_eq!(refused.code, 409);
    assert_eq!(
        refused.body["message"],
        "Apply failed with 1 conflict: conflict with \"m1\": .data.b"
    );
    assert_eq!(
        refused.body["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"m1\"", "field": ".data.b"}])
    );

    let forced = apply(Some(&live), &config, "m2", true).unwrap();
    assert_eq!(forced["data"], json!({"b": "3", "c": "4"}));
    // m1 owned nothing else: its entry is gone.
    assert_eq!(
        owners(&forced),
        [owner(
            "m2",
            "Apply",
            json!({"f:data": {"f:b": {}, "f:c": {}}})
        )]
    );
    // Applying without `b` now leaves m2's `b` alone.
    let third = apply(
        Some(&forced),
        &configmap("c", json!({"d": "5"})),
        "m1",
        false,
    )
    .unwrap();
    assert_eq!(third["data"], json!({"b": "3", "c": "4", "d": "5"}));
}

#[test]
fn updates_take_the_fields_they_change_and_shared_fields_stay() {
    let mut created = configmap("c", json!({"x": "1", "y": "2"}));
    created["metadata"]["labels"] = json!({"l": "1"});
    let now = "2026-11-27T00:00:00Z";
    record_update(&mut created, None, "creator", "v1", now, Scope::Object);
    let mut put = created.clone();
    put["data"]["x"] = json!("9");
    record_update(&mut put, Some(&created), "upd", "v1", now, Scope::Object);
    assert_eq!(
        owners(&put),
        [
            owner(
                "creator",
                "Update",
                json!({"f:data": {".": {}, "f:y": {}}, "f:metadata": {"f:labels": {".": {}, "f:l": {}}}})
            ),
            owner("upd", "Update", json!({"f:data": {"f:x": {}}})),
        ]
    );

    let mut config = configmap("c", json!({"x": "7", "y": "2"}));
    config["metadata"]["labels"] = json!({"l": "2"});
    let refused = apply(Some(&put), &config, "m1", false).unwrap_err();
    assert_eq!(
        refused.body["message"],
        "Apply failed with 2 conflicts: conflicts with \"creator\" using v1:\n- .metadata.labels.l\nconflicts with \"upd\" using v1:\n- .data.x"
    );
    let fields: Vec<&Value> = refused.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["field"])
        .collect();
    assert_eq!(fields, [".data.x", ".metadata.labels.l"]);

    // The same values: shared, and giving `y` up later leaves it with its creator.
    let shared = apply(Some(&put), &configmap("c", json!({"y": "2"})), "m1", false).unwrap();
    let given_up = apply(Some(&shared), &configmap("c", json!({})), "m1", false).unwrap();
    assert_eq!(given_up["data"], json!({"x": "9", "y": "2"}));
}

#[test]
fn keyed_lists_merge_by_key_and_atomic_maps_are_owned_whole() {
    let deployment = |containers: Value, extra: Value| {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": containers}}}});
        if let Some(finalizers) = extra["metadata"].get("finalizers") {
            d["metadata"]["finalizers"] = finalizers.clone();
        }
        if let Some(selector) = extra["spec"].get("selector") {
            d["spec"]["selector"] = selector.clone();
        }
        d
    };
    let first = deployment(
        json!([{"name": "b", "image": "b:1"}, {"name": "a", "image": "a:1"}]),
        json!({"metadata": {"finalizers": ["x/y"]}, "spec": {"selector": {"matchLabels": {"app": "d"}}}}),
    );
    let live = apply(None, &first, "m1", false).unwrap();
    assert_eq!(
        owners(&live)[0].2,
        json!({"f:metadata": {"f:finalizers": {"v:\"x/y\"": {}}}, "f:spec": {"f:selector": {},
            "f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}},
                "k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}})
    );
    let second = deployment(
        json!([{"name": "c", "image": "c:1"}, {"name": "a", "image": "a:2"}]),
        json!({}),
    );
    let refused = apply(Some(&live), &second, "m2", false).unwrap_err();
    assert_eq!(
        refused.body["details"]["causes"][0]["field"],
        ".spec.template.spec.containers[name=\"a\"].image"
    );
    let merged = apply(Some(&live), &second, "m2", true).unwrap();
    let names: Vec<&Value> = merged["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["name"])
        .collect();
    assert_eq!(names, ["b", "c", "a"], "the real server's order");

    // m1 drops container b and the finalizer.
    let third = deployment(
        json!([{"name": "a", "image": "a:2"}]),
        json!({"spec": {"selector": {"matchLabels": {"app": "d"}}}}),
    );
    let dropped = apply(Some(&merged), &third, "m1", false).unwrap();
    let containers = &dropped["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers,
        &json!([{"name": "c", "image": "c:1"}, {"name": "a", "image": "a:2"}])
    );
    assert_eq!(dropped["metadata"].get("finalizers"), None);
}
