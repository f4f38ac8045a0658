//! [`SharedIndexInformer`]: one reflector, one FIFO and one indexed cache, shared by any
//! number of handlers.

use std::{
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use kube::Resource;

use super::{
    Failure, HandlerOptions, HandlerRegistration, InformerError, InformerHealth, InformerOptions,
    ResourceEventHandler, SyncError,
    handlers::{listener::Listener, processor::resync_period},
    inner::Inner,
};
use crate::{Indexers, Lister, ReadOnlyStore, list_watch::ListerWatcher};

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
        Self {
            inner: Inner::build(vec![(None, lw)], options),
        }
    }

    /// One informer for the objects of several namespaces: one LIST+WATCH per namespace
    /// (each `(namespace, source)`, e.g. a `kube::Api` of that namespace), one cache, one
    /// set of handlers. It has synced once every namespace's first list is applied. A
    /// relist of one namespace never takes another's objects for deleted. The cache keeps
    /// each namespace's resourceVersion (the namespaces' versions do not form one
    /// sequence): its `resource_version()` is their minimum, and
    /// [`wait_for_resource_version_in`](crate::ReadOnlyStore::wait_for_resource_version_in)
    /// waits for one namespace's watch.
    pub fn new_in_namespaces<L: ListerWatcher<K>>(
        sources: impl IntoIterator<Item = (String, L)>,
        options: InformerOptions<K>,
    ) -> Self {
        let sources: Vec<(Option<String>, L)> =
            sources.into_iter().map(|(ns, lw)| (Some(ns), lw)).collect();
        Self {
            inner: Inner::build(sources, options),
        }
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
        self.inner.has_synced()
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
            reflector: self.inner.reflector_health(),
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
        self.inner.last_sync_resource_version()
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
        let listener = Listener::spawn(name, Arc::new(handler), &options, context);
        self.register(Arc::new(listener), &options)
    }

    /// The notifications of a new handler as an async stream (the same guarantees as
    /// [`add_event_handler`](Self::add_event_handler)). The stream ends when the informer
    /// stops; dropping it removes the registration.
    pub fn stream(&self, options: HandlerOptions) -> super::NotificationStream<K> {
        let name = options.name.clone().unwrap_or_else(|| "stream".to_owned());
        let context = self.inner.listener_context();
        let listener = Arc::new(Listener::pulled(name, &options, context));
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
    #[cfg(feature = "testing")]
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
}
