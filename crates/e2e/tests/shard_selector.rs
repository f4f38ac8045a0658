//! KEP-5866 hash conformance (issue #57): on kube-apiserver 1.36 with the
//! `ShardedListAndWatch` gate and on fake-apiserver, 1,000 ConfigMaps listed by quarters of
//! the uid hash space: each quarter holds exactly the objects whose FNV-1a 64 hash of the
//! uid (computed here) falls in it, the quarters cover the collection, the server echoes
//! the selector in `shardInfo` as the fake does, and a malformed selector gets the same
//! answer from both. Without the gate both ignore the selector: every object, no
//! `shardInfo` (what a client must not mistake for a filtered answer).

use e2e::{Backend, BackendOptions, both, config_map, ensure_namespace};
use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::Value;

const NAMESPACE: &str = "shards";
const OBJECTS: usize = 1_000;

fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn bound(value: u128) -> String {
    format!("0x{value:016x}")
}

/// `text` as a query parameter's value.
fn encoded(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The raw answer to a LIST of the namespace's ConfigMaps with `selector`.
async fn list(client: &kube::Client, selector: &str) -> Result<Value, kube::Error> {
    let uri = format!(
        "/api/v1/namespaces/{NAMESPACE}/configmaps?shardSelector={}",
        encoded(selector)
    );
    let request = http::Request::get(uri).body(Vec::new()).expect("a request");
    client.request::<Value>(request).await
}

async fn quarters_hold_exactly_the_objects_whose_uid_hashes_fall_in_them(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, NAMESPACE).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let created: Vec<ConfigMap> = stream::iter(0..OBJECTS)
        .map(|i| {
            let api = api.clone();
            async move {
                let cm = config_map(&format!("cm-{i}"), "v");
                api.create(&PostParams::default(), &cm).await.unwrap()
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let uids: Vec<String> = created
        .iter()
        .map(|cm| cm.metadata.uid.clone().unwrap())
        .collect();
    let mut covered = 0;
    for quarter in 0..4u128 {
        let (start, end) = (quarter << 62, (quarter + 1) << 62);
        let selector = format!(
            "shardRange(object.metadata.uid, '{}', '{}')",
            bound(start),
            bound(end)
        );
        let answer = list(&client, &selector).await.unwrap();
        assert_eq!(
            answer["metadata"]["shardInfo"]["selector"],
            selector.as_str(),
            "{}: the selector echoed",
            backend.name()
        );
        let mut served: Vec<String> = answer["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["uid"].as_str().unwrap().to_owned())
            .collect();
        let mut expected: Vec<String> = uids
            .iter()
            .filter(|u| (start..end).contains(&u128::from(fnv1a(u))))
            .cloned()
            .collect();
        served.sort();
        expected.sort();
        assert_eq!(served, expected, "{}: quarter {quarter}", backend.name());
        covered += served.len();
    }
    assert_eq!(
        covered,
        OBJECTS,
        "{}: the quarters cover it",
        backend.name()
    );

    let malformed = "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')";
    match list(&client, malformed).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 500, "{}: {status:?}", backend.name());
            assert!(
                status.message.starts_with(
                    "invalid shard selector: hexStart must be a 0x-prefixed 16-digit hex value, got \"0x0\""
                ),
                "{}: {}",
                backend.name(),
                status.message
            );
        }
        other => panic!("{}: {other:?}", backend.name()),
    }
}

both!(
    quarters_hold_exactly_the_objects_whose_uid_hashes_fall_in_them,
    BackendOptions {
        feature_gates: vec!["ShardedListAndWatch"],
        ..BackendOptions::default()
    }
);

async fn without_the_gate_the_selector_is_ignored(backend: Backend) {
    let client = backend.client();
    ensure_namespace(&client, NAMESPACE).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    for i in 0..20 {
        let cm = config_map(&format!("cm-{i}"), "v");
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
    let selector = "shardRange(object.metadata.uid, '0x0000000000000000', '0x0000000000000001')";
    let answer = list(&client, selector).await.unwrap();
    assert_eq!(
        answer["items"].as_array().unwrap().len(),
        20,
        "{}",
        backend.name()
    );
    assert!(
        answer["metadata"].get("shardInfo").is_none(),
        "{}: {}",
        backend.name(),
        answer["metadata"]
    );
}

both!(without_the_gate_the_selector_is_ignored);
