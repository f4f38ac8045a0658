//! Worker scaffolding: N workers draining a [`RateLimitingQueue`], calling your reconcile
//! function with each key and acting on its result.
//!
//! - `Ok(Action::Done)`: the key is forgotten (its backoff starts over next time).
//! - `Ok(Action::RequeueAfter(d))`: looked at again after `d` (a periodic check); a success,
//!   so the key's failure count is forgotten too.
//! - `Err(e)`: logged and retried with the queue's rate limiter (exponential per key), up
//!   to `max_retries` times, then dropped until the next change of the object.
//! - A panicking reconcile — in its future, or in the function before it returns one — is
//!   caught and treated as an error; the worker goes on.
//!
//! The queue guarantees that one key is never reconciled by two workers at once, and that a
//! change arriving while it is reconciled brings it back afterwards. Stopping drains: the
//! workers finish what they hold and what is queued, then return — within
//! [`ControllerOptions::drain_timeout`], after which reconciles still running are
//! abandoned.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube_informer::{
//!     ObjectKey,
//!     controller::{Action, Controller, ControllerOptions, enqueue_keys},
//!     factory::{FactoryOptions, SharedInformerFactory},
//!     informer::HandlerOptions,
//! };
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn demo(client: kube::Client) {
//! let factory = SharedInformerFactory::new(client, FactoryOptions::default());
//! let configs = factory.informer::<ConfigMap>();
//! let controller = Controller::<ObjectKey>::new(ControllerOptions::default().workers(4));
//! configs.add_event_handler(enqueue_keys(controller.queue().clone()), HandlerOptions::default());
//! factory.start();
//! factory.wait_for_cache_sync().await;
//!
//! let cache = configs.store();
//! let cancel = CancellationToken::new();
//! controller
//!     .run(
//!         move |key: ObjectKey| {
//!             let cache = cache.clone();
//!             async move {
//!                 match cache.get_by_key(key.as_str()) {
//!                     Some(cm) => println!("reconcile {key}: {} keys", cm.data.as_ref().map_or(0, |d| d.len())),
//!                     None => println!("{key} is gone"),
//!                 }
//!                 Ok::<_, std::convert::Infallible>(Action::Done)
//!             }
//!         },
//!         cancel,
//!     )
//!     .await;
//! # }
//! ```

use std::{fmt::Display, future::Future, panic::AssertUnwindSafe, sync::Arc, time::Duration};

use futures_util::FutureExt;
use kube::Resource;
use tokio_util::sync::CancellationToken;

use crate::{
    DeletedObject, ObjectKey, deletion_handling_meta_namespace_key,
    informer::HandlerFuncs,
    meta_namespace_key,
    workqueue::{QueueConfig, QueueItem, RateLimitingQueue},
};

/// What to do with a key after a successful reconcile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing more until the object changes again.
    Done,
    /// Look again after this long (a success: the key's failure count is forgotten).
    RequeueAfter(Duration),
}

/// Settings of a [`Controller`].
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    workers: usize,
    max_retries: Option<u32>,
    name: String,
    drain_timeout: Option<Duration>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            max_retries: Some(15),
            name: "controller".to_owned(),
            drain_timeout: Some(Duration::from_secs(30)),
        }
    }
}

impl ControllerOptions {
    /// How many keys are reconciled at once (default 2; at least 1).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// How many times a failing key is retried before it is dropped until its next change
    /// (default 15; `None`: forever).
    #[must_use]
    pub fn max_retries(mut self, retries: Option<u32>) -> Self {
        self.max_retries = retries;
        self
    }

    /// The controller's name: its queue's name in metrics and logs.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How long stopping may wait for held and queued keys to be reconciled (default
    /// 30 s, controller-runtime's graceful-shutdown default; `None`: as long as it takes).
    /// At the deadline the queue is shut down for good and reconciles still running are
    /// dropped, so a reconcile that never finishes cannot keep `run` from returning.
    #[must_use]
    pub fn drain_timeout(mut self, limit: Option<Duration>) -> Self {
        self.drain_timeout = limit;
        self
    }
}

/// Workers over a rate-limited work queue of keys.
#[derive(Debug)]
pub struct Controller<T: QueueItem> {
    queue: RateLimitingQueue<T>,
    options: ControllerOptions,
}

impl<T: QueueItem + Display> Controller<T> {
    /// A controller with a queue named after it, with client-go's default rate limiter.
    pub fn new(options: ControllerOptions) -> Self {
        let queue = RateLimitingQueue::new(QueueConfig::default().name(options.name.clone()));
        Self::with_queue(queue, options)
    }

    /// A controller over a queue you configured (limiter, metrics).
    pub fn with_queue(queue: RateLimitingQueue<T>, options: ControllerOptions) -> Self {
        Self { queue, options }
    }

    /// The queue: give it to event handlers (see [`enqueue_keys`]).
    pub fn queue(&self) -> &RateLimitingQueue<T> {
        &self.queue
    }

