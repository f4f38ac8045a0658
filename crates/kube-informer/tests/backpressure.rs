//! The bounded pipeline: a source faster than the informer's consumers is read only as fast
//! as they take its events, a handler that makes no room within its grace period is set
//! aside (the others go on) while one that keeps making room paces the informer however
//! long the load lasts, and nothing is lost or reordered on the way.
//!
//! The clock is paused: a `sleep` returns once every task is idle, so each verdict is taken
//! on a settled pipeline and only counts decide it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, ObjectList, WatchParams};
use kube_informer::{
    informer::{HandlerFuncs, HandlerOptions, InformerOptions, Notification, SharedIndexInformer},
    list_watch::{ListerWatcher, MemorySource, WatchStream},
    reflector::ReflectorOptions,
};
use tokio_util::sync::CancellationToken;

/// A [`MemorySource`] that counts the watch events the reflector has taken from it.
#[derive(Clone)]
struct Counted {
    source: MemorySource<ConfigMap>,
    pulled: Arc<AtomicUsize>,
}

impl ListerWatcher<ConfigMap> for Counted {
    async fn list(&self, params: &ListParams) -> Result<ObjectList<ConfigMap>, kube::Error> {
        self.source.list(params).await
    }

    async fn watch(
        &self,
        params: &WatchParams,
        resource_version: &str,
    ) -> Result<WatchStream<ConfigMap>, kube::Error> {
        let pulled = self.pulled.clone();
        let stream = self.source.watch(params, resource_version).await?;
        Ok(stream
            .inspect(move |_| {
                pulled.fetch_add(1, Ordering::SeqCst);
            })
            .boxed())
    }
}

fn cm(name: String) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.namespace = Some("demo".into());
    cm.metadata.name = Some(name);
    cm
}

/// Lets every task run until all are idle (the paused clock moves only then).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// A source that counts what the reflector took from it, and an informer over it with a
/// queue of [`CAPACITY`]; handlers are added before [`Rig::start`].
struct Rig {
    source: MemorySource<ConfigMap>,
    counted: Counted,
    informer: SharedIndexInformer<ConfigMap>,
}

impl Rig {
    fn new() -> Self {
        let source = MemorySource::default();
        let counted = Counted {
            source: source.clone(),
            pulled: Arc::new(AtomicUsize::new(0)),
        };
        let options = InformerOptions::default()
            .queue_capacity(Some(CAPACITY))
            .reflector(ReflectorOptions::default().streaming_lists(false));
        let informer = SharedIndexInformer::new(counted.clone(), options);
        Self {
            source,
            counted,
            informer,
        }
    }

    /// Runs the informer until it has synced; cancel the token and await the task to stop.
    async fn start(&self) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let cancel = CancellationToken::new();
        let run = tokio::spawn({
            let (informer, cancel) = (self.informer.clone(), cancel.clone());
            async move { informer.run(cancel).await }
        });
        self.informer
            .wait_for_sync(Duration::from_secs(10))
            .await
            .unwrap();
        (cancel, run)
    }

    /// [`EVENTS`] new objects at the source.
    fn add_events(&self) {
        for i in 0..EVENTS {
            self.source.add(cm(format!("cm-{i:04}")));
        }
    }
}

const EVENTS: usize = 2000;
const CAPACITY: usize = 10;
const LIMIT: usize = 10;

#[tokio::test(start_paused = true)]
async fn a_stalled_consumer_stops_the_reads_and_one_set_aside_frees_the_others() {
    let rig = Rig::new();
    let (source, counted, informer) = (&rig.source, &rig.counted, &rig.informer);
    // A consumer that is not reading: a stream nobody polls yet.
    let grace = Duration::from_secs(60);
    let mut stalled = informer.stream(
        HandlerOptions::default()
            .name("stalled")
            .backpressure(LIMIT, grace),
    );
    let counted_calls = Arc::new(AtomicUsize::new(0));
    let calls = counted_calls.clone();
    informer.add_event_handler(
        HandlerFuncs::new().on_add(move |_, _| {
            calls.fetch_add(1, Ordering::SeqCst);
        }),
        HandlerOptions::default().name("counting"),
    );
    let (cancel, run) = rig.start().await;

    rig.add_events();
    settle().await;
    // Held back: the stalled stream holds at most its limit and one batch, the queue its
    // capacity, the reflector one event; nothing else was read from the source.
    let pulled = counted.pulled.load(Ordering::SeqCst);
    let bound = LIMIT + (CAPACITY + 1) + (CAPACITY + 1) + 1;
    assert!(
        pulled <= bound,
        "{pulled} events read from the source while the consumer stalled (bound {bound})"
    );
    let registration = stalled.registration();
    assert!(registration.backlog() >= LIMIT);
    assert!(!registration.is_set_aside());
    assert!(counted_calls.load(Ordering::SeqCst) <= pulled);

    // Past the grace period the stalled stream is set aside: the others get everything.
    tokio::time::sleep(grace).await;
    assert!(stalled.registration().is_set_aside());
    assert_eq!(counted.pulled.load(Ordering::SeqCst), EVENTS);
    assert_eq!(counted_calls.load(Ordering::SeqCst), EVENTS);
    assert_eq!(informer.store().len(), EVENTS);
    assert_eq!(
        stalled.registration().backlog(),
        EVENTS,
        "set aside, it keeps every notification"
    );

    // The stalled consumer reads at last: everything, in order, nothing lost.
    for i in 0..EVENTS {
        match stalled.next().await {
            Some(Notification::Add { object, .. }) => {
                assert_eq!(
                    object.metadata.name.as_deref(),
                    Some(&*format!("cm-{i:04}"))
                );
            }
            other => panic!("notification {i}: {other:?}"),
        }
    }
    // Caught up: held to its limit again from the next batch on.
    source.add(cm("after".into()));
    settle().await;
    assert!(!stalled.registration().is_set_aside());
    assert!(matches!(
        stalled.next().await,
        Some(Notification::Add { .. })
    ));

    cancel.cancel();
    run.await.unwrap();
}

