//! The informer's state and what it does internally: built around one reflector — or one per
//! namespace, all feeding the same queue and cache — and the bookkeeping behind sync waits,
//! health and failures.

use std::{
    sync::{
        Arc, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use futures_util::future::BoxFuture;
use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{
    Failure, InformerOptions, SyncError,
    failure::Reporter,
    handlers::listener::{Listener, ListenerContext},
    handlers::processor::Processor,
    queue::Queue,
};
use crate::{
    Store,
    fifo::DeltaSink,
    fifo::sink::{NamespaceSink, Transform, TransformSink},
    list_watch::ListerWatcher,
    reflector::{
        AppliedVersion, CaughtUp, Heard, Reflector, ReflectorError, ReflectorHealth, WarmStart,
    },
};

/// What the informer needs of a reflector, whatever the source type.
pub(super) trait RunReflector<K>: Send + Sync {
    fn run(self: Arc<Self>, cancel: CancellationToken) -> BoxFuture<'static, ()>;
    fn start_from(&self, warm: WarmStart<K>);
    fn last_sync_resource_version(&self) -> String;
    fn health(&self) -> ReflectorHealth;
    fn set_resync_period(&self, period: Option<Duration>);
    fn heard(&self) -> &Arc<Heard>;
}

impl<K, L> RunReflector<K> for Reflector<K, L>
where
    K: Resource + Clone + Send + Sync + 'static,
    L: ListerWatcher<K>,
{
    fn run(self: Arc<Self>, cancel: CancellationToken) -> BoxFuture<'static, ()> {
        Box::pin(async move { Reflector::run(&self, cancel).await })
    }

    fn start_from(&self, warm: WarmStart<K>) {
        Reflector::start_from(self, warm);
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

    fn heard(&self) -> &Arc<Heard> {
        Reflector::heard(self)
    }
}

pub(super) struct Inner<K> {
    pub(super) indexer: Store<K>,
    pub(super) queue: Queue<K>,
    pub(super) processor: Mutex<Processor<K>>,
    /// Held while deltas are applied and distributed, and while a new handler is given the
    /// cache: a handler never misses, nor gets twice, what happens meanwhile.
    pub(super) deltas: Mutex<()>,
    /// One reflector, or one per namespace (the resync ticker is the first one's).
    pub(super) reflectors: Vec<Arc<dyn RunReflector<K>>>,
    /// Each reflector's namespace (`None`: the source's whole collection).
    pub(super) namespaces: Vec<Option<String>>,
    /// Each warm-starting reflector's "caught up with the server" (none: a cold start,
    /// synced with its first list).
    pub(super) caught_up: Mutex<Vec<Arc<CaughtUp>>>,
    pub(super) transform: Arc<Mutex<Option<Transform<K>>>>,
    pub(super) started: AtomicBool,
    pub(super) running: AtomicBool,
    /// Set once the first sync has been applied (and sync waiters told).
    pub(super) synced: AtomicBool,
    pub(super) failed: Mutex<Option<String>>,
    /// Told whenever sync state changes (a batch applied before the first sync, a relist,
    /// a handler done with its initial list, a failure, a stop).
    pub(super) progress: Arc<Notify>,
    pub(super) reporter: Arc<Reporter>,
    pub(super) options: InformerOptions<K>,
}

impl<K> Inner<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
    /// An informer's state fed by one reflector per `(namespace, source)` (`None`: the
    /// source's whole collection).
    pub(super) fn build<L: ListerWatcher<K>>(
        sources: Vec<(Option<String>, L)>,
        options: InformerOptions<K>,
    ) -> Arc<Self> {
        let indexer: Store<K> = Store::new(options.indexers.clone());
        let queue = Queue::new(options.queue, options.queue_capacity, &indexer);
        queue.expect_relists(sources.len());
        let namespaces: Vec<String> = sources.iter().filter_map(|(ns, _)| ns.clone()).collect();
        if !namespaces.is_empty() {
            // One watch per namespace: one version sequence each (see `store/version.rs`).
            indexer.track_namespaces(namespaces);
        }
        let name = options.name.clone().unwrap_or_else(|| {
            let full = std::any::type_name::<K>();
            full.rsplit("::").next().unwrap_or(full).to_owned()
        });
        let reporter = Arc::new(Reporter::new(name.clone()));
        let transform = Arc::new(Mutex::new(None));
        let progress = Arc::new(Notify::new());
        let to_reporter = reporter.clone();
        let sink: Arc<dyn DeltaSink<K>> = Arc::new(TransformSink {
            inner: queue.sink(),
            transform: transform.clone(),
            strip_managed_fields: options.strip_managed_fields,
            on_panic: Arc::new(move |key, message| {
                to_reporter.report(Failure::TransformPanicked { key, message });
            }),
            progress: progress.clone(),
        });
        let source_namespaces: Vec<Option<String>> =
            sources.iter().map(|(ns, _)| ns.clone()).collect();
        let reflectors: Vec<Arc<Reflector<K, L>>> = sources
            .into_iter()
            .map(|(namespace, lw)| {
                let mut reflector_options = options.reflector.clone();
                if reflector_options.name.is_none() {
                    let named = match &namespace {
                        Some(ns) => format!("{name} in {ns}"),
                        None => name.clone(),
                    };
                    reflector_options = reflector_options.name(named);
                }
                let cache = indexer.read_only();
                let applied: AppliedVersion = match namespace.clone() {
                    Some(ns) => {
                        Box::new(move || cache.resource_version_in(&ns).unwrap_or_default())
                    }
                    None => Box::new(move || cache.resource_version()),
                };
                let sink: Arc<dyn DeltaSink<K>> = match namespace {
                    Some(namespace) => Arc::new(NamespaceSink {
                        inner: sink.clone(),
                        namespace,
                    }),
                    None => sink.clone(),
                };
                let reflector = Arc::new(Reflector::new(lw, sink, reflector_options));
                reflector.heard().set_applied(applied, queue.is_ordered());
                let to_reporter = reporter.clone();
                reflector.set_error_sink(move |err: ReflectorError| {
                    to_reporter.report(Failure::Reflector(err));
                });
                reflector
            })
            .collect();
        Arc::new_cyclic(|weak: &Weak<Inner<K>>| {
            #[cfg(feature = "metrics")]
            if let Some(metrics) = &options.metrics {
                let cache: Weak<dyn super::metrics::StaleCache> = weak.clone();
                metrics.track_staleness(&name, cache);
            }
            let weak = weak.clone();
            // One resync ticker is enough: resyncs replay the shared cache.
            if let Some(first) = reflectors.first() {
                first.set_should_resync(move || {
                    weak.upgrade()
                        .is_some_and(|inner| inner.processor.lock().should_resync())
                });
            }
            Inner {
                indexer,
                queue,
                processor: Mutex::new(Processor::default()),
                deltas: Mutex::new(()),
                reflectors: reflectors
                    .into_iter()
                    .map(|r| r as Arc<dyn RunReflector<K>>)
                    .collect(),
                namespaces: source_namespaces,
                caught_up: Mutex::default(),
                transform,
                started: AtomicBool::new(false),
                running: AtomicBool::new(false),
                synced: AtomicBool::new(false),
                failed: Mutex::new(None),
                progress,
                reporter,
                options,
            }
        })
    }
}

impl<K: Resource + Send + Sync + 'static> Inner<K> {
    pub(super) fn listener_context(&self) -> ListenerContext {
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
    pub(super) fn update_check_period(&self) {
        let period = self.processor.lock().shortest_resync();
        if let Some(first) = self.reflectors.first() {
            first.set_resync_period(period);
        }
    }

    pub(super) fn report_index_failures(&self) {
        if self.indexer.has_index_failures() {
            for failure in self.indexer.take_index_failures() {
                self.reporter.report(Failure::IndexPanicked(failure));
            }
        }
    }

    /// A task died: report it, and say so from now on.
    pub(super) fn fail(&self, task: &'static str, message: String) {
        *self.failed.lock() = Some(format!("the {task} task died: {message}"));
        self.reporter.report(Failure::TaskDied { task, message });
        self.progress.notify_waiters();
    }

    /// The reflectors' health as one: the worst failure count, the newest error, the
    /// oldest sync, watching only if all are.
    pub(super) fn reflector_health(&self) -> ReflectorHealth {
        let all: Vec<ReflectorHealth> = self.reflectors.iter().map(|r| r.health()).collect();
        let mut merged = all.first().cloned().unwrap_or_default();
        for h in &all[1.min(all.len())..] {
            merged.last_sync = match (merged.last_sync, h.last_sync) {
                (Some(a), Some(b)) => Some(a.min(b)),
                _ => None,
            };
            merged.last_watch_event = merged.last_watch_event.max(h.last_watch_event);
            merged.consecutive_failures = merged.consecutive_failures.max(h.consecutive_failures);
            if h.last_error.as_ref().map(|e| e.0) > merged.last_error.as_ref().map(|e| e.0) {
                merged.last_error = h.last_error.clone();
            }
            merged.watching &= h.watching;
        }
        merged
    }

    /// The reflectors' last synced versions (comma-separated when there are several).
    pub(super) fn last_sync_resource_version(&self) -> String {
        let versions: Vec<String> = self
            .reflectors
            .iter()
            .map(|r| r.last_sync_resource_version())
            .collect();
        versions.join(",")
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
        let health = self.reflector_health();
        SyncError {
            name,
            waited,
            last_error: health.last_error.map(|(_, message)| message),
            failed: self.failed.lock().clone(),
            stopped: !self.running.load(Ordering::SeqCst),
        }
    }

    pub(super) fn has_synced(&self) -> bool {
        self.first_sync_applied() && self.failed.lock().is_none()
    }

    /// The first sync is applied, and after a warm start the watch has caught up with the
    /// server (see [`snapshot`](crate::snapshot)).
    /// Latched: once true, it stays so (a version that moved back, from a misbehaving
    /// server, does not unsync the informer).
    pub(super) fn first_sync_applied(&self) -> bool {
        if self.synced.load(Ordering::SeqCst) {
            return true;
        }
        let caught_up = self.caught_up.lock().clone();
        let applied =
            self.queue.has_synced() && caught_up.iter().all(|c| c.applied_in(&self.indexer));
        if applied && !self.synced.swap(true, Ordering::SeqCst) {
            self.progress.notify_waiters();
        }
        applied
    }
}
