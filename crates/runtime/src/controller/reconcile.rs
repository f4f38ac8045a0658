//! One reconcile as a worker runs it: the object looked up in the cache, the user's
//! function called inside a span, its outcome counted, an error handed to the error
//! policy, a panic caught.

use std::{
    convert::Infallible, fmt::Display, future::Future, panic::AssertUnwindSafe, sync::Arc,
    time::Instant,
};

use futures_util::FutureExt;
use kube_informer::{ObjectKey, ReadOnlyStore, controller::Action, workqueue::RateLimitingQueue};
use tracing::Instrument;

use super::{Cached, ControllerMetrics, metrics::Outcome};

type Policy<K, E, Ctx> = dyn Fn(&Cached<K>, &E, &Ctx) -> Action + Send + Sync;

/// Everything a worker needs to reconcile one key.
pub(super) struct Worker<K, Ctx, E, R> {
    pub(super) name: String,
    pub(super) store: ReadOnlyStore<K>,
    pub(super) queue: RateLimitingQueue<ObjectKey>,
    pub(super) metrics: Option<ControllerMetrics>,
    pub(super) reconcile: Arc<R>,
    pub(super) error_policy: Arc<Policy<K, E, Ctx>>,
    pub(super) ctx: Arc<Ctx>,
}

/// Counts a worker as active while it lives.
struct Active<'a> {
    metrics: Option<&'a ControllerMetrics>,
    name: &'a str,
}

impl<'a> Active<'a> {
    fn start(metrics: Option<&'a ControllerMetrics>, name: &'a str) -> Self {
        if let Some(m) = metrics {
            m.active(name, 1);
        }
        Self { metrics, name }
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.metrics {
            m.active(self.name, -1);
        }
    }
}

impl<K, Ctx, E, R, Fut> Worker<K, Ctx, E, R>
where
    K: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    E: Display + Send + 'static,
    R: Fn(Cached<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    /// Reconciles `key`; always `Ok`: errors and panics are turned into an [`Action`] here.
    pub(super) fn call(
        &self,
        key: ObjectKey,
    ) -> impl Future<Output = Result<Action, Infallible>> + Send + 'static + use<K, Ctx, E, R, Fut>
    {
        let cached = match self.store.get_by_key(key.as_str()) {
            Some(obj) => Cached::Present(obj),
            None => Cached::Gone(key.clone()),
        };
        let attempt = self.queue.num_requeues(&key) + 1;
        let span =
            tracing::info_span!("reconcile", controller = %self.name, object = %key, attempt);
        let (name, metrics) = (self.name.clone(), self.metrics.clone());
        let (reconcile, policy, ctx) = (
            self.reconcile.clone(),
            self.error_policy.clone(),
            self.ctx.clone(),
        );
        async move {
            let _active = Active::start(metrics.as_ref(), &name);
            let started = Instant::now();
            let input = cached.clone();
            let ran = AssertUnwindSafe(async move {
                reconcile(input, ctx.clone()).await.map_err(|e| (e, ctx))
            })
            .catch_unwind()
            .await;
            let (outcome, action) = match ran {
                Ok(Ok(action)) => {
                    let outcome = match action {
                        Action::Done => Outcome::Success,
                        Action::RequeueAfter(_) => Outcome::RequeueAfter,
                        Action::Retry => Outcome::Requeue,
                    };
                    (outcome, action)
                }
                Ok(Err((err, ctx))) => {
                    tracing::warn!(error = %err, "reconcile failed");
                    let policy = AssertUnwindSafe(|| policy(&cached, &err, &ctx));
                    let action = std::panic::catch_unwind(policy).unwrap_or(Action::Retry);
                    (Outcome::Error, action)
                }
                Err(panic) => {
                    let message = panic_message(panic.as_ref());
                    tracing::error!("reconcile panicked: {message}");
                    (Outcome::Panic, Action::Retry)
                }
            };
            if let Some(m) = &metrics {
                m.reconciled(&name, outcome, started.elapsed().as_secs_f64());
            }
            Ok(action)
        }
        .instrument(span)
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}
