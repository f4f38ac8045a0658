//! `shardSelector` (KEP-5866) as kube-apiserver 1.36 with the `ShardedListAndWatch` gate
//! serves it: LISTs and WATCHes give only the objects whose FNV-1a 64 hash of the uid (or
//! namespace) falls in the ranges, lists echo the normalised selector in `shardInfo`, a
//! malformed one is a bare 500, and a server without the gate ignores it.

use crate::common;

use common::*;
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig};
use serde_json::{Value, json};

/// FNV-1a 64, written again here so the test does not trust the server's copy.
fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// `text` as a query parameter's value.
fn encoded(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

const HALF: &str = "0x8000000000000000";
const ZERO: &str = "0x0000000000000000";
const TOP: &str = "0x10000000000000000";

fn range(field: &str, start: &str, end: &str) -> String {
    format!("shardRange(object.metadata.{field}, '{start}', '{end}')")
}

async fn seeded(config: ServerConfig) -> FakeApiServer {
    let server = server(config.namespaces(["a", "b"])).await;
    for ns in ["a", "b"] {
        for i in 0..100 {
            let mut obj = cm(&format!("cm-{i}"));
            obj["metadata"]["namespace"] = json!(ns);
            server
                .create(&Gvr::core("configmaps"), Some(ns), obj)
                .unwrap();
        }
    }
    server
}

async fn list(server: &FakeApiServer, selector: &str) -> Value {
    let uri = format!("/api/v1/configmaps?shardSelector={}", encoded(selector));
    let resp = get(server, &uri).await;
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
    resp.json()
}

fn uids(list: &Value) -> Vec<String> {
    let items = list["items"].as_array().unwrap();
    let uid = |o: &Value| o["metadata"]["uid"].as_str().unwrap().to_owned();
    items.iter().map(uid).collect()
}

#[tokio::test]
async fn uid_halves_split_the_collection_exactly_and_echo_their_selector() {
    let server = seeded(ServerConfig::default()).await;
    let everything = uids(&list(&server, &range("uid", ZERO, TOP)).await);
    assert_eq!(everything.len(), 200);
    let low_selector = range("uid", ZERO, HALF);
    let low = list(&server, &format!("  {low_selector}  ")).await;
    assert_eq!(
        low["metadata"]["shardInfo"]["selector"], low_selector,
        "echoed, normalised"
    );
    let high = uids(&list(&server, &range("uid", HALF, TOP)).await);
    let low = uids(&low);
    assert!(
        low.iter().all(|u| fnv1a(u) < 1 << 63),
        "the low half's hashes"
    );
    assert!(
        high.iter().all(|u| fnv1a(u) >= 1 << 63),
        "the high half's hashes"
    );
    assert_eq!(low.len() + high.len(), 200, "disjoint, and everything");
    assert!(!low.is_empty() && !high.is_empty());
    // Two ranges joined with `||` are their union.
    let both = format!(
        "{} || {}",
        range("uid", ZERO, HALF),
        range("uid", HALF, TOP)
    );
    assert_eq!(uids(&list(&server, &both).await).len(), 200);
}

#[tokio::test]
async fn a_namespace_range_keeps_a_namespace_whole() {
    let server = seeded(ServerConfig::default()).await;
    let h = fnv1a("a");
    let selector = range(
        "namespace",
        &format!("0x{h:016x}"),
        &format!("0x{:016x}", h + 1),
    );
    let items = list(&server, &selector).await;
    let namespaces: Vec<&str> = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces.len(), 100);
    assert!(namespaces.iter().all(|ns| *ns == "a"));
}

#[tokio::test]
async fn a_sharded_watch_gets_only_its_shards_events() {
    let server = seeded(ServerConfig::default()).await;
    let from = server.resource_version();
    let uri = format!(
        "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion={from}&shardSelector={}",
        encoded(&range("uid", ZERO, HALF))
    );
    let mut watch = Lines::open(&server, &uri).await;
    assert_eq!(watch.status, 200);
    let mut expected = Vec::new();
    for i in 0..40 {
        let mut obj = cm(&format!("new-{i}"));
        obj["metadata"]["namespace"] = json!("a");
        let created = server
            .create(&Gvr::core("configmaps"), Some("a"), obj)
            .unwrap();
        let uid = created["metadata"]["uid"].as_str().unwrap().to_owned();
        if fnv1a(&uid) < 1 << 63 {
            expected.push(uid);
        }
    }
    let events = watch.events(expected.len()).await;
    let got: Vec<String> = events
        .iter()
        .map(|e| e["object"]["metadata"]["uid"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        got, expected,
        "the low half's creations, in order, and no other"
    );
}

#[tokio::test]
async fn a_malformed_selector_is_a_bare_500_as_kube_apiserver_answers_it() {
    let server = seeded(ServerConfig::default()).await;
    let uri = format!(
        "/api/v1/configmaps?shardSelector={}",
        encoded("shardRange(object.metadata.uid, '0x0', '0x8000000000000000')")
    );
    let resp = get(&server, &uri).await;
    assert_eq!(resp.status, 500);
    let status = resp.json();
    assert_eq!(status["code"], 500);
    assert!(status.get("reason").is_none(), "{status}");
    assert_eq!(
        status["message"],
        "invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\" (did you mean \"0x0000000000000000\"?)"
    );
}

#[tokio::test]
async fn a_server_without_the_gate_ignores_the_selector() {
    let server = seeded(ServerConfig::default().shard_selectors(false)).await;
    let items = list(&server, &range("uid", ZERO, HALF)).await;
    assert_eq!(uids(&items).len(), 200, "everything");
    assert!(items["metadata"].get("shardInfo").is_none());
    // Not even parsed.
    let garbage = list(&server, "shardRange(").await;
    assert_eq!(uids(&garbage).len(), 200);
}

#[tokio::test]
async fn protobuf_lists_carry_the_shard_info_too() {
    let server = seeded(ServerConfig::default()).await;
    let selector = range("uid", ZERO, HALF);
    let uri = format!("/api/v1/configmaps?shardSelector={}", encoded(&selector));
    let resp = call_accepting(&server, &uri, "application/vnd.kubernetes.protobuf").await;
    assert_eq!(resp.status, 200);
    let body = &resp.body[..];
    assert!(
        body.windows(selector.len())
            .any(|w| w == selector.as_bytes()),
        "ListMeta.shardInfo.selector in the message"
    );
}
