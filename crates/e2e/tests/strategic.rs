//! Strategic merge patches (kubectl's default, and what `kubectl apply` sends) and the
//! `scale` subresource give the same objects on both servers. The real server defaults
//! fields the fake does not (imagePullPolicy, defaultMode, …), so each case reads the paths
//! the patch touched.

use e2e::{Backend, BackendOptions, both, ensure_namespace, error, send};
use kube::Client;
use serde_json::{Value, json};

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "finalizers": ["example.com/a", "example.com/b"]},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {"name": "a", "image": "nginx", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
                        {"name": "b", "image": "busybox"},
                    ],
                    "volumes": [{"name": "v", "configMap": {"name": "cm"}}],
                },
            },
        },
    })
}

/// Creates `deployment(name)` in `ns`, applies `patch` as a strategic merge patch, and
/// returns the object.
async fn patched(client: &Client, ns: &str, name: &str, patch: Value) -> Value {
    let collection = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    send(
        client,
        "POST",
        &collection,
        JSON,
        &deployment(name).to_string(),
    )
    .await
    .object();
    send(
        client,
        "PATCH",
        &format!("{collection}/{name}"),
        STRATEGIC,
        &patch.to_string(),
    )
    .await
    .object()
}

fn pod_spec(object: &Value) -> &Value {
    &object["spec"]["template"]["spec"]
}

fn containers(object: &Value) -> Vec<(String, String)> {
    pod_spec(object)["containers"]
        .as_array()
        .expect("containers")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["image"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

fn template(spec: Value) -> Value {
    json!({"spec": {"template": {"spec": spec}}})
}

async fn strategic_merge_patches_merge_lists_by_key(backend: Backend) {
    let client = backend.client();
    let ns = "strategic";
    ensure_namespace(&client, ns).await;
    let name = backend.name();

    // kubectl patch's default: a new container joins, before the others.
    let sidecar = patched(
        &client,
        ns,
        "sidecar",
        template(json!({"containers": [{"name": "sidecar", "image": "busybox"}]})),
    )
    .await;
    assert_eq!(
        containers(&sidecar),
        pairs(&[("sidecar", "busybox"), ("a", "nginx"), ("b", "busybox")]),
        "{name}"
    );

    // kubectl apply after editing one image: the other container stays, no directive stored.
    let applied = patched(
        &client,
        ns,
        "apply",
        template(json!({
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "a", "image": "nginx:2"}],
        })),
    )
    .await;
    assert_eq!(
        containers(&applied),
        pairs(&[("a", "nginx:2"), ("b", "busybox")]),
        "{name}"
    );
    assert!(
        !applied.to_string().contains("$setElementOrder"),
        "{name}: {applied}"
    );

    // env merges by name; `$patch: delete` removes an item.
    let env = patched(&client, ns, "env", template(json!({"containers": [{"name": "a", "env": [
        {"name": "Z", "value": "3"}, {"name": "X", "$patch": "delete"}, {"name": "Y", "value": "20"},
    ]}]}))).await;
    let env: Vec<(&str, &str)> = pod_spec(&env)["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
        .collect();
    assert_eq!(env, [("Z", "3"), ("Y", "20")], "{name}");

    // `$setElementOrder` reorders, keeping items it does not name.
    let reordered = patched(
        &client,
        ns,
        "order",
        template(json!({
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
        })),
    )
    .await;
    assert_eq!(
        containers(&reordered),
        pairs(&[("b", "busybox"), ("a", "nginx")]),
        "{name}"
    );

    // `$patch: replace` in a list.
    let replaced = patched(
        &client,
        ns,
        "replace",
        template(json!({
            "containers": [{"name": "only", "image": "x"}, {"$patch": "replace"}],
        })),
    )
    .await;
    assert_eq!(containers(&replaced), pairs(&[("only", "x")]), "{name}");

    // Finalizers are a set; `$deleteFromPrimitiveList` removes from it.
    let finalizers = patched(&client, ns, "finalizers", json!({"metadata": {
        "finalizers": ["example.com/c"], "$deleteFromPrimitiveList/finalizers": ["example.com/a"],
    }})).await;
    assert_eq!(
        finalizers["metadata"]["finalizers"],
        json!(["example.com/c", "example.com/b"]),
        "{name}"
    );

    // `$retainKeys`: a volume switched from configMap to secret, the strategy to Recreate.
    let retained = patched(&client, ns, "retain", json!({"spec": {
        "strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": null},
        "template": {"spec": {"volumes": [
            {"name": "v", "secret": {"secretName": "s"}, "configMap": null, "$retainKeys": ["name", "secret"]},
        ]}},
    }})).await;
    assert_eq!(
        retained["spec"]["strategy"],
        json!({"type": "Recreate"}),
        "{name}"
    );
    let volume = &pod_spec(&retained)["volumes"][0];
    let keys: Vec<&String> = volume.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["name", "secret"], "{name}: {volume}");
    assert_eq!(volume["secret"]["secretName"], "s", "{name}");

    // Lists without a merge strategy are replaced (container args).
    patched(
        &client,
        ns,
        "args",
        template(json!({"containers": [{"name": "b", "args": ["1"]}]})),
    )
    .await;
    let args = patched_again(
        &client,
        ns,
        "args",
        template(json!({"containers": [{"name": "b", "args": ["2"]}]})),
    )
    .await;
    assert_eq!(
        pod_spec(&args)["containers"][1]["args"],
        json!(["2"]),
        "{name}"
    );

    // Errors: the real server's codes and words.
    let path = format!("/apis/apps/v1/namespaces/{ns}/deployments/sidecar");
    let no_key = send(
        &client,
        "PATCH",
        &path,
        STRATEGIC,
        &template(json!({"containers": [{"image": "x"}]})).to_string(),
    )
    .await;
    assert_eq!(no_key, error(500, "", &[]), "{name}");
    assert_eq!(
        no_key.message(),
        "map: map[image:x] does not contain declared merge key: name",
        "{name}"
    );
    let merge = send(
        &client,
        "PATCH",
        &path,
        STRATEGIC,
        &json!({"spec": {"$patch": "merge"}}).to_string(),
    )
    .await;
    assert_eq!(
        merge.message(),
        "unknown patch type: merge in map: map[$patch:merge]",
        "{name}"
    );
    let retain = send(
        &client,
        "PATCH",
        &path,
        STRATEGIC,
        &json!({"spec": {"strategy": {"$retainKeys": "type"}}}).to_string(),
    )
    .await;
    assert_eq!(retain, error(400, "BadRequest", &[]), "{name}");
}

