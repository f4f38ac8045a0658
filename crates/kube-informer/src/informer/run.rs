//! The informer's loop: pop batches, apply them under one store lock, distribute, report;
//! and watch its reflectors for an unexpected death.

use std::sync::atomic::Ordering;

use futures_util::FutureExt;
use kube::Resource;
#[cfg(feature = "metrics")]
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::{
    Failure, SharedIndexInformer,
    handle_deltas::{Distribution, handle_batch},
};
use crate::{
    reflector::{CaughtUp, WarmStart},
    snapshot,
};

impl<K> SharedIndexInformer<K>
where
    K: Resource + Clone + Send + Sync + 'static,
{
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
        let persisting = self.start_persistence(cancel).await;
        let persisting = async {
            if let Some(writing) = persisting {
                writing.await;
            }
        };
        tokio::join!(self.apply_loop(cancel), persisting);
    }

    /// With a cache directory: hands each reflector its usable snapshot (one file per
    /// namespace for an informer over several), and returns the writer of snapshots (which
    /// writes a last one once `cancel` fires).
    async fn start_persistence(
        &self,
        cancel: &CancellationToken,
    ) -> Option<impl std::future::Future<Output = ()> + use<K>> {
        let inner = &self.inner;
        let persistence = inner.options.persistence.clone()?;
        let mut writers = Vec::new();
        for (reflector, namespace) in inner.reflectors.iter().zip(&inner.namespaces) {
            let mut persistence = persistence.clone();
            if let Some(namespace) = namespace {
                persistence.identity.namespace = Some(namespace.clone());
            }
            let loaded = tokio::select! {
                () = cancel.cancelled() => None,
                loaded = snapshot::load(&persistence, self.name()) => loaded,
            };
            if let Some(loaded) = loaded {
                let caught_up = CaughtUp::pending(inner.progress.clone(), namespace.clone());
                inner.caught_up.lock().push(caught_up.clone());
                reflector.start_from(WarmStart {
                    objects: loaded.objects,
                    resource_version: loaded.resource_version,
                    caught_up,
                });
            }
            writers.push(snapshot::keep_written(
                inner.indexer.read_only(),
                persistence,
                namespace.clone(),
                self.name().to_owned(),
                cancel.clone(),
            ));
        }
        Some(futures_util::future::join_all(writers).map(|_| ()))
    }

    async fn apply_loop(&self, cancel: &CancellationToken) {
        let inner = &self.inner;
        let mut reflectors = tokio::task::JoinSet::new();
        for reflector in &inner.reflectors {
            reflectors.spawn(reflector.clone().run(cancel.clone()));
        }
        let mut out: Vec<Distribution<K>> = Vec::new();
        let mut stale = Vec::new();
        let ordered = inner.queue.is_ordered();
        loop {
            #[cfg(feature = "metrics")]
            let started_batch = Mutex::new(None::<std::time::Instant>);
            let died = async {
                match reflectors.join_next().await {
                    Some(ended) => ended,
                    None => std::future::pending().await,
                }
            };
            let popped = tokio::select! {
                () = cancel.cancelled() => break,
                ended = died => {
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
                popped = async {
                    // Backpressure: first, room with every handler that is not set aside.
                    let held: Vec<_> = inner.processor.lock().listeners().cloned().collect();
                    for listener in held {
                        listener.wait_for_room(self.name()).await;
                    }
                    inner.queue.pop_batch(|batch| {
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
                }).await
                } => popped,
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
            // Latches the first sync and wakes the sync waiters when it is first seen.
            inner.first_sync_applied();
            #[cfg(feature = "metrics")]
            self.record_batch(&started_batch);
        }
        while reflectors.join_next().await.is_some() {}
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
            metrics.set_aside(name, listener.name(), listener.is_set_aside());
        }
    }
}
