//! kube-informer: one `SharedIndexInformer` with K counting handlers, listing as the peers
//! do (a consistent LIST paged by 500, no streaming list) so every client gets the same
//! bytes.

use std::{fmt::Debug, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::{Api, Resource};
use kube_informer::{
    informer::{HandlerFuncs, HandlerOptions, InformerOptions, SharedIndexInformer},
    reflector::ReflectorOptions,
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{Call, Counters, Job};

pub(super) async fn run_typed(job: &Job) -> Result<(Instant, Instant), String> {
    run::<Pod>(job, true).await
}

pub(super) async fn run_typed_unbounded(job: &Job) -> Result<(Instant, Instant), String> {
    run::<Pod>(job, false).await
}

pub(super) async fn run_compact(job: &Job) -> Result<(Instant, Instant), String> {
    run::<kube_informer::compact::Compact<Pod>>(job, true).await
}

pub(super) async fn run_compact_zstd(job: &Job) -> Result<(Instant, Instant), String> {
    run::<kube_informer::compact::Compact<Pod, kube_informer::compact::Zstd>>(job, true).await
}

/// `bounded`: the defaults (backpressure); else an unbounded queue and handlers that never
/// hold the informer back, as before issue #24.
async fn run<K>(job: &Job, bounded: bool) -> Result<(Instant, Instant), String>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let api: Api<K> = Api::all(super::client(&job.url)?);
    let mut handler_options = HandlerOptions::default();
    let mut options = InformerOptions::default();
    if !bounded {
        handler_options = handler_options.without_backpressure();
        options = options.queue_capacity(None);
    }
    let options = options.reflector(
        ReflectorOptions::default()
            .streaming_lists(false)
            .consistent_first_list(true)
            .page_size(500),
    );
    let informer = SharedIndexInformer::new(api, options);
    let counters = Counters::new(job.k);
    for handler in 0..job.k {
        let (a, u, d) = (counters.clone(), counters.clone(), counters.clone());
        let funcs = HandlerFuncs::<K>::new()
            .on_add(move |obj, initial| {
                std::hint::black_box(obj.meta().name.as_deref());
                a.hit(
                    handler,
                    if initial {
                        Call::Initial
                    } else {
                        Call::Applied
                    },
                );
            })
            .on_update(move |_, obj| {
                std::hint::black_box(obj.meta().name.as_deref());
                u.hit(handler, Call::Applied);
            })
            .on_delete(move |obj| {
                std::hint::black_box(&obj);
                d.hit(handler, Call::Deleted);
            });
        informer.add_event_handler(funcs, handler_options.clone());
    }
    let cancel = CancellationToken::new();
    let running = informer.clone();
    tokio::spawn(async move { running.run(cancel).await });
    while !informer.has_synced() {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let synced = Instant::now();
    counters.wait_all(job.n + job.m).await;
    let done = Instant::now();
    counters.check_exact(job).await?;
    Ok((synced, done))
}