async fn patched_again(client: &Client, ns: &str, name: &str, patch: Value) -> Value {
    let path = format!("/apis/apps/v1/namespaces/{ns}/deployments/{name}");
    send(client, "PATCH", &path, STRATEGIC, &patch.to_string())
        .await
        .object()
}

both!(strategic_merge_patches_merge_lists_by_key);

async fn custom_resources_refuse_strategic_merge_patches(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, "strategic-cr").await;
    let widgets = "/apis/example.com/v1/namespaces/strategic-cr/widgets";
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"a": 1}});
    send(&client, "POST", widgets, JSON, &widget.to_string())
        .await
        .object();
    let body = json!({"spec": {"a": 2}}).to_string();
    let refused = send(&client, "PATCH", &format!("{widgets}/w"), STRATEGIC, &body).await;
    assert_eq!(
        refused,
        error(415, "UnsupportedMediaType", &[]),
        "{}",
        backend.name()
    );
    assert_eq!(
        refused.message(),
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    );
    let merged = send(&client, "PATCH", &format!("{widgets}/w"), MERGE, &body)
        .await
        .object();
    assert_eq!(merged["spec"]["a"], 2);
}

both!(
    custom_resources_refuse_strategic_merge_patches,
    BackendOptions {
        custom: vec![("example.com", "widgets", "Widget")],
        ..Default::default()
    }
);

