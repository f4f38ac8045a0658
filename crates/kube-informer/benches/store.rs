//! Store and index benchmarks at 100k cached pods.
//!
//! `cargo bench --bench store`

use std::{hint::black_box, sync::Arc};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kube_informer::{Indexers, NAMESPACE_INDEX, Store};

mod common;
use common::{by_node, pod, pods};

const N: usize = 100_000;

fn indexed_store(objs: &[Arc<Pod>]) -> Store<Pod> {
    let store = Store::new(Indexers::new().namespace().index("by-node", by_node));
    store.replace(objs.to_vec(), "1").unwrap();
    store
}

fn store(c: &mut Criterion) {
    // 100k pods in 10k namespaces: 10 per namespace, 10 per node.
    let objs = pods(N, N / 10);
    let store = indexed_store(&objs);

    let mut g = c.benchmark_group("store");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    g.bench_function("add_100k_indexed", |b| {
        b.iter_batched(
            || Store::new(Indexers::new().namespace().index("by-node", by_node)),
            |store| {
                for obj in &objs {
                    store.add(obj.clone()).unwrap();
                }
                store
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("replace_100k_indexed", |b| {
        b.iter(|| store.replace(objs.clone(), "2").unwrap())
    });
    g.bench_function("list_100k", |b| b.iter(|| black_box(store.list())));
    g.finish();

    let mut g = c.benchmark_group("store_at_100k");
    g.throughput(Throughput::Elements(1));
    let same_node = pod("ns-5", "pod-5", "node-0");
    g.bench_function("update_same_index_values", |b| {
        b.iter(|| store.update(same_node.clone()).unwrap())
    });
    let (a, b2) = (
        pod("ns-5", "pod-5", "node-0"),
        pod("ns-5", "pod-5", "node-1"),
    );
    let mut flip = false;
    g.bench_function("update_moving_buckets", |b| {
        b.iter(|| {
            flip = !flip;
            store
                .update(if flip { a.clone() } else { b2.clone() })
                .unwrap()
        })
    });
    g.bench_function("get_by_key", |b| {
        b.iter(|| black_box(store.get_by_key(black_box("ns-77/pod-50077"))))
    });
    g.bench_function("by_index_namespace_10_of_100k", |b| {
        b.iter(|| black_box(store.by_index(NAMESPACE_INDEX, black_box("ns-77")).unwrap()))
    });
    g.bench_function("by_index_node_10_of_100k", |b| {
        b.iter(|| black_box(store.by_index("by-node", black_box("node-77")).unwrap()))
    });
    g.bench_function("index_keys_node_10_of_100k", |b| {
        b.iter(|| black_box(store.index_keys("by-node", black_box("node-77")).unwrap()))
    });
    g.finish();

    // A large bucket: 100k pods in 100 namespaces, 1000 per namespace.
    let wide = indexed_store(&pods(N, 100));
    let mut g = c.benchmark_group("store_at_100k");
    g.throughput(Throughput::Elements(1000));
    g.bench_function("by_index_namespace_1000_of_100k", |b| {
        b.iter(|| black_box(wide.by_index(NAMESPACE_INDEX, black_box("ns-7")).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, store);
criterion_main!(benches);
