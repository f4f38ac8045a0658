//! Push + pop throughput of both FIFOs.
//!
//! `cargo bench --bench fifo`

use std::{convert::Infallible, sync::Arc};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use kube_informer::{
    Store,
    fifo::{DeltaFifo, DeltaQueue, DeltaSink, KnownObjects, ProcessError, RealFifo},
};

mod common;
use common::pods;

const N: usize = 10_000;

fn ok() -> Result<(), ProcessError<Infallible>> {
    Ok(())
}

/// Pushes every object (as adds, then as updates), then pops until empty.
async fn push_then_pop<Q: DeltaQueue<Pod>>(q: &Q, objs: &[Arc<Pod>]) -> usize {
    for obj in objs {
        q.add(obj.clone()).unwrap();
    }
    for obj in objs {
        q.update(obj.clone()).unwrap();
    }
    let mut deltas = 0;
    while !q.is_empty() {
        q.pop(|d, _| {
            deltas += d.len();
            ok()
        })
        .await
        .unwrap();
    }
    deltas
}

/// Alternates one push and one pop: the steady state of a watch.
async fn interleaved<Q: DeltaQueue<Pod>>(q: &Q, objs: &[Arc<Pod>]) {
    for obj in objs {
        q.update(obj.clone()).unwrap();
        q.pop(|_, _| ok()).await.unwrap();
    }
}

fn fifo(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let objs = pods(N, 100);
    let known = || -> Arc<dyn KnownObjects<Pod>> { Arc::new(Store::<Pod>::default()) };

    let mut g = c.benchmark_group("fifo_push_then_pop");
    g.throughput(Throughput::Elements(2 * N as u64));
    g.bench_function("real_fifo", |b| {
        b.iter_batched(
            || RealFifo::new(known()),
            |q| rt.block_on(push_then_pop(&q, &objs)),
            BatchSize::PerIteration,
        )
    });
    g.bench_function("delta_fifo", |b| {
        b.iter_batched(
            || DeltaFifo::new(Some(known())),
            |q| rt.block_on(push_then_pop(&q, &objs)),
            BatchSize::PerIteration,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("fifo_interleaved");
    g.throughput(Throughput::Elements(N as u64));
    let real = RealFifo::new(known());
    g.bench_function("real_fifo", |b| {
        b.iter(|| rt.block_on(interleaved(&real, &objs)))
    });
    let delta = DeltaFifo::new(Some(known()));
    g.bench_function("delta_fifo", |b| {
        b.iter(|| rt.block_on(interleaved(&delta, &objs)))
    });
    g.finish();

    let mut g = c.benchmark_group("fifo_replace");
    g.sample_size(10);
    let big = pods(100_000, 1000);
    g.throughput(Throughput::Elements(big.len() as u64));
    for real in [true, false] {
        let name = if real {
            "real_fifo_100k"
        } else {
            "delta_fifo_100k"
        };
        g.bench_function(name, |b| {
            b.iter_batched(
                || {
                    // A populated cache, half of which disappears in the relist.
                    let store = Store::<Pod>::default();
                    store.replace(big.clone(), "1").unwrap();
                    (store, big[..big.len() / 2].to_vec())
                },
                |(store, list)| {
                    if real {
                        let q = RealFifo::new(Arc::new(store));
                        q.replace(list, "1").unwrap();
                        q.len()
                    } else {
                        let q = DeltaFifo::new(Some(Arc::new(store)));
                        q.replace(list, "1").unwrap();
                        q.len()
                    }
                },
                BatchSize::PerIteration,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, fifo);
criterion_main!(benches);
