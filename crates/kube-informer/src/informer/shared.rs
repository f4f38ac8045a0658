//! [`SharedIndexInformer`]: one reflector, one FIFO and one indexed cache, shared by any
//! number of handlers.

use std::{
    convert::Infallible,
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures_util::future::BoxFuture;
use kube::Resource;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::{
    ResourceEventHandler, handle_batch,
    listener::Listener,
    processor::{Processor, resync_period},
};
use crate::{
    DeltaFifo, IndexError, Indexers, KeyError, Lister, RealFifo, Store,
    fifo::{DeltaQueue, DeltaSink, PopError, ProcessError},
    list_watch::ListerWatcher,
    reflector::{Reflector, ReflectorOptions},
};

/// Which queue sits between the reflector and the informer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueKind {
    /// Every event in arrival order (client-go ≥ 1.36's default).
    #[default]
    RealFifo,
    /// One entry per key with its pending deltas (the classic design).
    DeltaFifo,
}

/// Settings of a [`SharedIndexInformer`].
#[derive(Debug, Clone, Default)]
pub struct InformerOptions {
    pub(crate) queue: QueueKind,
    pub(crate) default_resync: Option<Duration>,
    pub(crate) reflector: ReflectorOptions,
    pub(crate) name: Option<String>,
    #[cfg(feature = "metrics")]
    pub(crate) metrics: Option<super::InformerMetrics>,
}

impl InformerOptions {
    /// The queue between reflector and informer (default [`QueueKind::RealFifo`]).
    #[must_use]
    pub fn queue(mut self, kind: QueueKind) -> Self {
        self.queue = kind;
        self
    }

    /// The resync period of handlers that do not ask for one (default: none). A resync
    /// replays the cache to the handlers as updates; it never calls the API server.
    #[must_use]
    pub fn default_resync(mut self, period: Duration) -> Self {
        self.default_resync = Some(period);
        self
    }

    /// How the reflector lists and watches.
    #[must_use]
    pub fn reflector(mut self, options: ReflectorOptions) -> Self {
        self.reflector = options;
        self
    }

    /// The informer's name in metrics (default: the object type, e.g. `Pod`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Records FIFO depth, processing time, the cache's resourceVersion and each handler's
    /// backlog into `metrics`.
    #[cfg(feature = "metrics")]
    #[must_use]
    pub fn metrics(mut self, metrics: &super::InformerMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }
}

/// Options of one handler.
#[derive(Debug, Clone, Default)]
pub struct HandlerOptions {
    resync: Option<Duration>,
    name: Option<String>,
    coalesce: bool,
}

impl HandlerOptions {
    /// Replay the cache to this handler every `period` (at least 1 s; after the informer
    /// started, at least its check period).
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// The handler's name in logs.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Bound the handler's buffer to one pending notification per object: changes it has
    /// not taken yet are merged (it sees the latest state, an add for an object it has not
    /// seen yet, an update from what it last saw, a delete). Memory stays O(objects) however
    /// slow the handler; the price is that intermediate states are skipped, which suits
    /// level-triggered controllers. The default delivers every notification, unbounded, as
    /// client-go does.
    #[must_use]
    pub fn coalescing(mut self) -> Self {
        self.coalesce = true;
        self
    }
}

/// Errors of informer configuration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InformerError {
    /// The informer is already running; this can only be set before.
    #[error("the informer has already started: {what} must be set before run()")]
    AlreadyStarted {
        /// What was being set.
        what: &'static str,
    },
    /// Adding index functions failed.
    #[error(transparent)]
    Index(#[from] IndexError),
}

type Transform<K> = Arc<dyn Fn(K) -> K + Send + Sync>;

/// The most distinct keys applied to the cache under one write lock (client-go's batch
/// size), so readers cannot starve the writer; a relist from a `RealFifo` is applied whole.
const BATCH_KEYS: usize = 1000;

/// The queue, whichever kind.
enum Queue<K> {
    Real(Arc<RealFifo<K>>),
    Delta(Arc<DeltaFifo<K>>),
}

