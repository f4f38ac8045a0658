//! [`SharedIndexInformer`]: one reflector, one FIFO and one indexed cache, shared by any
//! number of handlers.

use std::{
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures_util::{FutureExt, future::BoxFuture};
use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{
    Failure, HandlerOptions, HandlerRegistration, InformerError, InformerHealth, InformerOptions,
    ResourceEventHandler, SyncError,
    failure::Reporter,
    handle_deltas::{Distribution, handle_batch},
    listener::{Listener, ListenerContext},
    processor::{Processor, resync_period},
    queue::{Queue, Transform, TransformSink},
};
use crate::{
    Indexers, Lister, ReadOnlyStore, Store,
    list_watch::ListerWatcher,
    reflector::{Reflector, ReflectorError, ReflectorHealth},
};

/// What the informer needs of its reflector, whatever the source type.
trait RunReflector: Send + Sync {
    fn run(self: Arc<Self>, cancel: CancellationToken) -> BoxFuture<'static, ()>;
    fn last_sync_resource_version(&self) -> String;
    fn health(&self) -> ReflectorHealth;
    fn set_resync_period(&self, period: Option<Duration>);
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

    fn health(&self) -> ReflectorHealth {
        Reflector::health(self)
    }

    fn set_resync_period(&self, period: Option<Duration>) {
        Reflector::set_resync_period(self, period);
    }
}

pub(super) struct Inner<K> {
    pub(super) indexer: Store<K>,
    queue: Queue<K>,
    pub(super) processor: Mutex<Processor<K>>,
    /// Held while deltas are applied and distributed, and while a new handler is given the
    /// cache: a handler never misses, nor gets twice, what happens meanwhile.
    pub(super) deltas: Mutex<()>,
    reflector: Arc<dyn RunReflector>,
    transform: Arc<Mutex<Option<Transform<K>>>>,
    started: AtomicBool,
    running: AtomicBool,
    /// Set once the first sync has been applied (and sync waiters told).
    synced: AtomicBool,
    failed: Mutex<Option<String>>,
    /// Told whenever sync state changes (a batch applied before the first sync, a handler
    /// done with its initial list, a failure, a stop).
    pub(super) progress: Arc<Notify>,
    pub(super) reporter: Arc<Reporter>,
    options: InformerOptions<K>,
}

/// One LIST+WATCH of a resource, an indexed cache of it, and any number of handlers, each
/// told of every change in order on its own task (client-go's `SharedIndexInformer`).
///
/// ```no_run
/// use std::time::Duration;
/// use k8s_openapi::api::core::v1::Pod;
/// use kube::Api;
/// use kube_informer::informer::{HandlerFuncs, HandlerOptions, InformerOptions, SharedIndexInformer};
/// use tokio_util::sync::CancellationToken;
///
/// # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
/// let informer = SharedIndexInformer::new(Api::<Pod>::all(client), InformerOptions::default());
/// informer.on_error(|failure| eprintln!("pods: {failure}"));
/// let registration = informer.add_event_handler(
///     HandlerFuncs::new().on_add(|pod: std::sync::Arc<Pod>, _| println!("{:?}", pod.metadata.name)),
///     HandlerOptions::default(),
/// );
/// let cancel = CancellationToken::new();
/// tokio::spawn({ let informer = informer.clone(); let cancel = cancel.clone(); async move { informer.run(cancel).await } });
/// registration.wait_for_sync(Duration::from_secs(60)).await?; // says why if it did not
/// let cached = informer.store().len();
/// # let _ = cached; Ok(())
/// # }
/// ```
pub struct SharedIndexInformer<K> {
    pub(super) inner: Arc<Inner<K>>,
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
            .field("name", &self.inner.reporter.name())
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
    pub fn new(lw: impl ListerWatcher<K>, options: InformerOptions<K>) -> Self {
        let indexer: Store<K> = Store::new(options.indexers.clone());
        let queue = Queue::new(options.queue, &indexer);
        let name = options.name.clone().unwrap_or_else(|| {
            let full = std::any::type_name::<K>();
            full.rsplit("::").next().unwrap_or(full).to_owned()
        });
        let reporter = Arc::new(Reporter::new(name.clone()));
        let transform = Arc::new(Mutex::new(None));
        let progress = Arc::new(Notify::new());
        let sink = Arc::new(TransformSink {
            inner: queue.sink(),
            transform: transform.clone(),
            reporter: reporter.clone(),
            progress: progress.clone(),
        });
        let mut reflector_options = options.reflector.clone();
        if reflector_options.name.is_none() {
            reflector_options = reflector_options.name(name);
        }
        let reflector = Arc::new(Reflector::new(lw, sink, reflector_options));
        let to_reporter = reporter.clone();
        reflector
            .set_error_sink(move |err: ReflectorError| to_reporter.report(Failure::Reflector(err)));
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
                running: AtomicBool::new(false),
                synced: AtomicBool::new(false),
                failed: Mutex::new(None),
                progress,
                reporter,
                options,
            }
        });
        Self { inner }
    }

    /// The informer's name (in logs, errors and metrics).
    pub fn name(&self) -> &str {
        self.inner.reporter.name()
    }

    /// The cache, read-only: it is written only by the informer, from the API server's
    /// events.
    #[doc(alias = "GetStore")]
    #[doc(alias = "GetIndexer")]
    pub fn store(&self) -> ReadOnlyStore<K> {
        self.inner.indexer.read_only()
    }

    /// A lister over the cache.
    pub fn lister(&self) -> Lister<K> {
        Lister::new(self.inner.indexer.read_only())
    }

    /// Whether the first sync has been applied to the cache (false again if the informer
    /// failed: see [`health`](Self::health)).
    #[doc(alias = "HasSynced")]
    pub fn has_synced(&self) -> bool {
        self.inner.queue.has_synced() && self.inner.failed.lock().is_none()
    }

    /// Waits until the first sync has been applied to the cache, at most `timeout`. The
    /// error names the informer and says why as far as it is known (its last list/watch
    /// error, a failure, not running).
    #[doc(alias = "WaitForCacheSync")]
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), SyncError> {
        let synced = self.inner.wait_until(timeout, || self.has_synced()).await;
        match synced {
            true => Ok(()),
            false => Err(self.inner.sync_error(self.name().to_owned(), timeout)),
        }
    }

    /// Whether the informer is synced, alive and keeping up: for readiness and liveness
    /// probes.
    pub fn health(&self) -> InformerHealth {
        InformerHealth {
            name: self.name().to_owned(),
            synced: self.has_synced(),
            running: self.inner.running.load(Ordering::SeqCst),
            failed: self.inner.failed.lock().clone(),
            reflector: self.inner.reflector.health(),
        }
    }

    /// Calls `handler` with every failure the informer meets (list and watch errors,
    /// stale events, panics in index functions, transforms and handlers, a task that
    /// died), besides logging them. Any number of handlers can be added, at any time; they
    /// run on the informer's tasks: keep them short.
    #[doc(alias = "SetWatchErrorHandler")]
    pub fn on_error(&self, handler: impl Fn(&Failure) + Send + Sync + 'static) {
        self.inner.reporter.add(Arc::new(handler));
    }

    /// The resourceVersion the reflector last synced to.
    #[doc(alias = "LastSyncResourceVersion")]
    pub fn last_sync_resource_version(&self) -> String {
        self.inner.reflector.last_sync_resource_version()
    }

    /// Adds index functions, before or after `run`: on a filled cache the new indexes are
    /// built before this returns.
    #[doc(alias = "AddIndexers")]
    pub fn add_indexers(&self, indexers: Indexers<K>) -> Result<(), InformerError> {
        self.inner.indexer.add_indexers(indexers)?;
        self.inner.report_index_failures();
        Ok(())
    }

    /// Transforms every object once, before it enters the cache (e.g.
    /// [`strip_managed_fields`](super::strip_managed_fields)); before `run`. A transform that
    /// panics is reported and loses nothing cached (see [`Failure::TransformPanicked`]).
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
        let context = self.inner.listener_context();
        let listener = Listener::spawn(name, Arc::new(handler), options.coalesce, context);
        self.register(Arc::new(listener), &options)
    }

    /// The notifications of a new handler as an async stream (the same guarantees as
    /// [`add_event_handler`](Self::add_event_handler)). The stream ends when the informer
    /// stops; dropping it removes the registration.
    pub fn stream(&self, options: HandlerOptions) -> super::NotificationStream<K> {
        let name = options.name.clone().unwrap_or_else(|| "stream".to_owned());
        let context = self.inner.listener_context();
        let listener = Arc::new(Listener::pulled(name, options.coalesce, context));
        let registration = self.register(listener.clone(), &options);
        super::NotificationStream {
            listener,
            registration,
        }
    }

    fn register(
        &self,
        listener: Arc<Listener<K>>,
        options: &HandlerOptions,
    ) -> HandlerRegistration<K> {
        let asked = options.resync.or(self.inner.options.default_resync);
        let resync = resync_period(asked);
        let id = {
            let _deltas = self.inner.deltas.lock();
            if self.inner.started.load(Ordering::SeqCst) {
                for object in self.inner.indexer.list() {
                    listener.push(super::Notification::Add {
                        object,
                        is_in_initial_list: true,
                    });
                }
            }
            self.inner.processor.lock().add(listener.clone(), resync)
        };
        self.inner.update_check_period();
        HandlerRegistration {
            id,
            listener,
            informer: Arc::downgrade(&self.inner),
        }
    }

    /// How many handlers (and streams) are registered.
    pub fn handler_count(&self) -> usize {
        self.inner.processor.lock().listeners().count()
    }

    /// Stops delivery to a handler; once this returns the handler is no longer called. A
    /// registration of another informer is refused.
    #[doc(alias = "RemoveEventHandler")]
    #[doc(alias = "ShutDownEventHandler")]
    pub async fn remove_event_handler(
        &self,
        registration: &HandlerRegistration<K>,
    ) -> Result<(), InformerError> {
        if !std::ptr::eq(registration.informer.as_ptr(), Arc::as_ptr(&self.inner)) {
            return Err(InformerError::ForeignRegistration);
        }
        if let Some(listener) = self.inner.remove(registration.id) {
            listener.stop().await;
        }
        Ok(())
    }

    /// Runs the informer until `cancel` is cancelled; then stops the handlers' tasks. An
    /// informer runs once: a second `run` returns at once.
    ///
    /// If a task of the informer dies (a bug, or a panic nothing else caught), the failure
    /// is reported, [`health`](Self::health) says so and [`has_synced`](Self::has_synced)
    /// turns false; `run` keeps running until cancelled, so what is cached stays readable.
    pub async fn run(&self, cancel: CancellationToken) {
        if self.inner.started.swap(true, Ordering::SeqCst) {
            tracing::warn!(informer = %self.name(), "SharedIndexInformer::run called twice; an informer runs once");
            return;
        }
        self.inner.running.store(true, Ordering::SeqCst);
        let outcome = std::panic::AssertUnwindSafe(self.run_loop(&cancel))
            .catch_unwind()
            .await;
        if let Err(panic) = outcome {
            self.inner
                .fail("informer", crate::panic_message(panic.as_ref()));
            cancel.cancelled().await;
        }
        self.inner.queue.close();
        let listeners: Vec<_> = self.inner.processor.lock().listeners().cloned().collect();
        for listener in listeners {
            listener.stop().await;
        }
        self.inner.running.store(false, Ordering::SeqCst);
        self.inner.progress.notify_waiters();
    }

    async fn run_loop(&self, cancel: &CancellationToken) {
        let inner = &self.inner;
        let mut reflector = Some(tokio::spawn(inner.reflector.clone().run(cancel.clone())));
        let mut out: Vec<Distribution<K>> = Vec::new();
        let mut stale = Vec::new();
        let ordered = inner.queue.is_ordered();
        loop {
            #[cfg(feature = "metrics")]
            let started_batch = Mutex::new(None::<std::time::Instant>);
            let died = async {
                match reflector.as_mut() {
                    Some(task) => task.await,
                    None => std::future::pending().await,
                }
            };
            let popped = tokio::select! {
                () = cancel.cancelled() => break,
                ended = died => {
                    reflector = None;
                    if cancel.is_cancelled() {
                        break; // it stopped because we are stopping
                    }
                    let message = match ended {
                        Err(join) if join.is_panic() => crate::panic_message(join.into_panic().as_ref()),
                        Err(join) => join.to_string(),
                        Ok(()) => "it returned before the informer was stopped".to_owned(),
                    };
                    inner.fail("reflector", message);
                    continue;
                }
                popped = inner.queue.pop_batch(|batch| {
                    #[cfg(feature = "metrics")]
                    {
                        *started_batch.lock() = Some(std::time::Instant::now());
                    }
                    let _deltas = inner.deltas.lock();
                    stale = handle_batch(&inner.indexer, batch, ordered, &mut out);
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
            // Reported outside the queue's and the store's locks: handlers may read them.
            for event in stale.drain(..) {
                inner.reporter.report(Failure::StaleEvent {
                    key: event.key,
                    delta: event.delta,
                    cached: event.cached,
                    event: event.event,
                });
            }
            inner.report_index_failures();
            if !inner.synced.load(Ordering::SeqCst) && inner.queue.has_synced() {
                inner.synced.store(true, Ordering::SeqCst);
                inner.progress.notify_waiters();
            }
            #[cfg(feature = "metrics")]
            self.record_batch(&started_batch);
        }
        if let Some(task) = reflector {
            let _ = task.await;
        }
    }
}

impl<K: Resource + Send + Sync + 'static> Inner<K> {
    fn listener_context(&self) -> ListenerContext {
        ListenerContext {
            progress: self.progress.clone(),
            reporter: self.reporter.clone(),
        }
    }

    /// Takes a listener out of the processor; it gets nothing more once this returns.
    pub(super) fn remove(&self, id: u64) -> Option<Arc<Listener<K>>> {
        let removed = {
            let _deltas = self.deltas.lock();
            self.processor.lock().remove(id)
        };
        self.update_check_period();
        removed
    }

    /// The resync check period follows the most demanding handler, also after start.
    fn update_check_period(&self) {
        let period = self.processor.lock().shortest_resync();
        self.reflector.set_resync_period(period);
    }

    fn report_index_failures(&self) {
        if self.indexer.has_index_failures() {
            for failure in self.indexer.take_index_failures() {
                self.reporter.report(Failure::IndexPanicked(failure));
            }
        }
    }

    /// A task died: report it, and say so from now on.
    fn fail(&self, task: &'static str, message: String) {
        *self.failed.lock() = Some(format!("the {task} task died: {message}"));
        self.reporter.report(Failure::TaskDied { task, message });
        self.progress.notify_waiters();
    }

    /// Waits until `done` holds or `timeout` passes; whether it holds.
    pub(super) async fn wait_until(&self, timeout: Duration, done: impl Fn() -> bool) -> bool {
        let deadline = tokio::time::sleep(timeout);
        let mut deadline = std::pin::pin!(deadline);
        loop {
            let progress = self.progress.notified();
            let mut progress = std::pin::pin!(progress);
            progress.as_mut().enable();
            if done() {
                return true;
            }
            tokio::select! {
                () = progress => {}
                () = &mut deadline => return done(),
            }
        }
    }

    /// Why `name` is not synced after `waited`.
    pub(super) fn sync_error(&self, name: String, waited: Duration) -> SyncError {
        let health = self.reflector.health();
        SyncError {
            name,
            waited,
            last_error: health.last_error.map(|(_, message)| message),
            failed: self.failed.lock().clone(),
            stopped: !self.running.load(Ordering::SeqCst),
        }
    }

    pub(super) fn has_synced(&self) -> bool {
        self.queue.has_synced() && self.failed.lock().is_none()
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
        let name = self.name();
        let rv = self.inner.indexer.resource_version();
        metrics.batch_done(
            name,
            self.inner.queue.len(),
            started.elapsed().as_secs_f64(),
            &rv,
        );
        for listener in self.inner.processor.lock().listeners() {
            metrics.backlog(name, listener.name(), listener.backlog());
        }
    }
}
