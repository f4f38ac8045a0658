//! Server-side Table output, as `kubectl get` asks for it (and `kubectl get -w`): the
//! real server's columns for the built-in types, one-row Tables in a watch.

use crate::common;

use common::{Lines, call, cm, server};
use fake_apiserver::ServerConfig;
use hyper::Method;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/demo/configmaps";
const PODS: &str = "/api/v1/namespaces/demo/pods";

fn pod(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
}

#[tokio::test]
async fn kubectl_get_gets_a_table() {
    let server = server(ServerConfig::default()).await;
    call(&server, Method::POST, PODS, Some(&pod("p"))).await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let table = |uri: String| {
        let server = &server;
        async move {
            let resp = common::call_accepting(server, &uri, accept).await;
            assert_eq!(resp.status, 200);
            resp.json()
        }
    };
    let list = table(PODS.to_owned()).await;
    assert_eq!(list["kind"], "Table");
    let columns: Vec<&str> = list["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        &columns[..5],
        ["Name", "Ready", "Status", "Restarts", "Age"],
        "the real server's first five"
    );
    let cells = &list["rows"][0]["cells"];
    assert_eq!(
        (&cells[0], &cells[1], &cells[2], &cells[3]),
        (&json!("p"), &json!("0/1"), &json!("Pending"), &json!("0"))
    );
    assert_eq!(list["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert!(list["metadata"]["resourceVersion"].is_string());

    let one = table(format!("{PODS}/p?includeObject=Object")).await;
    assert_eq!(one["rows"][0]["object"]["kind"], "Pod");

    let namespaces = table("/api/v1/namespaces".to_owned()).await;
    let demo = namespaces["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cells"][0] == "demo")
        .unwrap();
    assert_eq!(demo["cells"][1], "Active");

    // A watch: one-row Tables, columns only in the first.
    let mut watch = Lines::open_accepting(&server, &format!("{CMS}?watch=1"), accept).await;
    for name in ["a", "b"] {
        call(&server, Method::POST, CMS, Some(&cm(name))).await;
    }
    let events = watch.events(2).await;
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert_eq!(events[0]["object"]["rows"][0]["cells"][0], "a");
    assert_eq!(
        events[0]["object"]["columnDefinitions"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(
        events[1]["object"]["columnDefinitions"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}
