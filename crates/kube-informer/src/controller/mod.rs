//! Worker scaffolding: N workers draining a [`RateLimitingQueue`], calling your reconcile
//! function with each key and acting on its result.
//!
//! - `Ok(Action::Done)`: the key is forgotten (its backoff starts over next time).
//! - `Ok(Action::RequeueAfter(d))`: looked at again after `d` (a periodic check); a success,
//!   so the key's failure count is forgotten too.
//! - `Ok(Action::Retry)`: retried like an error, without one to log (an error policy's
//!   choice).
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
    /// Look again after the rate limiter's delay for this key, as after an error: the
    /// failure count grows, and the key is dropped after `max_retries` (for an error
    /// policy that decided to retry).
    Retry,
}

/// Settings of a [`Controller`].
///
/// ```
/// use std::time::Duration;
/// use kube_informer::controller::ControllerOptions;
///
/// let options = ControllerOptions::default()
///     .name("ready-pods")
///     .workers(4)
///     .max_retries(Some(10))
///     .drain_timeout(Some(Duration::from_secs(20)));
/// assert_eq!((options.controller_name(), options.worker_count()), ("ready-pods", 4));
/// ```
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

    /// The controller's name.
    pub fn controller_name(&self) -> &str {
        &self.name
    }

    /// How many workers reconcile at once.
    pub fn worker_count(&self) -> usize {
        self.workers
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
                            Ok(Ok(Action::Retry)) => "the reconcile asked for a retry".to_owned(),
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
mod tests;
