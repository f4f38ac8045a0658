//! KEP-5866 hash conformance (issue #57): on kube-apiserver 1.36 with the
//! `ShardedListAndWatch` gate and on fake-apiserver, 1,000 ConfigMaps listed by quarters of
//! the uid hash space: each quarter holds exactly the objects whose FNV-1a 64 hash of the
//! uid (computed here) falls in it, the quarters cover the collection, the server echoes
//! the selector in `shardInfo` as the fake does, and a malformed selector gets the same
//! answer from both. Without the gate both ignore the selector: every object, no
//! `shardInfo` (what a client must not mistake for a filtered answer).
//!
//! Then the client's half: factory informers given a quarter each hold exactly it, through
//! LISTs and watches, with the gate and without it (the reflector drops what an ignoring
//! server sends, and counts it).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use e2e::{Backend, BackendOptions, both, config_map, ensure_namespace, eventually};
use futures_util::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube_informer::{
    FactoryOptions, InformerSpec, SharedInformerFactory,
    list_watch::{Selectors, ShardField, ShardSelector},
    metrics::Metrics,
    reflector::ReflectorOptions,
};
use prometheus_client::{encoding::text::encode, registry::Registry};
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

const SHARED: &str = "informer-shards";

/// Quarter `q` of the uid space, as informers take it.
fn quarter(q: u128) -> ShardSelector {
    ShardSelector::new(ShardField::Uid, q << 62..(q + 1) << 62).unwrap()
}

/// `metric`'s value per `name` label in `text` (Prometheus text format).
fn per_name(text: &str, metric: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(metric)?.strip_prefix("{name=\"")?;
            let (name, value) = rest.split_once("\"} ")?;
            Some((name.to_owned(), value.parse().ok()?))
        })
        .collect()
}

