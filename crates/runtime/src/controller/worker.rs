//! One reconcile as a worker runs it: the key checked, the object looked up in the cache,
//! the user's function called inside a span (with a deadline, if set), its outcome counted,
//! an error handed to the error policy, a panic caught — and one log line per failure.

use std::{future::Future, panic::AssertUnwindSafe, sync::Arc, time::Duration};

use futures_util::FutureExt;
use kube_informer::{ObjectKey, ReadOnlyStore, workqueue::Requeue};
use tokio::time::Instant;
use tracing::Instrument;

use super::{
    Action, Cached, ControllerMetrics, ErrorPolicy, Reconciler,
    metrics::Outcome,
    own_writes::{self, Settled},
    trigger::{Trigger, Triggers, reconcile_id},
};
use crate::util::panic_message;

/// A controller's error policy, shared by its workers.
pub(crate) type SharedPolicy<K, E, Ctx> = Arc<dyn ErrorPolicy<K, E, Ctx>>;

/// Everything a worker needs to reconcile one key.
pub(super) struct Worker<K, Ctx, R: Reconciler<K, Ctx>> {
    pub(super) name: String,
    pub(super) namespaced: bool,
    pub(super) store: ReadOnlyStore<K>,
    pub(super) debounce: Option<Arc<super::enqueue::Debounce>>,
    pub(super) metrics: Option<ControllerMetrics>,
    pub(super) max_retries: Option<u32>,
    pub(super) timeout: Option<Duration>,
    pub(super) reconcile: Arc<R>,
    pub(super) error_policy: SharedPolicy<K, R::Error, Ctx>,
    pub(super) ctx: Arc<Ctx>,
    pub(super) own_writes: Arc<super::own_writes::OwnWrites>,
    pub(super) triggers: Arc<Triggers>,
    /// The reconciled kind, for the span.
    pub(super) kind: Arc<str>,
    /// The fleet member whose object it reconciles (a fleet controller's), for the span.
    pub(super) cluster: Option<Arc<str>>,
}

/// Counts a worker as active while it lives (also when its reconcile is cancelled).
struct Active {
    metrics: Option<ControllerMetrics>,
    name: String,
}

impl Active {
    fn start(metrics: Option<ControllerMetrics>, name: String) -> Self {
        if let Some(m) = &metrics {
            m.active(&name, 1);
        }
        Self { metrics, name }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        if let Some(m) = &self.metrics {
            m.active(&self.name, -1);
        }
    }
}

/// How one reconcile ended, before the retry decision.
enum Ran<E> {
    Acted(Action),
    Failed(E),
    Panicked(String),
    TimedOut(Duration),
}