async fn workloads_scale_through_the_scale_subresource(backend: Backend) {
    let client = backend.client();
    let ns = "scale";
    ensure_namespace(&client, ns).await;
    let name = backend.name();
    for (resource, kind) in [
        ("deployments", "Deployment"),
        ("replicasets", "ReplicaSet"),
        ("statefulsets", "StatefulSet"),
    ] {
        let collection = format!("/apis/apps/v1/namespaces/{ns}/{resource}");
        let mut object = deployment("web");
        object["kind"] = json!(kind);
        object["metadata"] = json!({"name": "web"});
        object["spec"] =
            json!({"selector": object["spec"]["selector"], "template": object["spec"]["template"]});
        if kind == "StatefulSet" {
            object["spec"]["serviceName"] = json!("web");
        }
        let created = send(&client, "POST", &collection, JSON, &object.to_string())
            .await
            .object();
        assert_eq!(created["spec"]["replicas"], 1, "{name} {kind}: defaulted");
        let scale_path = format!("{collection}/web/scale");
        let scale = send(&client, "GET", &scale_path, JSON, "").await.object();
        assert_eq!(
            (
                &scale["kind"],
                &scale["apiVersion"],
                &scale["spec"],
                &scale["status"]
            ),
            (
                &json!("Scale"),
                &json!("autoscaling/v1"),
                &json!({"replicas": 1}),
                &json!({"replicas": 0, "selector": "app=web"})
            ),
            "{name} {kind}"
        );
        assert_eq!(
            scale["metadata"]["uid"], created["metadata"]["uid"],
            "{name} {kind}"
        );

        // kubectl scale: a merge patch of the Scale.
        let body = json!({"spec": {"replicas": 3}}).to_string();
        let scaled = send(&client, "PATCH", &scale_path, MERGE, &body)
            .await
            .object();
        assert_eq!(scaled["spec"]["replicas"], 3, "{name} {kind}");
        let parent = send(&client, "GET", &format!("{collection}/web"), JSON, "")
            .await
            .object();
        assert_eq!(parent["spec"]["replicas"], 3, "{name} {kind}");
        assert_eq!(parent["metadata"]["generation"], 2, "{name} {kind}");
        assert_eq!(
            scaled["metadata"]["resourceVersion"],
            parent["metadata"]["resourceVersion"]
        );

        // An autoscaler: GET then PUT, with the resourceVersion as a precondition.
        let mut put = scaled.clone();
        put["spec"]["replicas"] = json!(0);
        let zero = send(&client, "PUT", &scale_path, JSON, &put.to_string())
            .await
            .object();
        assert_eq!(
            zero["spec"],
            json!({}),
            "{name} {kind}: replicas 0 is omitted"
        );
        let stale = send(&client, "PUT", &scale_path, JSON, &put.to_string()).await;
        assert_eq!(stale, error(409, "Conflict", &[]), "{name} {kind}");

        let negative = json!({"spec": {"replicas": -1}}).to_string();
        let invalid = send(&client, "PATCH", &scale_path, MERGE, &negative).await;
        assert_eq!(
            invalid,
            error(422, "Invalid", &["FieldValueInvalid"]),
            "{name} {kind}"
        );
        assert_eq!(
            invalid.message(),
            "Scale.autoscaling \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
        );
    }
}

both!(workloads_scale_through_the_scale_subresource);

/// `crates/fake-apiserver/data/patch-schema.json` is the real server's OpenAPI, reduced:
/// this fails when a new kube-apiserver changes a patch strategy or merge key, and
/// `UPDATE_PATCH_SCHEMA=1` rewrites the table from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    envtest_missing,
    ignore = "no KUBEBUILDER_ASSETS: `cargo run -p kube-envtest -- install 1.36.x`"
)]
async fn the_patch_table_is_the_real_servers_openapi() {
    let Some(backend) = Backend::real(BackendOptions::default(), "patch table").await else {
        return;
    };
    let client = backend.client();
    let get = |path: String| {
        let client = client.clone();
        async move {
            let request = http::Request::get(path)
                .body(Vec::new())
                .expect("a request");
            let text = client
                .request_text(request)
                .await
                .expect("the server's OpenAPI");
            serde_json::from_str::<Value>(&text).expect("JSON")
        }
    };
    let index = get("/openapi/v3".into()).await;
    let mut documents = Vec::new();
    for (gv, entry) in index["paths"].as_object().expect("paths") {
        if gv.starts_with("api") {
            documents.push(
                get(entry["serverRelativeURL"]
                    .as_str()
                    .expect("a URL")
                    .to_owned())
                .await,
            );
        }
    }
    let version = get("/version".into()).await;
    let source = format!(
        "kube-apiserver {} /openapi/v3",
        version["gitVersion"].as_str().unwrap_or("?")
    );
    let table = fake_apiserver::strategic_patch_table(&source, &documents);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fake-apiserver/data/patch-schema.json"
    );
    let rendered = serde_json::to_string_pretty(&table).expect("JSON") + "\n";
    if std::env::var_os("UPDATE_PATCH_SCHEMA").is_some() {
        std::fs::write(path, &rendered).expect("the table is written");
    }
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the table")).expect("JSON");
    assert!(
        committed == table,
        "data/patch-schema.json differs from the real server's OpenAPI: rerun with UPDATE_PATCH_SCHEMA=1"
    );
}
