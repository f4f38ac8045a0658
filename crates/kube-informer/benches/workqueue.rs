//! Workqueue throughput: add + get + done with 1 and 8 workers, and `add_after` with 100k
//! items waiting on the timer.
//!
//! `cargo bench --bench workqueue`

use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use kube_informer::workqueue::{DelayingQueue, Queue};

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

criterion_group!(benches, workqueue);
criterion_main!(benches);
