//! Cases whose expected results were read off kube-apiserver 1.36 (the same bodies are sent
//! to both servers by `crates/e2e/tests/strategic.rs`), plus apimachinery's ordering vectors.

use serde_json::{Value, json};

use super::*;

fn deployment(containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": containers}}}})
}

fn patch(object: Value, body: Value) -> Result<Value, StrategicError> {
    let schema = Schema::for_kind(
        object["apiVersion"].as_str().unwrap(),
        object["kind"].as_str().unwrap(),
    )
    .unwrap();
    apply(object, body, schema)
}

fn containers(object: &Value) -> Vec<(String, String)> {
    object["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap().to_owned();
            (name, c["image"].as_str().unwrap_or("").to_owned())
        })
        .collect()
}

fn names(object: &Value) -> Vec<String> {
    containers(object).into_iter().map(|(n, _)| n).collect()
}

fn spec_patch(spec: Value) -> Value {
    json!({"spec": {"template": {"spec": spec}}})
}

#[test]
fn containers_merge_by_name_and_new_ones_go_first() {
    let live =
        deployment(json!([{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]));
    let added = patch(
        live.clone(),
        spec_patch(json!({"containers": [{"name": "c", "image": "c"}]})),
    )
    .unwrap();
    assert_eq!(names(&added), ["c", "a", "b"]);
    let changed = patch(
        added,
        spec_patch(
            json!({"containers": [{"name": "d", "image": "d"}, {"name": "b", "image": "b2"}]}),
        ),
    )
    .unwrap();
    assert_eq!(
        containers(&changed),
        [("d", "d"), ("c", "c"), ("a", "nginx"), ("b", "b2")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let edited = patch(
        live,
        spec_patch(json!({"containers": [{"name": "a", "image": "nginx:2"}]})),
    )
    .unwrap();
    assert_eq!(
        containers(&edited)[1],
        ("b".to_owned(), "busybox".to_owned())
    );
}

#[test]
fn kubectl_apply_keeps_the_other_container_and_stores_no_directive() {
    let live =
        deployment(json!([{"name": "a", "image": "nginx"}, {"name": "b", "image": "busybox"}]));
    let body = spec_patch(json!({
        "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
        "containers": [{"name": "a", "image": "nginx:2"}],
    }));
    let applied = patch(live, body).unwrap();
    assert_eq!(names(&applied), ["a", "b"]);
    assert_eq!(
        applied["spec"]["template"]["spec"]
            .as_object()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn set_element_order_wins_over_patch_and_live_order() {
    // apimachinery's vector: live [1(other:a),3,4,2,9], order [4,2,3,1] -> [4,2,3,1(other:a),9].
    let item = |n: i64| json!({"name": n.to_string(), "image": "x"});
    let mut one = item(1);
    one["other"] = json!("a");
    let live = deployment(json!([one, item(3), item(4), item(2), item(9)]));
    let order: Vec<Value> = [4, 2, 3, 1]
        .iter()
        .map(|n| json!({"name": n.to_string()}))
        .collect();
    let result = patch(
        live,
        spec_patch(json!({"$setElementOrder/containers": order})),
    )
    .unwrap();
    assert_eq!(names(&result), ["4", "2", "3", "1", "9"]);
    assert_eq!(
        result["spec"]["template"]["spec"]["containers"][3]["other"],
        "a"
    );
}

#[test]
fn delete_and_replace_directives_in_lists_and_maps() {
    let live = deployment(json!([{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]));
    let deleted = patch(
        live.clone(),
        spec_patch(json!({"containers": [{"name": "a", "$patch": "delete"}]})),
    )
    .unwrap();
    assert_eq!(names(&deleted), ["b"]);
    let replaced = patch(
        live.clone(),
        spec_patch(json!({"containers": [{"name": "z", "image": "z"}, {"$patch": "replace"}]})),
    )
    .unwrap();
    assert_eq!(names(&replaced), ["z"]);
    let map_replaced = patch(live.clone(), json!({"spec": {"template": {"$patch": "replace", "spec": {"containers": [{"name": "q"}]}}}})).unwrap();
    assert_eq!(
        map_replaced["spec"]["template"],
        json!({"spec": {"containers": [{"name": "q"}]}})
    );
    let map_deleted = patch(live, json!({"spec": {"template": {"$patch": "delete"}}})).unwrap();
    assert_eq!(map_deleted["spec"]["template"], json!({}));
}

#[test]
fn finalizers_are_a_set_and_delete_lists_remove_from_it() {
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": ["a", "b"]}});
    let added = patch(
        live.clone(),
        json!({"metadata": {"finalizers": ["c", "a"]}}),
    )
    .unwrap();
    assert_eq!(added["metadata"]["finalizers"], json!(["c", "a", "b"]));
    let removed = patch(
        live,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
    )
    .unwrap();
    assert_eq!(removed["metadata"]["finalizers"], json!(["b"]));
}

#[test]
fn retain_keys_clears_the_other_strategy_fields() {
    let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
        "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
    let body = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null}}});
    let result = patch(live.clone(), body).unwrap();
    assert_eq!(result["spec"]["strategy"], json!({"type": "Recreate"}));
    let stray =
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 2}}}});
    assert_eq!(
        patch(live.clone(), stray),
        Err(StrategicError::BadRequest(BAD_RETAIN_KEYS))
    );
    let not_a_list = json!({"spec": {"strategy": {"$retainKeys": "type"}}});
    assert_eq!(
        patch(live, not_a_list),
        Err(StrategicError::BadRequest(BAD_RETAIN_KEYS))
    );
}

