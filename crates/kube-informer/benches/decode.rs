//! One core decoding the same LIST of realistic pods (served by fake-apiserver, with their
//! managed fields) into `Pod`s: JSON (serde_json) whole and with managed fields scanned
//! past, protobuf by the serde path and by the generated decoder, each whole and with
//! managed fields skipped (the factory's default); and the same pods kept as `Compact<Pod>`
//! from each encoding. What `typed` and `compact` cost per object, with nothing else around
//! them.
//!
//! `cargo bench -p kube-informer --bench decode`

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fake_apiserver::{FakeApiServer, Gvr, ServerConfig, fixtures::realistic_pod};
use http_body_util::BodyExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ObjectList;
use kube_informer::{
    compact::Compact,
    protobuf::{ListBody, ProtoKind},
};

const PODS: usize = 2_000;

/// The LIST of `PODS` realistic pods, as JSON and as protobuf.
fn bodies() -> (Vec<u8>, Vec<u8>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let server = FakeApiServer::start(
            ServerConfig::default().namespaces(["team-0", "team-1", "team-2"]),
        )
        .await
        .unwrap();
        server
            .seed(&Gvr::core("pods"), (0..PODS).map(realistic_pod))
            .unwrap();
        let client = server.client().unwrap();
        let mut bodies = Vec::new();
        for accept in ["application/json", "application/vnd.kubernetes.protobuf"] {
            let request = http::Request::get("/api/v1/pods")
                .header("accept", accept)
                .body(Vec::new())
                .unwrap();
            let response = client
                .send(request.map(kube::client::Body::from))
                .await
                .unwrap();
            bodies.push(
                response
                    .into_body()
                    .collect()
                    .await
                    .unwrap()
                    .to_bytes()
                    .to_vec(),
            );
        }
        server.shutdown().await;
        let protobuf = bodies.pop().unwrap();
        (bodies.pop().unwrap(), protobuf)
    })
}

fn decode(c: &mut Criterion) {
    let (json, protobuf) = bodies();
    let kind = ProtoKind::of_type::<Pod>().unwrap();
    let mut group = c.benchmark_group("decode 2k pods");
    group.throughput(Throughput::Elements(PODS as u64));
    group.sample_size(20);
    group.bench_function("json serde", |b| {
        b.iter(|| {
            let list: ObjectList<Pod> = serde_json::from_slice(black_box(&json)).unwrap();
            assert_eq!(list.items.len(), PODS);
        })
    });
    // JSON with managedFields scanned past unbuilt, as factories read it by default (the
    // same path, through a LIST page: `ListPage::from_body` is the public way in).
    group.bench_function("json serde, no managedFields", |b| {
        b.iter(|| {
            let text = String::from_utf8(black_box(&json).clone()).unwrap();
            let page =
                kube_informer::list_watch::ListPage::<Pod>::from_body_without_managed_fields(text)
                    .unwrap();
            assert_eq!(page.into_items().unwrap().len(), PODS);
        })
    });
    for (name, kind) in [
        ("protobuf serde path", kind.without_generated_decoder()),
        ("protobuf generated", kind),
        (
            "protobuf serde path, no managedFields",
            kind.without_generated_decoder().without_managed_fields(),
        ),
        (
            "protobuf generated, no managedFields",
            kind.without_managed_fields(),
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let list = ListBody::parse(black_box(&protobuf), kind).unwrap();
                let pods: Vec<Pod> = list.items().unwrap();
                assert_eq!(pods.len(), PODS);
            })
        });
    }
    // Compact objects: JSON kept as it came (parsed once to check it), protobuf kept as its
    // message (checked on arrival without building anything).
    group.bench_function("compact json", |b| {
        b.iter(|| {
            let list: ObjectList<Compact<Pod>> = serde_json::from_slice(black_box(&json)).unwrap();
            assert_eq!(list.items.len(), PODS);
        })
    });
    // Compact objects as factories read JSON by default: each object's own managedFields cut
    // out of the kept text.
    group.bench_function("compact json, no managedFields", |b| {
        b.iter(|| {
            let text = String::from_utf8(black_box(&json).clone()).unwrap();
            let page =
                kube_informer::list_watch::ListPage::<Compact<Pod>>::from_body_without_managed_fields(
                    text,
                )
                .unwrap();
            assert_eq!(page.into_items().unwrap().len(), PODS);
        })
    });
    for (name, kind) in [
        ("compact protobuf", kind),
        (
            "compact protobuf, no managedFields",
            kind.without_managed_fields(),
        ),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                let list = ListBody::parse(black_box(&protobuf), kind).unwrap();
                let pods: Vec<Compact<Pod>> = list.items().unwrap();
                assert_eq!(pods.len(), PODS);
            })
        });
    }
    group.finish();

    // What a reconcile over a compact cache pays to read a whole object: `decode()` of each
    // of the 2k pods, kept as a factory keeps them (managedFields left out).
    let mut group = c.benchmark_group("compact decode() per object");
    group.throughput(Throughput::Elements(PODS as u64));
    group.sample_size(20);
    let text = String::from_utf8(json.clone()).unwrap();
    let from_json =
        kube_informer::list_watch::ListPage::<Compact<Pod>>::from_body_without_managed_fields(text)
            .unwrap()
            .into_items()
            .unwrap();
    let from_protobuf: Vec<Compact<Pod>> =
        ListBody::parse(&protobuf, kind.without_managed_fields())
            .unwrap()
            .items()
            .unwrap();
    for (name, pods) in [("json", &from_json), ("protobuf", &from_protobuf)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                for pod in black_box(pods) {
                    black_box(pod.decode().unwrap());
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
