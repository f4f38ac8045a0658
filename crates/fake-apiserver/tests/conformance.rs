//! fake-apiserver's answers compared with responses recorded from a real kube-apiserver
//! (tests/captures): field presence, types, codes, reasons, framing, headers.

use crate::common;

use common::*;
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use hyper::Method;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/demo/configmaps";

/// Config maps shaped like the captured ones (labels and data).
fn seed(server: &FakeApiServer, n: usize) {
    let objects = (0..n).map(|i| {
        json!({"metadata": {"name": format!("cm-{i:04}"), "namespace": "demo", "labels": {"app": "bench", "shard": format!("s{}", i % 2)}}, "data": {"key": format!("value-{i}")}})
    });
    server.seed(&Gvr::core("configmaps"), objects).unwrap();
}

#[tokio::test]
async fn get_matches_a_real_get() {
    let server = server(ServerConfig::default()).await;
    seed(&server, 1);
    let resp = get(&server, &format!("{CMS}/cm-0000")).await;
    assert_eq!(resp.status, 200);
    assert_same_shape(&resp.json(), &capture_json("get-configmap.json"), "get");
    assert_eq!(resp.headers["content-type"], "application/json");
    assert_eq!(resp.headers["cache-control"], "no-cache, private");
    assert!(resp.headers.contains_key("audit-id"));
    assert!(resp.headers.contains_key("content-length"));
}

#[tokio::test]
async fn paged_list_matches_a_real_paged_list() {
    let server = server(ServerConfig::default()).await;
    seed(&server, 5);
    let page = get(&server, &format!("{CMS}?limit=2")).await;
    assert_eq!(page.status, 200);
    let ours = page.json();
    let real = capture_json("list-configmaps-limit2.json");
    assert_same_shape(&ours, &real, "list");
    assert_eq!(ours["kind"], "ConfigMapList");
    assert_eq!(ours["metadata"]["remainingItemCount"], 3);
    // Items carry no kind/apiVersion, exactly as the real server writes them.
    assert!(ours["items"][0].get("kind").is_none());
    // The continue token decodes to the real token's fields.
    let token = ours["metadata"]["continue"].as_str().unwrap();
    let decode = |t: &str| -> Value {
        use base64::Engine;
        serde_json::from_slice(&base64::engine::general_purpose::STANDARD.decode(t).unwrap())
            .unwrap()
    };
    let real_token = decode(real["metadata"]["continue"].as_str().unwrap());
    assert_same_shape(&decode(token), &real_token, "continue");
    // The last page has no continue and no remainingItemCount.
    let page2 = get(&server, &format!("{CMS}?limit=2&continue={token}"))
        .await
        .json();
    let page3_token = page2["metadata"]["continue"].as_str().unwrap();
    let page3 = get(&server, &format!("{CMS}?limit=2&continue={page3_token}"))
        .await
        .json();
    assert_eq!(page3["items"].as_array().unwrap().len(), 1);
    assert!(page3["metadata"].get("continue").is_none());
    assert!(page3["metadata"].get("remainingItemCount").is_none());
}

#[tokio::test]
async fn list_at_resource_version_zero_ignores_limit_like_the_watch_cache() {
    let server = server(ServerConfig::default()).await;
    seed(&server, 5);
    let all = get(&server, &format!("{CMS}?limit=2&resourceVersion=0"))
        .await
        .json();
    assert_eq!(all["items"].as_array().unwrap().len(), 5);
    assert!(all["metadata"].get("continue").is_none());
}