/// Four informers of one factory, each a quarter of the uid space (two over protobuf, one
/// over JSON, one metadata-only), while ConfigMaps are created and deleted: each cache
/// holds exactly its quarter — the objects whose FNV-1a 64 hash of the uid, computed
/// here, falls in it — and together they hold everything. With the gate, nothing reaches
/// the client outside its quarter and the LISTs of built-in kinds confirm the selector
/// (metadata-only ones, which 1.36 filters without saying so, do not); without it, the
/// reflectors drop what the server sent and say so in the metric. Through LISTs, or
/// streaming lists (which nothing confirms).
async fn informers_hold_exactly_their_quarter(backend: Backend, gate: bool, streaming: bool) {
    let client = backend.client();
    ensure_namespace(&client, SHARED).await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), SHARED);
    let create = |range: std::ops::Range<usize>| {
        let api = api.clone();
        stream::iter(range)
            .map(move |i| {
                let api = api.clone();
                async move {
                    let cm = config_map(&format!("cm-{i}"), "v");
                    api.create(&PostParams::default(), &cm).await.unwrap();
                }
            })
            .buffer_unordered(16)
            .collect::<Vec<()>>()
    };
    create(0..200).await;

    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let options = FactoryOptions::default()
        .selectors(Selectors::default().in_namespace(SHARED))
        .reflector(ReflectorOptions::default().streaming_lists(streaming))
        .metrics(&metrics);
    let factory = SharedInformerFactory::new(backend.informer_client(), options);
    let spec = |q: u128| {
        let selectors = Selectors::default().in_namespace(SHARED).shards(quarter(q));
        InformerSpec::<ConfigMap>::new().selectors(selectors)
    };
    let typed = [
        factory.informer_with(spec(0)),
        factory.informer_with(spec(1)),
        factory.informer_with(spec(2).protobuf(false)),
    ];
    let metadata = factory.metadata_informer_with::<ConfigMap>(
        InformerSpec::new().selectors(Selectors::default().in_namespace(SHARED).shards(quarter(3))),
    );
    factory.start();
    factory
        .wait_for_sync(Duration::from_secs(60))
        .await
        .unwrap();

    create(200..300).await;
    for i in 0..40 {
        api.delete(&format!("cm-{i}"), &Default::default())
            .await
            .unwrap();
    }
    let live: Vec<String> = api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|cm| cm.metadata.uid.unwrap())
        .collect();
    assert_eq!(live.len(), 260);
    let expected = |q: u128| -> BTreeSet<String> {
        live.iter()
            .filter(|uid| (q << 62..(q + 1) << 62).contains(&u128::from(fnv1a(uid))))
            .cloned()
            .collect()
    };
    let held = |q: usize| -> BTreeSet<String> {
        let uids = |meta: &kube::api::ObjectMeta| meta.uid.clone().unwrap();
        match q {
            3 => metadata
                .store()
                .list()
                .iter()
                .map(|o| uids(&o.metadata))
                .collect(),
            q => typed[q]
                .store()
                .list()
                .iter()
                .map(|o| uids(&o.metadata))
                .collect(),
        }
    };
    eventually("each informer holds exactly its quarter", || {
        (0..4).all(|q| held(q) == expected(q as u128))
    })
    .await;
    let all: usize = (0..4).map(|q| held(q).len()).sum();
    assert_eq!(
        all,
        live.len(),
        "{}: the quarters hold everything",
        backend.name()
    );

    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    let filtered = per_name(&text, "reflector_shard_filtered_objects_total");
    let unconfirmed = per_name(&text, "reflector_shard_unconfirmed_total");
    let typed_name = format!("ConfigMap in {SHARED}");
    let metadata_name = format!("ConfigMap metadata in {SHARED}");
    let of = |m: &BTreeMap<String, f64>, name: &str| m.get(name).copied().unwrap_or(0.0);
    let name = backend.name();
    if gate {
        assert_eq!(filtered.values().sum::<f64>(), 0.0, "{name}: {text}");
        // LISTs of a built-in kind confirm; streaming lists and metadata-only LISTs do not.
        let typed_unconfirmed = of(&unconfirmed, &typed_name);
        assert_eq!(typed_unconfirmed > 0.0, streaming, "{name}: {text}");
        assert!(of(&unconfirmed, &metadata_name) > 0.0, "{name}: {text}");
    } else {
        // Each informer was sent all 200, three quarters of them outside its share.
        assert!(of(&filtered, &typed_name) >= 300.0, "{name}: {text}");
        assert!(of(&filtered, &metadata_name) >= 100.0, "{name}: {text}");
        assert!(of(&unconfirmed, &typed_name) >= 3.0, "{name}: {text}");
    }
    factory.shutdown().await;
}

async fn informers_listing_hold_exactly_their_quarter_with_the_gate(backend: Backend) {
    informers_hold_exactly_their_quarter(backend, true, false).await;
}

async fn informers_streaming_hold_exactly_their_quarter_with_the_gate(backend: Backend) {
    informers_hold_exactly_their_quarter(backend, true, true).await;
}

async fn informers_listing_hold_exactly_their_quarter_without_the_gate(backend: Backend) {
    informers_hold_exactly_their_quarter(backend, false, false).await;
}

async fn informers_streaming_hold_exactly_their_quarter_without_the_gate(backend: Backend) {
    informers_hold_exactly_their_quarter(backend, false, true).await;
}

both!(
    informers_listing_hold_exactly_their_quarter_with_the_gate,
    BackendOptions {
        feature_gates: vec!["ShardedListAndWatch"],
        ..BackendOptions::default()
    }
);
both!(
    informers_streaming_hold_exactly_their_quarter_with_the_gate,
    BackendOptions {
        feature_gates: vec!["ShardedListAndWatch"],
        ..BackendOptions::default()
    }
);
both!(informers_listing_hold_exactly_their_quarter_without_the_gate);
both!(informers_streaming_hold_exactly_their_quarter_without_the_gate);