impl<K, Ctx, R> Worker<K, Ctx, R>
where
    K: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    R: Reconciler<K, Ctx>,
{
    /// Reconciles `key` (its `attempt`th try in a row) and says what the queue does with it
    /// next. Errors, panics and timeouts are turned into a [`Requeue`] here, each logged
    /// once.
    pub(super) fn call(
        &self,
        key: ObjectKey,
        attempt: u32,
    ) -> impl Future<Output = Requeue> + Send + 'static + use<K, Ctx, R> {
        // Still changing: back in the queue for the rest of its quiet period, not reconciled.
        let quiet_left = self.debounce.as_ref().and_then(|d| d.wait_left(&key));
        let span = self.span(&key, attempt, quiet_left.is_none());
        let triggers = self.triggers.clone();
        let (name, metrics) = (self.name.clone(), self.metrics.clone());
        let (max_retries, timeout) = (self.max_retries, self.timeout);
        let malformed = self.malformed(&key);
        let (reconcile, policy, ctx) = (
            self.reconcile.clone(),
            self.error_policy.clone(),
            self.ctx.clone(),
        );
        let (store, own_writes) = (self.store.clone(), self.own_writes.clone());
        async move {
            if let Some(left) = quiet_left {
                return Requeue::After(left);
            }
            if let Some(why) = malformed {
                tracing::error!("not reconciled: {why}");
                if let Some(m) = &metrics {
                    m.terminal(&name);
                }
                return Requeue::Never;
            }
            // What the last reconciles of this key wrote is in the cache before it is read.
            if let Settled::TimedOut { limit } = own_writes.settle(&key).await {
                tracing::warn!(
                    "the cache did not show this key's own writes within {limit:?}; reconciling on what it has"
                );
                if let Some(m) = &metrics {
                    m.read_your_writes_timeout(&name);
                }
            }
            let cached = match store.get_by_key(key.as_str()) {
                Some(obj) => Cached::Present(obj),
                None => Cached::Gone(key.clone()),
            };
            let _active = Active::start(metrics.clone(), name.clone());
            let started = Instant::now();
            let input = (cached.clone(), ctx.clone());
            let record = own_writes.record_for();
            let reconciling = run_once(move || reconcile.reconcile(input.0, input.1), timeout);
            let ran = own_writes::recording(Arc::clone(&record), reconciling).await;
            own_writes.record(&key, &record);
            let (outcome, action, failure) = match ran {
                Ran::Acted(action) => {
                    let outcome = match action {
                        Action::Done => Outcome::Success,
                        Action::RequeueAfter(_) => Outcome::RequeueAfter,
                        Action::Retry => Outcome::Requeue,
                    };
                    let failure = (action == Action::Retry).then(|| "the reconcile asked for a retry".to_owned());
                    (outcome, action, failure)
                }
                Ran::Failed(err) => {
                    let decide = AssertUnwindSafe(|| policy(&cached, &err, &ctx));
                    let action = std::panic::catch_unwind(decide).unwrap_or_else(|panic| {
                        let message = panic_message(panic.as_ref());
                        tracing::error!("the error policy panicked: {message}; retrying");
                        Action::Retry
                    });
                    (Outcome::Error, action, Some(err.to_string()))
                }
                Ran::Panicked(message) => (
                    Outcome::Panic,
                    Action::Retry,
                    Some(format!("the reconcile panicked: {message}")),
                ),
                Ran::TimedOut(limit) => (
                    Outcome::Timeout,
                    Action::Retry,
                    Some(format!("the reconcile did not finish within {limit:?} and was cancelled")),
                ),
            };
            if let Some(m) = &metrics {
                m.reconciled(&name, outcome, started.elapsed().as_secs_f64());
            }
            let Some(failure) = failure else {
                return requeue(action, &triggers, &key);
            };
            match action {
                Action::Done => {
                    tracing::error!(error = %failure, "reconcile failed; not retried (terminal)");
                    if let Some(m) = &metrics {
                        m.terminal(&name);
                    }
                    Requeue::Never
                }
                Action::Retry if max_retries.is_some_and(|max| attempt > max) => {
                    tracing::error!(error = %failure, "reconcile failed {attempt} times in a row; giving up until the object changes");
                    if let Some(m) = &metrics {
                        m.terminal(&name);
                    }
                    Requeue::Never
                }
                action => {
                    tracing::warn!(error = %failure, "reconcile failed; will retry");
                    requeue(action, &triggers, &key)
                }
            }
        }
        .instrument(span)
    }

    /// The reconcile's span: the controller, the kind, the object, a reconcile id, what
    /// queued it (taken from the pending triggers when it is reconciled now) and the
    /// attempt. API requests made inside it (kube's `HTTP` spans) are its children.
    fn span(&self, key: &ObjectKey, attempt: u32, now: bool) -> tracing::Span {
        let trigger = now.then(|| self.triggers.take(key)).flatten();
        let trigger = trigger.map_or_else(|| "unknown".to_owned(), |t| t.to_string());
        let span = tracing::info_span!(
            "reconcile",
            controller = %self.name,
            cluster = tracing::field::Empty,
            kind = %self.kind,
            namespace = key.namespace().unwrap_or_default(),
            name = key.name(),
            reconcile_id = %reconcile_id(),
            trigger = %trigger,
            object = %key,
            attempt,
        );
        if let Some(cluster) = &self.cluster {
            span.record("cluster", &**cluster);
        }
        span
    }

    /// Why `key` cannot name an object of this kind, if it cannot (a namespaced kind needs
    /// `namespace/name`, a cluster-scoped one a bare `name`).
    fn malformed(&self, key: &ObjectKey) -> Option<String> {
        match kube_informer::split_meta_namespace_key(key.as_str()) {
            Err(err) => Some(err.to_string()),
            Ok((None, _)) if self.namespaced => Some(format!(
                "the key {key:?} has no namespace, but the kind is namespaced"
            )),
            Ok((Some(_), _)) if !self.namespaced => Some(format!(
                "the key {key:?} has a namespace, but the kind is cluster-scoped"
            )),
            Ok(_) => None,
        }
    }
}

/// What the queue does with a key after `action`; a requeue is the key's next trigger
/// (unless a change queued it first).
fn requeue(action: Action, triggers: &Triggers, key: &ObjectKey) -> Requeue {
    match action {
        Action::Done => Requeue::Never,
        Action::RequeueAfter(delay) => {
            triggers.note(key, || Trigger::own("requeue_after"));
            Requeue::After(delay)
        }
        Action::Retry => {
            triggers.note(key, || Trigger::own("retry"));
            Requeue::RateLimited
        }
    }
}

/// Runs one reconcile to its end, its panic (in the function or its future), or its
/// deadline (then its future is dropped).
async fn run_once<E, Fut: Future<Output = Result<Action, E>>>(
    reconcile: impl FnOnce() -> Fut,
    timeout: Option<Duration>,
) -> Ran<E> {
    let future = match std::panic::catch_unwind(AssertUnwindSafe(reconcile)) {
        Ok(future) => future,
        Err(panic) => return Ran::Panicked(panic_message(panic.as_ref())),
    };
    let guarded = AssertUnwindSafe(future).catch_unwind();
    let ran = match timeout {
        Some(limit) => match tokio::time::timeout(limit, guarded).await {
            Ok(ran) => ran,
            Err(_) => return Ran::TimedOut(limit),
        },
        None => guarded.await,
    };
    match ran {
        Ok(Ok(action)) => Ran::Acted(action),
        Ok(Err(err)) => Ran::Failed(err),
        Err(panic) => Ran::Panicked(panic_message(panic.as_ref())),
    }
}