#[tokio::test]
async fn watch_events_and_bookmarks_are_framed_like_a_real_watch() {
    let server =
        server(ServerConfig::default().bookmark_interval(std::time::Duration::from_millis(50)))
            .await;
    let rv = server.resource_version();
    let mut watch = Lines::open(
        &server,
        &format!("{CMS}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=15"),
    )
    .await;
    assert_eq!(watch.status, 200);
    assert!(
        watch.headers.get("content-length").is_none(),
        "a watch is streamed"
    );
    assert_eq!(watch.headers["transfer-encoding"], "chunked");
    let cms = Gvr::core("configmaps");
    server
        .create(
            &cms,
            Some("demo"),
            json!({"metadata": {"name": "w1"}, "data": {"a": "1"}}),
        )
        .unwrap();
    server
        .patch(
            &cms,
            Some("demo"),
            "w1",
            json!({"metadata": {"labels": {"touched": "yes"}}}),
        )
        .unwrap();
    server.delete(&cms, Some("demo"), "w1").unwrap();
    let real: Vec<Value> = capture("watch-stream.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ours = watch.events(3).await;
    let types: Vec<&str> = ours.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"]);
    assert_same_shape(&ours[0], &real[0], "added");
    assert_same_shape(
        &ours[2]["object"]["metadata"],
        &real[3]["object"]["metadata"],
        "deleted.metadata",
    );
    // A DELETED event carries the deletion's own revision, newer than the last update.
    let rv_of = |e: &Value| {
        e["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(rv_of(&ours[2]) > rv_of(&ours[1]));
    let bookmark = loop {
        let line = watch.next().await.unwrap();
        if line["type"] == "BOOKMARK" {
            break line;
        }
    };
    assert_same_shape(&bookmark, &real[4], "bookmark");
}

#[tokio::test]
async fn streaming_list_ends_with_the_annotated_bookmark_only_when_bookmarks_were_asked() {
    let server = server(ServerConfig::default()).await;
    seed(&server, 3);
    let real: Vec<Value> = capture("watchlist-initial-events.json")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let url = format!(
        "{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5"
    );
    let mut watch = Lines::open(&server, &url).await;
    let mut lines = Vec::new();
    for _ in 0..4 {
        lines.push(watch.next().await.unwrap());
    }
    assert!(lines[..3].iter().all(|l| l["type"] == "ADDED"));
    assert_same_shape(&lines[3], real.last().unwrap(), "initial-events-end");
    assert_eq!(
        lines[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(
        lines[3]["object"]["metadata"]["resourceVersion"],
        server.resource_version().to_string()
    );

    let url = format!(
        "{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
    );
    let mut watch = Lines::open(&server, &url).await;
    let mut types = Vec::new();
    while let Some(line) = watch.next().await {
        types.push(line["type"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        types,
        ["ADDED", "ADDED", "ADDED"],
        "no end bookmark without allowWatchBookmarks"
    );
}

#[tokio::test]
async fn a_server_without_streaming_lists_answers_like_the_real_one() {
    let server = server(ServerConfig::default().streaming_lists(false)).await;
    let url = format!(
        "{CMS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
    );
    let mut watch = Lines::open(&server, &url).await;
    assert_eq!(watch.status, 200);
    let real: Value = capture_json("watchlist-with-debian-etcd-3.4.23-refused.json");
    let ours = watch.next().await.unwrap();
    assert_same_status(&ours["object"], &real["object"]);
    assert_eq!(ours["type"], "ERROR");
    assert!(watch.next().await.is_none());
    assert_eq!(server.fault_counts()["streaming_list_refused"], 1);
}

#[tokio::test]
async fn error_statuses_match_the_real_ones() {
    let server = server(ServerConfig::default().history_window(5)).await;
    seed(&server, 2);
    let status = |name: &str| capture_json(name);

    let missing = get(&server, &format!("{CMS}/does-not-exist")).await;
    assert_eq!(missing.status, 404);
    assert_same_status(
        &missing.json(),
        &status("status-404-get-missing-configmap.json"),
    );

    let dup = call(&server, Method::POST, CMS, Some(&cm("cm-0000"))).await;
    assert_eq!(dup.status, 409);
    assert_same_status(&dup.json(), &status("status-409-already-exists.json"));

    let mut stale = server
        .get(&Gvr::core("configmaps"), Some("demo"), "cm-0001")
        .unwrap();
    server
        .patch(
            &Gvr::core("configmaps"),
            Some("demo"),
            "cm-0001",
            json!({"data": {"key": "new"}}),
        )
        .unwrap();
    stale["data"]["key"] = "mine".into();
    let conflict = call(
        &server,
        Method::PUT,
        &format!("{CMS}/cm-0001"),
        Some(&stale),
    )
    .await;
    assert_eq!(conflict.status, 409);
    assert_same_status(
        &conflict.json(),
        &status("status-409-conflict-stale-rv.json"),
    );

    let bad_name = call(&server, Method::POST, CMS, Some(&cm("Invalid_Name!"))).await;
    assert_eq!(bad_name.status, 422);
    assert_same_status(&bad_name.json(), &status("status-422-invalid-name.json"));
    assert_eq!(
        bad_name.json()["message"],
        status("status-422-invalid-name.json")["message"]
    );

    let rv_match = get(&server, &format!("{CMS}?resourceVersionMatch=NotOlderThan")).await;
    assert_eq!(rv_match.status, 422);
    assert_same_status(
        &rv_match.json(),
        &status("status-422-rvmatch-without-rv.json"),
    );

    // Push the first list's revision out of the history window.
    let first = get(&server, &format!("{CMS}?limit=1")).await.json();
    let old_rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let token = first["metadata"]["continue"].as_str().unwrap().to_owned();
    for i in 0..20 {
        server
            .create(
                &Gvr::core("configmaps"),
                Some("demo"),
                cm(&format!("churn-{i}")),
            )
            .unwrap();
    }
    let too_old = get(
        &server,
        &format!("{CMS}?resourceVersion={old_rv}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(too_old.status, 410);
    assert_same_status(
        &too_old.json(),
        &status("status-410-list-exact-old-rv.json"),
    );
    let legacy = get(&server, &format!("{CMS}?limit=2&resourceVersion={old_rv}")).await;
    assert_eq!(
        legacy.status, 410,
        "limit + resourceVersion without a match means Exact"
    );

    let expired = get(&server, &format!("{CMS}?limit=1&continue={token}")).await;
    assert_eq!(expired.status, 410);
    let real_expired = status("status-410-list-expired-continue.json");
    assert_same_status(&expired.json(), &real_expired);
    assert_eq!(expired.json()["message"], real_expired["message"]);

    let mut watch = Lines::open(&server, &format!("{CMS}?watch=1&resourceVersion={old_rv}")).await;
    assert_eq!(watch.status, 200, "watch errors arrive as an ERROR event");
    let event = watch.next().await.unwrap();
    let real = status("watch-410-too-old-rv-watchcache.json");
    assert_eq!(event["type"], "ERROR");
    assert_same_status(&event["object"], &real["object"]);
    assert!(
        event["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("too old resource version: {old_rv} ("))
    );
}

#[tokio::test]
async fn too_large_resource_version_is_a_timeout_with_its_cause() {
    let server = server(ServerConfig::default()).await;
    let future = server.resource_version() + 100;
    let resp = get(
        &server,
        &format!("{CMS}?resourceVersion={future}&resourceVersionMatch=NotOlderThan"),
    )
    .await;
    assert_eq!(resp.status, 504);
    let body = resp.json();
    assert_eq!(body["reason"], "Timeout");
    assert_eq!(
        body["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
}

#[tokio::test]
async fn writes_maintain_server_owned_metadata() {
    let server = server(ServerConfig::default()).await;
    let pods = "/api/v1/namespaces/demo/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "forged", "resourceVersion": "999"}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let created = call(&server, Method::POST, pods, Some(&pod)).await;
    assert_eq!(created.status, 201);
    let created = created.json();
    let meta = &created["metadata"];
    assert_ne!(meta["uid"], "forged");
    assert_eq!(
        meta["resourceVersion"],
        server.resource_version().to_string()
    );
    assert_eq!(meta["generation"], 1);
    assert_eq!(meta["managedFields"][0]["manager"], "conformance-test");
    assert!(meta["creationTimestamp"].as_str().unwrap().ends_with('Z'));

    // A label change keeps the generation; a spec change bumps it.
    let merge = "application/merge-patch+json";
    let labelled = call_with(
        &server,
        Method::PATCH,
        &format!("{pods}/p"),
        merge,
        Some(&json!({"metadata": {"labels": {"a": "b"}}})),
    )
    .await
    .json();
    assert_eq!(labelled["metadata"]["generation"], 1);
    assert_eq!(labelled["metadata"]["uid"], meta["uid"]);
    let respec = call_with(
        &server,
        Method::PATCH,
        &format!("{pods}/p"),
        merge,
        Some(&json!({"spec": {"nodeName": "n1"}})),
    )
    .await
    .json();
    assert_eq!(respec["metadata"]["generation"], 2);
    // A no-op write does not bump the resourceVersion.
    let same = call_with(
        &server,
        Method::PATCH,
        &format!("{pods}/p"),
        merge,
        Some(&json!({"spec": {"nodeName": "n1"}})),
    )
    .await
    .json();
    assert_eq!(
        same["metadata"]["resourceVersion"],
        respec["metadata"]["resourceVersion"]
    );
}

#[tokio::test]
async fn deletes_answer_success_or_the_deferred_object() {
    let server = server(ServerConfig::default()).await;
    seed(&server, 1);
    let gone = call(&server, Method::DELETE, &format!("{CMS}/cm-0000"), None).await;
    assert_eq!(gone.status, 200);
    let body = gone.json();
    assert_eq!(
        (body["kind"].as_str(), body["status"].as_str()),
        (Some("Status"), Some("Success"))
    );
    assert_eq!(body["details"]["name"], "cm-0000");
    assert!(body["details"]["uid"].is_string());

    let held = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    call(&server, Method::POST, CMS, Some(&held)).await;
    let deferred = call(&server, Method::DELETE, &format!("{CMS}/held"), None)
        .await
        .json();
    assert_eq!(deferred["kind"], "ConfigMap");
    assert!(deferred["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(
        get(&server, &format!("{CMS}/held")).await.status,
        200,
        "still there while finalized"
    );
    // Removing the last finalizer completes the deletion.
    let merge = "application/merge-patch+json";
    call_with(
        &server,
        Method::PATCH,
        &format!("{CMS}/held"),
        merge,
        Some(&json!({"metadata": {"finalizers": null}})),
    )
    .await;
    assert_eq!(get(&server, &format!("{CMS}/held")).await.status, 404);
}

#[tokio::test]
async fn version_and_discovery_documents() {
    let server = server(ServerConfig::default()).await;
    let version = get(&server, "/version").await.json();
    assert_same_shape(&version, &capture_json("version.json"), "version");
    assert_eq!(version["minor"], "36");
    let core = get(&server, "/api/v1").await.json();
    let names: Vec<&str> = core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for expected in [
        "configmaps",
        "events",
        "namespaces",
        "nodes",
        "pods",
        "secrets",
        "serviceaccounts",
        "services",
    ] {
        assert!(names.contains(&expected), "{expected} missing from /api/v1");
    }
    let groups = get(&server, "/apis").await.json();
    let group_names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        group_names,
        [
            "admissionregistration.k8s.io",
            "apiextensions.k8s.io",
            "apps",
            "autoscaling",
            "batch",
            "coordination.k8s.io",
            "discovery.k8s.io",
            "events.k8s.io",
            "networking.k8s.io",
            "policy",
            "rbac.authorization.k8s.io",
            "scheduling.k8s.io",
            "storage.k8s.io",
        ]
    );
    assert_eq!(
        get(&server, "/apis/coordination.k8s.io/v1").await.json()["resources"][0]["name"],
        "leases"
    );
    assert_eq!(get(&server, "/api/v1/nonsense").await.status, 404);
    // Outside the API, or under a group nobody serves: the real server's mux answers a
    // plain-text 404, not a Status.
    for path in ["/nonsense", "/apis/nogroup", "/apis/nogroup/v1/things"] {
        let answer = get(&server, path).await;
        assert_eq!(answer.status, 404, "{path}");
        assert_eq!(
            String::from_utf8_lossy(&answer.body).trim(),
            "404 page not found",
            "{path}"
        );
    }
    // A served group's unknown version is a Status, as the real server answers.
    assert_eq!(get(&server, "/apis/apps/v9").await.json()["kind"], "Status");
}

#[tokio::test]
async fn a_grace_period_defers_the_delete_until_it_has_passed() {
    let server = server(ServerConfig::default()).await;
    let pods = "/api/v1/namespaces/demo/pods";
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
    call(&server, Method::POST, pods, Some(&pod)).await;
    let deferred = call(
        &server,
        Method::DELETE,
        &format!("{pods}/p"),
        Some(&json!({"gracePeriodSeconds": 1})),
    )
    .await
    .json();
    assert_eq!(deferred["kind"], "Pod");
    assert_eq!(deferred["metadata"]["deletionGracePeriodSeconds"], 1);
    // Gone once the grace period has passed (polled; the bound only guards a hang).
    for _ in 0..3000 {
        if get(&server, &format!("{pods}/p")).await.status == 404 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("the pod outlived its grace period by far");
}

#[tokio::test]
async fn custom_resources_are_served_like_built_in_ones() {
    use fake_apiserver::ResourceType;
    let widgets = Gvr::new("example.com", "v1", "widgets");
    let server = server(
        ServerConfig::default().resource(ResourceType::namespaced(widgets.clone(), "Widget")),
    )
    .await;
    let gadgets = Gvr::new("example.com", "v1alpha1", "gadgets");
    server.register(ResourceType::cluster_scoped(gadgets.clone(), "Gadget"));
    let url = "/apis/example.com/v1/namespaces/demo/widgets";
    let created = call(&server, Method::POST, url, Some(&json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}}))).await;
    assert_eq!(created.status, 201);
    assert_eq!(get(&server, url).await.json()["kind"], "WidgetList");
    let wrong_kind = call(
        &server,
        Method::POST,
        url,
        Some(&json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}})),
    )
    .await;
    assert_eq!(wrong_kind.status, 400);
    let gadget = call(
        &server,
        Method::POST,
        "/apis/example.com/v1alpha1/gadgets",
        Some(&json!({"metadata": {"name": "g"}})),
    )
    .await;
    assert_eq!(gadget.status, 201);
    assert!(gadget.json()["metadata"].get("namespace").is_none());
    let group = get(&server, "/apis/example.com").await.json();
    assert_eq!(group["versions"].as_array().unwrap().len(), 2);
}

/// Strategic merge patch and scale errors, body for body (captured from kube-apiserver 1.36
/// with the requests below).
#[tokio::test]
async fn strategic_patch_and_scale_errors_match_the_real_ones() {
    use fake_apiserver::ResourceType;
    let widgets = Gvr::new("example.com", "v1", "widgets");
    let server = server(
        ServerConfig::default().resource(ResourceType::namespaced(widgets.clone(), "Widget")),
    )
    .await;
    let smp = "application/strategic-merge-patch+json";
    let same = |ours: &Resp, capture: &str| {
        let real = capture_json(capture);
        assert_eq!(
            u64::from(ours.status),
            real["code"].as_u64().unwrap(),
            "{capture}"
        );
        assert_same_status(&ours.json(), &real);
        assert_eq!(ours.json()["message"], real["message"], "{capture}");
    };

    let url = "/apis/example.com/v1/namespaces/demo/widgets";
    call(
        &server,
        Method::POST,
        url,
        Some(&json!({"metadata": {"name": "w"}})),
    )
    .await;
    let custom = call_with(
        &server,
        Method::PATCH,
        &format!("{url}/w"),
        smp,
        Some(&json!({"spec": {"a": 2}})),
    )
    .await;
    same(
        &custom,
        "status-415-strategic-merge-patch-custom-resource.json",
    );

    let deployments = "/apis/apps/v1/namespaces/demo/deployments";
    let web = json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": {"spec": {"containers": [{"name": "a", "image": "nginx"}]}}}});
    call(&server, Method::POST, deployments, Some(&web)).await;
    let no_key = json!({"spec": {"template": {"spec": {"containers": [{"image": "x"}]}}}});
    let no_key = call_with(
        &server,
        Method::PATCH,
        &format!("{deployments}/web"),
        smp,
        Some(&no_key),
    )
    .await;
    same(
        &no_key,
        "status-500-strategic-merge-patch-missing-merge-key.json",
    );

    let scale = format!("{deployments}/web/scale");
    let negative = json!({"spec": {"replicas": -1}});
    let negative = call_with(
        &server,
        Method::PATCH,
        &scale,
        "application/merge-patch+json",
        Some(&negative),
    )
    .await;
    same(&negative, "status-422-scale-negative-replicas.json");
    let stale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": "web", "namespace": "demo", "resourceVersion": "1"}, "spec": {"replicas": 2}});
    let stale = call(&server, Method::PUT, &scale, Some(&stale)).await;
    same(&stale, "status-409-scale-stale-rv.json");
}