impl<K: Resource + Send + Sync + 'static> Queue<K> {
    fn sink(&self) -> Arc<dyn DeltaSink<K>> {
        match self {
            Self::Real(q) => q.clone(),
            Self::Delta(q) => q.clone(),
        }
    }

    fn has_synced(&self) -> bool {
        match self {
            Self::Real(q) => q.has_synced(),
            Self::Delta(q) => q.has_synced(),
        }
    }

    fn close(&self) {
        match self {
            Self::Real(q) => q.close(),
            Self::Delta(q) => q.close(),
        }
    }

    #[cfg(feature = "metrics")]
    fn len(&self) -> usize {
        match self {
            Self::Real(q) => q.len(),
            Self::Delta(q) => q.len(),
        }
    }

    async fn pop_batch(
        &self,
        process: impl FnOnce(&[(crate::Deltas<K>, bool)]) -> Result<(), ProcessError<Infallible>> + Send,
    ) -> Result<(), PopError<Infallible>> {
        match self {
            Self::Real(q) => q.pop_batch(BATCH_KEYS, process).await,
            Self::Delta(q) => q.pop_batch(BATCH_KEYS, process).await,
        }
    }
}

/// Applies the informer's transform (if any) to objects on their way into the queue, so an
/// object is transformed once, before it enters the cache.
struct TransformSink<K> {
    inner: Arc<dyn DeltaSink<K>>,
    transform: Arc<Mutex<Option<Transform<K>>>>,
}

impl<K: Clone> TransformSink<K> {
    fn apply(&self, obj: Arc<K>) -> Arc<K> {
        let transform = self.transform.lock().clone();
        match transform {
            // The reflector hands over a fresh Arc: unwrapping it does not copy.
            Some(f) => Arc::new(f(Arc::unwrap_or_clone(obj))),
            None => obj,
        }
    }
}

impl<K: Clone + Send + Sync> DeltaSink<K> for TransformSink<K> {
    fn add(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.inner.add(self.apply(obj))
    }
    fn update(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.inner.update(self.apply(obj))
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), KeyError> {
        self.inner.delete(self.apply(obj))
    }
    fn replace(&self, list: Vec<Arc<K>>) -> Result<(), KeyError> {
        self.inner
            .replace(list.into_iter().map(|o| self.apply(o)).collect())
    }
    fn resync(&self) {
        self.inner.resync();
    }
}

/// What the informer needs of its reflector, whatever the source type.
trait RunReflector: Send + Sync {
    fn run(self: Arc<Self>, cancel: CancellationToken) -> BoxFuture<'static, ()>;
    fn last_sync_resource_version(&self) -> String;
}

impl<K, L> RunReflector for Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    fn run(self: Arc<Self>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
        Box::pin(async move { Reflector::run(&self, cancel).await })
    }

    fn last_sync_resource_version(&self) -> String {
        Reflector::last_sync_resource_version(self)
    }
}

struct Inner<K> {
    indexer: Store<K>,
    queue: Queue<K>,
    processor: Mutex<Processor<K>>,
    /// Held while deltas are applied and distributed, and while a new handler is given the
    /// cache: a handler never misses, nor gets twice, what happens meanwhile.
    deltas: Mutex<()>,
    reflector: Arc<dyn RunReflector>,
    transform: Arc<Mutex<Option<Transform<K>>>>,
    started: AtomicBool,
    /// The resync check period fixed at start (`None` before start).
    check_period: Mutex<Option<Option<Duration>>>,
    options: InformerOptions,
}

/// One LIST+WATCH of a resource, an indexed cache of it, and any number of handlers, each
/// told of every change in order on its own task (client-go's `SharedIndexInformer`).
///
/// ```no_run
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::Api;
/// use kube_informer::informer::{HandlerFuncs, HandlerOptions, InformerOptions, SharedIndexInformer};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn demo(client: kube::Client) {
/// let informer = SharedIndexInformer::new(Api::<Pod>::all(client), InformerOptions::default());
/// let registration = informer.add_event_handler(
///     HandlerFuncs::new().on_add(|pod: std::sync::Arc<Pod>, _| println!("{:?}", pod.metadata.name)),
///     HandlerOptions::default(),
/// );
/// let cancel = CancellationToken::new();
/// tokio::spawn({ let informer = informer.clone(); let cancel = cancel.clone(); async move { informer.run(cancel).await } });
/// while !registration.has_synced() { tokio::task::yield_now().await; }
/// let cached = informer.store().len();
/// # let _ = cached;
/// # }
/// ```
pub struct SharedIndexInformer<K> {
    inner: Arc<Inner<K>>,
}

