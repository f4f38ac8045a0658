//! kube-informer: one `SharedIndexInformer` with K counting handlers, listing as the peers
//! do (a consistent LIST paged by 500, no streaming list) so every client gets the same
//! bytes.

use std::{fmt::Debug, time::Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube_informer::{
    compact::Compact,
    factory::{FactoryOptions, SharedInformerFactory},
    informer::{HandlerFuncs, HandlerOptions, InformerOptions, SharedIndexInformer},
    list_watch::ClientListerWatcher,
    reflector::ReflectorOptions,
};
use kube_informer_runtime::controller::Watchable;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::{Call, Counters, Job};

/// What the informer asks the server for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wire {
    Json,
    /// Protobuf, whole objects.
    Protobuf,
    /// Protobuf, `managedFields` skipped while decoding (`strip_managed_fields`).
    ProtobufStripped,
}

pub(super) async fn run_typed<K: Watchable>(job: &Job) -> Result<(Instant, Instant), String> {
    run::<K>(job, true, Wire::Json).await
}

pub(super) async fn run_typed_protobuf(job: &Job) -> Result<(Instant, Instant), String> {
    run::<Pod>(job, true, Wire::Protobuf).await
}

pub(super) async fn run_typed_protobuf_stripped(job: &Job) -> Result<(Instant, Instant), String> {
    run::<Pod>(job, true, Wire::ProtobufStripped).await
}

pub(super) async fn run_typed_unbounded<K: Watchable>(
    job: &Job,
) -> Result<(Instant, Instant), String> {
    run::<K>(job, false, Wire::Json).await
}

pub(super) async fn run_compact<K: Watchable>(job: &Job) -> Result<(Instant, Instant), String> {
    run::<Compact<K>>(job, true, Wire::Json).await
}

pub(super) async fn run_compact_protobuf(job: &Job) -> Result<(Instant, Instant), String> {
    run::<Compact<Pod>>(job, true, Wire::Protobuf).await
}

pub(super) async fn run_compact_protobuf_stripped(job: &Job) -> Result<(Instant, Instant), String> {
    run::<Compact<Pod>>(job, true, Wire::ProtobufStripped).await
}

pub(super) async fn run_compact_zstd<K: Watchable>(
    job: &Job,
) -> Result<(Instant, Instant), String> {
    run::<Compact<K, kube_informer::compact::Zstd>>(job, true, Wire::Json).await
}

/// `bounded`: the defaults (backpressure); else an unbounded queue and handlers that never
/// hold the informer back, as before issue #24.
async fn run<K>(job: &Job, bounded: bool, wire: Wire) -> Result<(Instant, Instant), String>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let mut source = ClientListerWatcher::<K>::new(super::client(&job.url)?, None, &())
        .protobuf(wire != Wire::Json);
    if wire == Wire::ProtobufStripped {
        source = source.without_managed_fields();
    }
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
    let informer = SharedIndexInformer::new(source, options);
    let cancel = CancellationToken::new();
    let running = informer.clone();
    count(job, &informer, handler_options, || {
        tokio::spawn(async move { running.run(cancel).await });
    })
    .await
}

/// What a user gets untuned: a factory's informer with `FactoryOptions::default()`
/// (protobuf, a streaming list, managedFields left out, generated decoders).
pub(super) async fn run_typed_defaults<K: Watchable>(
    job: &Job,
) -> Result<(Instant, Instant), String> {
    run_factory::<K>(job, FactoryOptions::default()).await
}

/// The same with a paged LIST (a consistent one, pages of 500, as the peers list) in place
/// of the streaming list: the two first-sync paths side by side.
pub(super) async fn run_typed_defaults_paged<K: Watchable>(
    job: &Job,
) -> Result<(Instant, Instant), String> {
    let paged = ReflectorOptions::default()
        .streaming_lists(false)
        .consistent_first_list(true)
        .page_size(500);
    run_factory::<K>(job, FactoryOptions::default().reflector(paged)).await
}

async fn run_factory<K: Watchable>(
    job: &Job,
    options: FactoryOptions,
) -> Result<(Instant, Instant), String> {
    let factory = SharedInformerFactory::new(super::client(&job.url)?, options);
    let informer = factory.informer::<K>();
    count(job, &informer, HandlerOptions::default(), || {
        factory.start()
    })
    .await
}

/// Adds `job.k` counting handlers to `informer`, starts it, and waits for every event.
async fn count<K>(
    job: &Job,
    informer: &SharedIndexInformer<K>,
    handler_options: HandlerOptions,
    start: impl FnOnce(),
) -> Result<(Instant, Instant), String>
where
    K: Resource<DynamicType = ()> + Clone + Debug + Send + Sync + 'static,
{
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
    start();
    while !informer.has_synced() {
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    let synced = Instant::now();
    counters.wait_all(job.n + job.m).await;
    let done = Instant::now();
    counters.check_exact(job).await?;
    Ok((synced, done))
}