    /// Runs the workers until `cancel`; then drains (what workers hold and what is queued
    /// is reconciled) and returns.
    pub async fn run<F, Fut, E>(&self, reconcile: F, cancel: CancellationToken)
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        let mut workers: Vec<_> = (0..self.options.workers)
            .map(|_| {
                let (queue, reconcile) = (self.queue.clone(), reconcile.clone());
                let (max_retries, name) = (self.options.max_retries, self.options.name.clone());
                tokio::spawn(async move {
                    while let Some(item) = queue.get().await {
                        let key = item.item().clone();
                        // A panic in the function itself, before it returns a future, is
                        // caught here; one inside the future by `catch_unwind` below.
                        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| {
                            reconcile(key.clone())
                        })) {
                            Ok(future) => AssertUnwindSafe(future).catch_unwind().await,
                            Err(panic) => Err(panic),
                        };
                        let error = match outcome {
                            Ok(Ok(Action::Done)) => {
                                item.forget();
                                continue;
                            }
                            Ok(Ok(Action::RequeueAfter(delay))) => {
                                queue.forget(&key);
                                item.requeue_after(delay);
                                continue;
                            }
                            Ok(Err(err)) => err.to_string(),
                            Err(panic) => format!(
                                "the reconcile function panicked: {}",
                                crate::panic_message(panic.as_ref())
                            ),
                        };
                        let retries = item.num_requeues();
                        if max_retries.is_some_and(|max| retries >= max) {
                            tracing::error!(controller = %name, %key, retries, "giving up after {retries} retries: {error}");
                            item.forget();
                        } else {
                            tracing::warn!(controller = %name, %key, retries, "reconcile failed, will retry: {error}");
                            item.requeue_rate_limited();
                        }
                    }
                })
            })
            .collect();
        cancel.cancelled().await;
        let drain = async {
            self.queue.shut_down_with_drain().await;
            for worker in workers.iter_mut() {
                let _ = worker.await;
            }
        };
        let drained = match self.options.drain_timeout {
            Some(limit) => tokio::time::timeout(limit, drain).await.is_ok(),
            None => {
                drain.await;
                true
            }
        };
        if !drained {
            tracing::warn!(controller = %self.options.name, "drain timed out; abandoning the reconciles still running");
            self.queue.shut_down();
            for worker in &workers {
                worker.abort();
            }
            for worker in workers.iter_mut().filter(|w| !w.is_finished()) {
                let _ = worker.await;
            }
        }
    }
}