#[test]
fn lists_without_a_merge_strategy_are_replaced_and_nulls_delete() {
    let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
        "spec": {"tolerations": [{"key": "x"}], "containers": [{"name": "c", "args": ["1", "2"]}]}});
    let body = json!({"metadata": {"labels": {"a": null, "c": "3"}},
        "spec": {"tolerations": [{"key": "y"}], "containers": [{"name": "c", "args": ["3"]}]}});
    let result = patch(live, body).unwrap();
    assert_eq!(result["metadata"]["labels"], json!({"b": "2", "c": "3"}));
    assert_eq!(result["spec"]["tolerations"], json!([{"key": "y"}]));
    assert_eq!(result["spec"]["containers"][0]["args"], json!(["3"]));
}

#[test]
fn errors_read_as_the_real_servers() {
    let live = deployment(json!([{"name": "a", "image": "1"}]));
    let failed = |body| match patch(live.clone(), body) {
        Err(StrategicError::Failed(message)) => message,
        other => panic!("expected a failure, got {other:?}"),
    };
    assert_eq!(
        failed(spec_patch(json!({"containers": [{"image": "x"}]}))),
        "map: map[image:x] does not contain declared merge key: name"
    );
    assert_eq!(
        failed(spec_patch(json!({"containers": [{"$patch": "merge"}]}))),
        "merging lists cannot yet be specified in the patch"
    );
    assert_eq!(
        failed(json!({"spec": {"$patch": "merge"}})),
        "unknown patch type: merge in map: map[$patch:merge]"
    );
    assert_eq!(
        failed(spec_patch(json!({
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "image": "q"}, {"name": "b", "image": "r"}],
        }))),
        "The order in patch list:\n[map[image:q name:a] map[image:r name:b]]\n doesn't match $setElementOrder list:\n[map[name:b] map[name:a]]\n"
    );
    assert!(
        failed(spec_patch(json!({"containers": [[1]]})))
            .starts_with("list element types are not identical: [[map[image:1 name:a]] [[1]]]")
    );
    assert_eq!(
        patch(live, json!({"spec": {"$deleteFromPrimitiveListX/a": [1]}})),
        Err(StrategicError::BadRequest(BAD_PRIMITIVE_LIST))
    );
}

#[test]
fn new_values_are_stored_without_nulls_or_directives() {
    let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
    let body = json!({"spec": {"containers": [{"name": "a", "image": null}, {"name": "b", "$patch": "delete"}]}});
    let result = patch(live, body).unwrap();
    assert_eq!(result["spec"]["containers"], json!([{"name": "a"}]));
}
