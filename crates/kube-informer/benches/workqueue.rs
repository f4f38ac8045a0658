//! Workqueue throughput: add + get + done with 1 and 8 workers, `add_after` with 100k
//! items waiting on the timer, and fairness between groups on and off at 1, 8 and 64
//! workers (100k `namespace/name` keys over 100 namespaces).
//!
//! `cargo bench --bench workqueue`

use std::{borrow::Cow, sync::Arc, time::Duration};

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use kube_informer::workqueue::{DelayingQueue, Queue, QueueConfig};

const ITEMS: u32 = 100_000;

/// `workers` tasks drain `ITEMS` distinct items added by the caller.
async fn add_get_done(workers: usize) {
    let q: Queue<u32> = Queue::default();
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move {
                let mut n = 0u32;
                while let Some(item) = q.get().await {
                    drop(item); // done
                    n += 1;
                }
                n
            })
        })
        .collect();
    for i in 0..ITEMS {
        q.add(i);
    }
    q.shut_down_with_drain().await;
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    assert_eq!(total, ITEMS);
}

/// `workers` tasks drain `keys`, added by the caller, from a queue fair by namespace or not.
async fn fair_add_get_done(keys: &[Arc<str>], workers: usize, fair: bool) {
    let mut config = QueueConfig::default();
    if fair {
        config =
            config.fair_by(|key: &Arc<str>| Cow::Borrowed(key.split('/').next().unwrap_or("")));
    }
    let q: Queue<Arc<str>> = Queue::new(config);
    let handles: Vec<_> = (0..workers)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move {
                let mut n = 0usize;
                while let Some(item) = q.get().await {
                    drop(item);
                    n += 1;
                }
                n
            })
        })
        .collect();
    for key in keys {
        q.add(key.clone());
    }
    q.shut_down_with_drain().await;
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    assert_eq!(total, keys.len());
}

fn fairness(c: &mut Criterion) {
    let keys: Vec<Arc<str>> = (0..ITEMS)
        .map(|i| Arc::from(format!("ns-{}/object-{i}", i % 100)))
        .collect();
    let mut g = c.benchmark_group("workqueue_fairness");
    g.throughput(Throughput::Elements(u64::from(ITEMS)));
    g.sample_size(20);
    let single = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    for workers in [1, 8, 64] {
        let runtime = if workers == 1 { &single } else { &multi };
        for (fair, label) in [(false, "off"), (true, "on")] {
            g.bench_function(format!("{workers}_workers_fair_{label}"), |b| {
                b.iter(|| runtime.block_on(fair_add_get_done(&keys, workers, fair)))
            });
        }
    }
    g.finish();
}

fn workqueue(c: &mut Criterion) {
    let mut g = c.benchmark_group("workqueue_add_get_done");
    g.throughput(Throughput::Elements(u64::from(ITEMS)));
    g.sample_size(20);
    let single = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    g.bench_function("1_worker", |b| b.iter(|| single.block_on(add_get_done(1))));
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    g.bench_function("8_workers_2_threads", |b| {
        b.iter(|| multi.block_on(add_get_done(8)))
    });
    g.finish();

    let mut g = c.benchmark_group("delaying_queue");
    g.throughput(Throughput::Elements(u64::from(ITEMS)));
    g.sample_size(20);
    g.bench_function("add_after_100k_waiting", |b| {
        b.iter_batched(
            DelayingQueue::<u32>::default,
            |q| {
                single.block_on(async {
                    for i in 0..ITEMS {
                        q.add_after(i, Duration::from_secs(60 + u64::from(i % 600)));
                    }
                });
                assert_eq!(q.waiting(), ITEMS as usize);
                q
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, workqueue, fairness);
criterion_main!(benches);