/// A handler that queues the key of every added, updated or deleted object (tombstones
/// included) into `queue`: the usual way to feed a controller from an informer.
pub fn enqueue_keys<K: Resource + Send + Sync + 'static>(
    queue: RateLimitingQueue<ObjectKey>,
) -> HandlerFuncs<K> {
    let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue);
    HandlerFuncs::new()
        .on_add(move |obj: Arc<K>, _| {
            if let Ok(key) = meta_namespace_key(obj.as_ref()) {
                on_add.add(key);
            }
        })
        .on_update(move |_, obj: Arc<K>| {
            if let Ok(key) = meta_namespace_key(obj.as_ref()) {
                on_update.add(key);
            }
        })
        .on_delete(move |gone: DeletedObject<K>| {
            if let Ok(key) = deletion_handling_meta_namespace_key(&gone) {
                on_delete.add(key);
            }
        })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use parking_lot::Mutex;
    use tokio::time::Instant;

    use super::*;
    use crate::workqueue::ItemExponentialFailureRateLimiter;

    fn controller(max_retries: Option<u32>, workers: usize) -> Controller<String> {
        let limiter =
            ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(60));
        let queue = RateLimitingQueue::new(QueueConfig::default().rate_limiter(limiter));
        Controller::with_queue(
            queue,
            ControllerOptions::default()
                .workers(workers)
                .max_retries(max_retries),
        )
    }

    /// Runs `c` with `reconcile` for `secs` of paused time, then stops it.
    async fn run_for<F, Fut>(c: &Controller<String>, secs: u64, reconcile: F)
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, String>> + Send + 'static,
    {
        let cancel = CancellationToken::new();
        let stopper = {
            let cancel = cancel.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(secs)).await;
                cancel.cancel();
            })
        };
        c.run(reconcile, cancel).await;
        stopper.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn success_forgets_and_errors_back_off_until_max_retries() {
        let c = controller(Some(3), 1);
        let calls = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        c.queue().add("ok".into());
        c.queue().add("failing".into());
        let log = calls.clone();
        run_for(&c, 120, move |key: String| {
            log.lock().push((key.clone(), start.elapsed().as_secs()));
            async move {
                if key == "ok" {
                    Ok(Action::Done)
                } else {
                    Err(format!("{key} is broken"))
                }
            }
        })
        .await;
        let calls = calls.lock();
        let failing: Vec<u64> = calls
            .iter()
            .filter(|(k, _)| k == "failing")
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(
            failing,
            [0, 1, 3, 7],
            "1 s, 2 s, 4 s apart, then dropped after 3 retries"
        );
        assert_eq!(calls.iter().filter(|(k, _)| k == "ok").count(), 1);
        assert_eq!(c.queue().num_requeues(&"ok".to_owned()), 0);
        assert_eq!(
            c.queue().num_requeues(&"failing".to_owned()),
            0,
            "forgotten when dropped"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_looks_again_later_and_panics_count_as_errors() {
        let c = controller(None, 1);
        let calls = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        c.queue().add("periodic".into());
        c.queue().add("panics-once".into());
        let (log, panicked) = (calls.clone(), Arc::new(AtomicUsize::new(0)));
        run_for(&c, 25, move |key: String| {
            log.lock().push((key.clone(), start.elapsed().as_secs()));
            let panicked = panicked.clone();
            async move {
                if key == "panics-once" && panicked.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("reconcile bug");
                }
                Ok(if key == "periodic" {
                    Action::RequeueAfter(Duration::from_secs(10))
                } else {
                    Action::Done
                })
            }
        })
        .await;
        let calls = calls.lock();
        let times = |name: &str| {
            calls
                .iter()
                .filter(|(k, _)| k == name)
                .map(|(_, t)| *t)
                .collect::<Vec<_>>()
        };
        assert_eq!(times("periodic"), [0, 10, 20]);
        assert_eq!(
            times("panics-once"),
            [0, 1],
            "retried after the panic, with backoff"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_drains_what_is_held_and_queued() {
        let c = controller(None, 2);
        for i in 0..6 {
            c.queue().add(format!("k{i}"));
        }
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        // Stop at once: the 6 keys (3 s each, 2 workers) are still all reconciled.
        run_for(&c, 0, move |_key: String| {
            let d = d.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(3)).await;
                d.fetch_add(1, Ordering::SeqCst);
                Ok(Action::Done)
            }
        })
        .await;
        assert_eq!(done.load(Ordering::SeqCst), 6);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_key_is_never_reconciled_twice_at_once_and_never_missed() {
        let c = Arc::new(controller(None, 8));
        let (active, max_active, last_seen) = (
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let version = Arc::new(AtomicUsize::new(0));
        let cancel = CancellationToken::new();
        let run = {
            let (c, cancel) = (c.clone(), cancel.clone());
            let (active, max_active, last_seen, version) = (
                active.clone(),
                max_active.clone(),
                last_seen.clone(),
                version.clone(),
            );
            tokio::spawn(async move {
                c.run(
                    move |_key: String| {
                        let (active, max_active, last_seen, version) = (
                            active.clone(),
                            max_active.clone(),
                            last_seen.clone(),
                            version.clone(),
                        );
                        async move {
                            let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                            max_active.fetch_max(now, Ordering::SeqCst);
                            let seen = version.load(Ordering::SeqCst);
                            tokio::task::yield_now().await;
                            last_seen.fetch_max(seen, Ordering::SeqCst);
                            active.fetch_sub(1, Ordering::SeqCst);
                            Ok::<_, String>(Action::Done)
                        }
                    },
                    cancel,
                )
                .await;
            })
        };
        for v in 1..=2000 {
            version.store(v, Ordering::SeqCst);
            c.queue().add("k".into());
            if v % 50 == 0 {
                tokio::task::yield_now().await;
            }
        }
        cancel.cancel();
        run.await.unwrap();
        assert_eq!(
            max_active.load(Ordering::SeqCst),
            1,
            "two workers held the key at once"
        );
        assert_eq!(
            last_seen.load(Ordering::SeqCst),
            2000,
            "the last change was never reconciled"
        );
    }

    #[test]
    fn enqueue_keys_queues_the_key_of_every_change_tombstones_included() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::core::ObjectMeta;

        use crate::informer::ResourceEventHandler;
        let queue: RateLimitingQueue<ObjectKey> = RateLimitingQueue::default();
        let handler = enqueue_keys::<ConfigMap>(queue.clone());
        let cm = |name: &str| {
            Arc::new(ConfigMap {
                metadata: ObjectMeta {
                    namespace: Some("ns".into()),
                    name: Some(name.into()),
                    ..Default::default()
                },
                ..Default::default()
            })
        };
        // Called through the trait: the inherent on_* of HandlerFuncs are its builder.
        ResourceEventHandler::on_add(&handler, cm("a"), true);
        ResourceEventHandler::on_update(&handler, cm("a"), cm("b"));
        let tombstone = DeletedObject::FinalStateUnknown {
            key: ObjectKey::new(Some("ns"), "c"),
            last_known: cm("c"),
        };
        ResourceEventHandler::on_delete(&handler, tombstone);
        ResourceEventHandler::on_add(&handler, cm("a"), false); // already queued: once
        assert_eq!(queue.len(), 3);
    }
}