impl<K> Clone for SharedIndexInformer<K> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K> std::fmt::Debug for SharedIndexInformer<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedIndexInformer")
            .field("indexer", &self.inner.indexer)
            .field("started", &self.inner.started.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// An informer listing and watching with `lw` (e.g. a `kube::Api<K>`).
    pub fn new(lw: impl ListerWatcher<K>, options: InformerOptions) -> Self {
        let indexer: Store<K> = Store::default();
        let queue = match options.queue {
            QueueKind::RealFifo => Queue::Real(Arc::new(RealFifo::new(Arc::new(indexer.clone())))),
            QueueKind::DeltaFifo => {
                Queue::Delta(Arc::new(DeltaFifo::new(Some(Arc::new(indexer.clone())))))
            }
        };
        let transform = Arc::new(Mutex::new(None));
        let sink = Arc::new(TransformSink {
            inner: queue.sink(),
            transform: transform.clone(),
        });
        let mut reflector_options = options.reflector.clone();
        if reflector_options.resync_period.is_none() {
            reflector_options.resync_period = options
                .default_resync
                .map(|p| p.max(super::processor::MIN_RESYNC));
        }
        let reflector = Arc::new(Reflector::new(lw, sink, reflector_options));
        let inner = Arc::new_cyclic(|weak: &Weak<Inner<K>>| {
            let weak = weak.clone();
            reflector.set_should_resync(move || {
                weak.upgrade()
                    .is_some_and(|inner| inner.processor.lock().should_resync())
            });
            Inner {
                indexer,
                queue,
                processor: Mutex::new(Processor::default()),
                deltas: Mutex::new(()),
                reflector: reflector.clone(),
                transform,
                started: AtomicBool::new(false),
                check_period: Mutex::new(None),
                options,
            }
        });
        Self { inner }
    }

    /// The cache (also client-go's `GetIndexer`).
    #[doc(alias = "GetStore")]
    #[doc(alias = "GetIndexer")]
    pub fn store(&self) -> Store<K> {
        self.inner.indexer.clone()
    }

    /// A lister over the cache.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.indexer.clone())
    }

    /// Whether the first sync has been applied to the cache.
    #[doc(alias = "HasSynced")]
    pub fn has_synced(&self) -> bool {
        self.inner.queue.has_synced()
    }

    /// The resourceVersion the reflector last synced to.
    #[doc(alias = "LastSyncResourceVersion")]
    pub fn last_sync_resource_version(&self) -> String {
        self.inner.reflector.last_sync_resource_version()
    }

    /// Adds index functions (before `run`).
    #[doc(alias = "AddIndexers")]
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        if self.inner.started.load(Ordering::SeqCst) {
            return Err(InformerError::AlreadyStarted {
                what: "index functions",
            });
        }
        Ok(self.inner.indexer.add_indexers(indexers)?)
    }

    /// Transforms every object once, before it enters the cache (e.g.
    /// [`strip_managed_fields`](super::strip_managed_fields)); before `run`.
    #[doc(alias = "SetTransform")]
    pub fn set_transform(
        &self,
        transform: impl Fn(K) -> K + Send + Sync + 'static,
    ) -> Result<(), InformerError> {
        if self.inner.started.load(Ordering::SeqCst) {
            return Err(InformerError::AlreadyStarted {
                what: "the transform",
            });
        }
        *self.inner.transform.lock() = Some(Arc::new(transform));
        Ok(())
    }

    /// Adds a handler. If the informer is running, the handler first gets an add for every
    /// cached object (flagged as initial-list), then the changes after them, without gap or
    /// repeat.
    #[doc(alias = "AddEventHandler")]
    #[doc(alias = "AddEventHandlerWithResyncPeriod")]
    pub fn add_event_handler(
        &self,
        handler: impl ResourceEventHandler<K>,
        options: HandlerOptions,
    ) -> HandlerRegistration<K> {
        let name = options
            .name
            .clone()
            .unwrap_or_else(|| std::any::type_name_of_val(&handler).to_owned());
        let asked = options.resync.or(self.inner.options.default_resync);
        let _deltas = self.inner.deltas.lock();
        let resync = resync_period(asked, *self.inner.check_period.lock());
        let listener = Arc::new(Listener::spawn(name, Arc::new(handler), options.coalesce));
        if self.inner.started.load(Ordering::SeqCst) {
            for object in self.inner.indexer.list() {
                listener.push(super::Notification::Add {
                    object,
                    is_in_initial_list: true,
                });
            }
        }
        let id = self.inner.processor.lock().add(listener.clone(), resync);
        HandlerRegistration {
            id,
            listener,
            informer: Arc::downgrade(&self.inner),
        }
    }

    /// The notifications of a new handler as an async stream (the same guarantees as
    /// [`add_event_handler`](Self::add_event_handler)). The stream ends when the informer
    /// stops; remove its [`registration`](super::NotificationStream::registration) to
    /// detach it earlier.
    pub fn stream(&self, options: HandlerOptions) -> super::NotificationStream<K> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let registration = self.add_event_handler(super::stream::Forward(tx), options);
        super::NotificationStream { rx, registration }
    }

    /// Stops delivery to a handler; once this returns the handler is no longer called.
    #[doc(alias = "RemoveEventHandler")]
    #[doc(alias = "ShutDownEventHandler")]
    pub async fn remove_event_handler(&self, registration: &HandlerRegistration<K>) {
        let removed = {
            let _deltas = self.inner.deltas.lock();
            self.inner.processor.lock().remove(registration.id)
        };
        if let Some(listener) = removed {
            listener.stop().await;
        }
    }

    /// Runs the informer until `cancel` is cancelled; then stops the handlers' tasks. An
    /// informer runs once: a second `run` returns at once.
    pub async fn run(&self, cancel: CancellationToken) {
        if self.inner.started.swap(true, Ordering::SeqCst) {
            tracing::warn!("SharedIndexInformer::run called twice; an informer runs once");
            return;
        }
        let check = self
            .inner
            .options
            .reflector
            .resync_period
            .or(self.inner.options.default_resync);
        *self.inner.check_period.lock() = Some(check);
        let reflector = tokio::spawn(self.inner.reflector.clone().run(cancel.clone()));
        let inner = &self.inner;
        let mut out = Vec::new();
        loop {
            #[cfg(feature = "metrics")]
            let started_batch = Mutex::new(None::<std::time::Instant>);
            let popped = tokio::select! {
                () = cancel.cancelled() => break,
                popped = inner.queue.pop_batch(|batch| {
                    #[cfg(feature = "metrics")]
                    {
                        *started_batch.lock() = Some(std::time::Instant::now());
                    }
                    let _deltas = inner.deltas.lock();
                    handle_batch(&inner.indexer, batch, &mut out);
                    let processor = inner.processor.lock();
                    for d in out.drain(..) {
                        processor.distribute(&d.notification, d.is_sync);
                    }
                    Ok(())
                }) => popped,
            };
            if popped.is_err() {
                break;
            }
            #[cfg(feature = "metrics")]
            self.record_batch(&started_batch);
        }
        inner.queue.close();
        let _ = reflector.await;
        let listeners: Vec<_> = inner.processor.lock().listeners().cloned().collect();
        for listener in listeners {
            listener.stop().await;
        }
    }
}

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// Records the metrics of one applied batch.
    #[cfg(feature = "metrics")]
    fn record_batch(&self, started: &Mutex<Option<std::time::Instant>>) {
        let (Some(metrics), Some(started)) = (&self.inner.options.metrics, *started.lock()) else {
            return;
        };
        let name = self.inner.options.name.clone().unwrap_or_else(|| {
            let full = std::any::type_name::<K>();
            full.rsplit("::").next().unwrap_or(full).to_owned()
        });
        let rv = self.inner.reflector.last_sync_resource_version();
        metrics.batch_done(
            &name,
            self.inner.queue.len(),
            started.elapsed().as_secs_f64(),
            &rv,
        );
        for listener in self.inner.processor.lock().listeners() {
            metrics.backlog(&name, listener.name(), listener.backlog());
        }
    }
}

/// A handler's place in an informer: tells whether it has seen the initial state, and
/// removes it (see [`SharedIndexInformer::remove_event_handler`]).
pub struct HandlerRegistration<K> {
    id: u64,
    listener: Arc<Listener<K>>,
    informer: Weak<Inner<K>>,
}

impl<K> std::fmt::Debug for HandlerRegistration<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerRegistration")
            .field("id", &self.id)
            .finish()
    }
}

impl<K: Resource + Send + Sync + 'static> HandlerRegistration<K> {
    /// True once the informer has synced and this handler has been given every object of
    /// the initial state (for a late handler: of the cache when it was added).
    #[doc(alias = "HasSynced")]
    pub fn has_synced(&self) -> bool {
        self.informer
            .upgrade()
            .is_some_and(|inner| inner.queue.has_synced())
            && self.listener.initial_delivered()
    }

    /// How many notifications wait for this handler.
    pub fn backlog(&self) -> usize {
        self.listener.backlog()
    }
}
