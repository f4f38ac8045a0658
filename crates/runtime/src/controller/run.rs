//! Running a controller: its handlers attached, its caches waited for, its workers
//! reconciling until it is stopped (drained) or halted, and everything it started stopped
//! and awaited before `run` returns.

use std::{future::Future, sync::Arc};

use kube::Resource;
use kube_informer::{
    informer::HandlerOptions,
    workqueue::{QueueItem, RateLimitingQueue, Requeue, Workers},
};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{
    Controller, ControllerError, ControllerOptions, ErrorPolicy, Reconciler,
    attachments::{self, Attachments},
    handlers, worker,
};

impl<K> Controller<K>
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    /// Starts the informers, attaches the controller's handlers, waits for the caches it
    /// reads, then reconciles until `cancel`, and drains (see
    /// [`ControllerOptions::drain_timeout`](super::ControllerOptions::drain_timeout)).
    /// Dropping the returned future instead stops everything at once: see
    /// [what a running controller owns](crate::controller#what-a-running-controller-owns).
    ///
    /// `reconcile` gets the object as cached ([`Cached`](super::Cached)) and the context; `error_policy`
    /// decides what to do after an error (usually [`Action::Retry`](super::Action::Retry): per-key exponential
    /// backoff; [`Action::Done`](super::Action::Done): a terminal error). A panic in `reconcile` is caught,
    /// counted and retried like an error.
    pub async fn run<Ctx, R, P>(
        self,
        reconcile: R,
        error_policy: P,
        ctx: Arc<Ctx>,
        cancel: CancellationToken,
    ) -> Result<(), ControllerError>
    where
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
        P: ErrorPolicy<K, R::Error, Ctx>,
    {
        let halt = CancellationToken::new();
        self.run_until(reconcile, error_policy, ctx, cancel, halt)
            .await
    }

    /// [`run`](Self::run) with a second token: `halt` cancels the reconciles in flight and
    /// returns once they have stopped (a manager that lost leadership, or whose shutdown
    /// deadline passed), where `graceful` drains.
    pub(crate) async fn run_until<Ctx, R, P>(
        self,
        reconcile: R,
        error_policy: P,
        ctx: Arc<Ctx>,
        graceful: CancellationToken,
        halt: CancellationToken,
    ) -> Result<(), ControllerError>
    where
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
        P: ErrorPolicy<K, R::Error, Ctx>,
    {
        match self.options.shard.clone() {
            Some(shard) => {
                let client = self.factory.client().clone();
                let sharded = shard.reconcile(client, self.dyntype.clone(), reconcile);
                self.run_reconciles(sharded, error_policy, ctx, graceful, halt)
                    .await
            }
            None => {
                self.run_reconciles(reconcile, error_policy, ctx, graceful, halt)
                    .await
            }
        }
    }

    async fn run_reconciles<Ctx, R, P>(
        mut self,
        reconcile: R,
        error_policy: P,
        ctx: Arc<Ctx>,
        graceful: CancellationToken,
        halt: CancellationToken,
    ) -> Result<(), ControllerError>
    where
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
        P: ErrorPolicy<K, R::Error, Ctx>,
    {
        // Owned from here on: dropping this future shuts the queue and detaches them.
        let attached = self.attach();
        self.factory.start();
        let stop = graceful.clone();
        let halted = halt.clone();
        let stopping = async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = halted.cancelled() => {}
            }
        };
        let result = match self.wait_for_caches(stopping).await {
            Err(err) => Err(err),
            Ok(false) => Ok(()), // stopped while waiting
            Ok(true) => {
                self.reconcile_until(reconcile, error_policy, ctx, graceful, halt)
                    .await;
                Ok(())
            }
        };
        attached.remove().await;
        result
    }

    /// Whether every cache synced (`false`: stopped first).
    async fn wait_for_caches(
        &self,
        stopping: impl Future<Output = ()>,
    ) -> Result<bool, ControllerError> {
        let mut stopping = std::pin::pin!(stopping);
        for wait in &self.syncs {
            tokio::select! {
                () = &mut stopping => return Ok(false),
                synced = wait(self.cache_sync_timeout) => synced.map_err(|source| {
                    ControllerError::CacheSync { controller: self.name.clone(), source }
                })?,
            }
        }
        Ok(true)
    }

    async fn reconcile_until<Ctx, R, P>(
        &mut self,
        reconcile: R,
        error_policy: P,
        ctx: Arc<Ctx>,
        graceful: CancellationToken,
        halt: CancellationToken,
    ) where
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
        P: ErrorPolicy<K, R::Error, Ctx>,
    {
        let mut feeds = self.start_feeds();
        let _reconciling = self.own_writes.reconciling();
        let worker = self.worker(Arc::new(reconcile), Arc::new(error_policy), ctx, None);
        let queue = self.queue.clone();
        let process = move |key| {
            let attempt = queue.num_requeues(&key) + 1;
            worker.call(key, attempt)
        };
        let mut workers = spawn_workers(&self.queue, &self.options, process);
        tokio::select! {
            () = graceful.cancelled() => {
                tokio::select! {
                    _ = workers.drain(self.options.drain_timeout) => {}
                    () = halt.cancelled() => {}
                }
            }
            () = halt.cancelled() => {}
        }
        // Already stopped after a full drain; otherwise cancel and wait.
        workers.abort().await;
        feeds.abort_all();
        while feeds.join_next().await.is_some() {}
    }

    /// Starts its feeds ([`reconcile_all_on`](Self::reconcile_all_on), and relations
    /// that follow other clusters) as tasks owned by what it returns.
    pub(super) fn start_feeds(&mut self) -> JoinSet<()> {
        let mut feeds = JoinSet::new();
        for feed in self.feeds.drain(..) {
            feeds.spawn(feed.into_inner());
        }
        feeds
    }

    /// Attaches its handlers (the primary's and each relation's), owned by what it returns:
    /// removed when that is, closed if it is dropped.
    pub(super) fn attach(&mut self) -> Attachments {
        let mut handler_options = HandlerOptions::default().name(self.name.clone());
        if let Some(period) = self.resync {
            handler_options = handler_options.resync(period);
        }
        let updates = handlers::Updates {
            predicate: self.predicate.take(),
            filter: self.event_filter.clone(),
        };
        let handler = handlers::primary(self.enqueue.clone(), updates, self.expectations.clone());
        let mut attached = Attachments::new(self.queue.clone());
        attached.push(attachments::attach_now(
            self.informer.clone(),
            handler,
            handler_options,
        ));
        for relation in self.relations.drain(..) {
            attached.push(relation());
        }
        attached
    }

    /// What its workers call to reconcile a key (of fleet member `cluster`, if one).
    pub(super) fn worker<Ctx, R>(
        &self,
        reconcile: Arc<R>,
        error_policy: worker::SharedPolicy<K, R::Error, Ctx>,
        ctx: Arc<Ctx>,
        cluster: Option<Arc<str>>,
    ) -> worker::Worker<K, Ctx, R>
    where
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
    {
        worker::Worker {
            name: self.name.clone(),
            namespaced: self.owner.namespaced,
            store: self.informer.store(),
            debounce: self.enqueue.debounce.clone(),
            metrics: self.metrics.clone(),
            max_retries: self.options.max_retries,
            timeout: self.options.reconcile_timeout,
            reconcile,
            error_policy,
            ctx,
            own_writes: self.own_writes.clone(),
            triggers: self.enqueue.triggers.clone(),
            kind: self.enqueue.kind.clone(),
            cluster,
        }
    }
}

/// Starts the workers `options` ask for (a count, or scaled) on `queue`, each calling
/// `process`, and keeps the controller's worker gauge (`options.metrics`) up to date: a
/// controller's own workers, or a fleet controller's over its members.
pub(crate) fn spawn_workers<T, F, Fut>(
    queue: &RateLimitingQueue<T>,
    options: &ControllerOptions,
    process: F,
) -> Workers<T>
where
    T: QueueItem,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Requeue> + Send + 'static,
{
    let (metrics, name) = (options.metrics.clone(), options.name.clone());
    if let Some(metrics) = &metrics {
        metrics.set_workers(&name, options.workers);
    }
    match options.scaling.clone() {
        None => Workers::spawn(queue, options.workers, process),
        Some(scaling) => {
            let scaling = scaling.on_change(move |workers| {
                if let Some(metrics) = &metrics {
                    metrics.set_workers(&name, workers);
                }
            });
            Workers::spawn_scaled(queue, scaling, process)
        }
    }
}