/// Under a load that never lets up, a consumer that is slower than the source but keeps
/// making room paces the informer for as long as the load lasts — twenty times its grace
/// period here — and is never set aside: its backlog stays within its limit and one batch.
/// (A rule that counted the time spent above half the limit set such a consumer aside
/// after one grace period, and its backlog then grew with everything the source had.)
#[tokio::test(start_paused = true)]
async fn a_slow_consumer_that_keeps_up_paces_the_informer_and_is_never_set_aside() {
    let rig = Rig::new();
    let (counted, informer) = (&rig.counted, &rig.informer);
    let grace = Duration::from_secs(1);
    let mut slow = informer.stream(
        HandlerOptions::default()
            .name("slow")
            .backpressure(LIMIT, grace),
    );
    let (cancel, run) = rig.start().await;
    rig.add_events();
    // 10 ms a notification: 2000 events take 20 s, the grace is 1 s.
    let started = tokio::time::Instant::now();
    let mut worst_backlog = 0;
    for i in 0..EVENTS {
        worst_backlog = worst_backlog.max(slow.registration().backlog());
        assert!(
            !slow.registration().is_set_aside(),
            "set aside at event {i}"
        );
        let read = counted.pulled.load(Ordering::SeqCst);
        assert!(
            read <= i + LIMIT + 3 * (CAPACITY + 1),
            "{read} events read from the source when the consumer had taken {i}"
        );
        match slow.next().await {
            Some(Notification::Add { object, .. }) => {
                assert_eq!(
                    object.metadata.name.as_deref(),
                    Some(&*format!("cm-{i:04}"))
                );
            }
            other => panic!("notification {i}: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        started.elapsed() >= 20 * grace,
        "the load lasted {:?}",
        started.elapsed()
    );
    assert!(
        worst_backlog <= LIMIT + CAPACITY + 1,
        "the backlog reached {worst_backlog}"
    );
    cancel.cancel();
    run.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn without_backpressure_a_stalled_consumer_holds_nobody_back() {
    let rig = Rig::new();
    let (counted, informer) = (&rig.counted, &rig.informer);
    let stalled = informer.stream(HandlerOptions::default().without_backpressure());
    let (cancel, run) = rig.start().await;
    rig.add_events();
    settle().await;
    assert_eq!(counted.pulled.load(Ordering::SeqCst), EVENTS);
    assert_eq!(stalled.registration().backlog(), EVENTS);
    assert!(!stalled.registration().is_set_aside());
    cancel.cancel();
    run.await.unwrap();
}

/// A queue with no consumer at all: the reflector reads up to the capacity and stops.
#[tokio::test(start_paused = true)]
async fn the_reflector_reads_no_further_than_the_queue_takes() {
    use kube_informer::{
        Store,
        fifo::{DeltaQueue, DeltaSink, RealFifo},
        reflector::Reflector,
    };
    let source = MemorySource::default();
    let counted = Counted {
        source: source.clone(),
        pulled: Arc::new(AtomicUsize::new(0)),
    };
    let fifo = Arc::new(RealFifo::new(Arc::new(Store::<ConfigMap>::default())).with_capacity(25));
    let sink: Arc<dyn DeltaSink<ConfigMap>> = fifo.clone();
    let reflector = Arc::new(Reflector::new(
        counted.clone(),
        sink,
        ReflectorOptions::default().streaming_lists(false),
    ));
    let cancel = CancellationToken::new();
    let run = tokio::spawn({
        let (reflector, cancel) = (reflector.clone(), cancel.clone());
        async move { reflector.run(cancel).await }
    });
    settle().await; // listed (empty) and watching
    for i in 0..500 {
        source.add(cm(format!("cm-{i}")));
    }
    settle().await;
    assert_eq!(fifo.len(), 25, "the queue's capacity and nothing more");
    assert_eq!(counted.pulled.load(Ordering::SeqCst), 25);
    // A pop makes room for exactly what was taken.
    fifo.pop_batch(5, |_| Ok::<(), kube_informer::fifo::ProcessError<()>>(()))
        .await
        .unwrap();
    settle().await;
    assert_eq!(fifo.len(), 25);
    assert_eq!(counted.pulled.load(Ordering::SeqCst), 30);
    cancel.cancel();
    run.await.unwrap();
}
