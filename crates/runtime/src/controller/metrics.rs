//! Reconcile metrics, named as controller-runtime names them, so existing dashboards and
//! alerts work unchanged.
//!
//! | metric | type | labels | meaning |
//! |---|---|---|---|
//! | `controller_runtime_reconcile_total` | counter | controller, result | reconciles by result: `success`, `error`, `requeue`, `requeue_after` |
//! | `controller_runtime_reconcile_errors_total` | counter | controller | reconciles that returned an error or panicked |
//! | `controller_runtime_reconcile_panics_total` | counter | controller | reconciles that panicked |
//! | `controller_runtime_terminal_reconcile_errors_total` | counter | controller | errors not retried: the error policy answered `Action::Done`, `max_retries` ran out, or the key does not name an object of the kind |
//! | `controller_runtime_reconcile_timeouts_total` | counter | controller | reconciles cancelled at [`reconcile_timeout`](super::ControllerOptions::reconcile_timeout) |
//! | `controller_runtime_reconcile_time_seconds` | histogram | controller | how long each reconcile took |
//! | `controller_runtime_max_concurrent_reconciles` | gauge | controller | the number of workers |
//! | `controller_runtime_active_workers` | gauge | controller | workers reconciling now |
//!
//! Registering them also registers client-go's workqueue metrics (`workqueue_*`, labelled
//! by the controller's name), which every controller's queue records.

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Controller {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerResult {
    controller: String,
    result: &'static str,
}

/// controller-runtime's reconcile-time buckets (5 ms to 60 s).
const BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_time() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The reconcile metrics of any number of controllers, registered once. Give it to each
/// controller with [`ControllerOptions::metrics`](super::ControllerOptions::metrics); the
/// manager does that for its controllers.
///
/// ```
/// use prometheus_client::registry::Registry;
/// use kube_informer::metrics::Metrics;
/// use kube_informer_runtime::controller::{ControllerMetrics, ControllerOptions};
///
/// let mut registry = Registry::default(); // served on `/metrics`
/// let core = Metrics::register(&mut registry); // informers, reflectors, work queues
/// let metrics = ControllerMetrics::register(&mut registry, &core);
/// // Each controller records `controller_runtime_*{controller="ready-pods"}` once it runs.
/// let options = ControllerOptions::default().name("ready-pods").metrics(&metrics);
/// # let _ = options;
/// ```
#[derive(Clone)]
pub struct ControllerMetrics {
    total: Family<ControllerResult, Counter>,
    errors: Family<Controller, Counter>,
    panics: Family<Controller, Counter>,
    terminal: Family<Controller, Counter>,
    timeouts: Family<Controller, Counter>,
    read_your_writes_timeouts: Family<Controller, Counter>,
    time: Family<Controller, Histogram, fn() -> Histogram>,
    max_concurrent: Family<Controller, Gauge>,
    active: Family<Controller, Gauge>,
    core: kube_informer::metrics::Metrics,
}

impl std::fmt::Debug for ControllerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerMetrics").finish_non_exhaustive()
    }
}

/// How a reconcile ended, for the `result` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    Error,
    Panic,
    Timeout,
    Requeue,
    RequeueAfter,
}

impl ControllerMetrics {
    /// Creates the reconcile metrics and registers them in `registry`; the controllers'
    /// work queues record into `core`'s (registered with it, once).
    pub fn register(registry: &mut Registry, core: &kube_informer::metrics::Metrics) -> Self {
        let metrics = Self {
            total: Family::default(),
            errors: Family::default(),
            panics: Family::default(),
            terminal: Family::default(),
            timeouts: Family::default(),
            read_your_writes_timeouts: Family::default(),
            time: Family::new_with_constructor(reconcile_time),
            max_concurrent: Family::default(),
            active: Family::default(),
            core: core.clone(),
        };
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            metrics.total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            metrics.errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            metrics.panics.clone(),
        );
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            metrics.terminal.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_timeouts",
            "Total number of reconciliation timeouts per controller",
            metrics.timeouts.clone(),
        );
        registry.register(
            "controller_runtime_read_your_writes_timeouts",
            "Total number of reconciles that ran before the cache showed their key's own writes, per controller",
            metrics.read_your_writes_timeouts.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            metrics.time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            metrics.max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            metrics.active.clone(),
        );
        metrics
    }

    /// The bundle the controllers' work queues record into.
    pub(crate) fn core(&self) -> &kube_informer::metrics::Metrics {
        &self.core
    }

    fn label(controller: &str) -> Controller {
        Controller {
            controller: controller.to_owned(),
        }
    }

    /// Records the number of workers of `controller`.
    pub(crate) fn set_workers(&self, controller: &str, workers: usize) {
        let workers = i64::try_from(workers).unwrap_or(i64::MAX);
        self.max_concurrent
            .get_or_create(&Self::label(controller))
            .set(workers);
    }

    /// A worker started (`+1`) or finished (`-1`) a reconcile.
    pub(crate) fn active(&self, controller: &str, change: i64) {
        self.active
            .get_or_create(&Self::label(controller))
            .inc_by(change);
    }

    /// A reconcile ran before the cache showed its key's own writes.
    pub(crate) fn read_your_writes_timeout(&self, controller: &str) {
        self.read_your_writes_timeouts
            .get_or_create(&Self::label(controller))
            .inc();
    }

    /// A failure was terminal: not retried until the object changes.
    pub(crate) fn terminal(&self, controller: &str) {
        self.terminal.get_or_create(&Self::label(controller)).inc();
    }

    /// One reconcile ended with `outcome` after `seconds`.
    pub(crate) fn reconciled(&self, controller: &str, outcome: Outcome, seconds: f64) {
        let result = match outcome {
            Outcome::Success => "success",
            Outcome::Error | Outcome::Panic | Outcome::Timeout => "error",
            Outcome::Requeue => "requeue",
            Outcome::RequeueAfter => "requeue_after",
        };
        let labels = ControllerResult {
            controller: controller.to_owned(),
            result,
        };
        self.total.get_or_create(&labels).inc();
        if matches!(outcome, Outcome::Error | Outcome::Panic | Outcome::Timeout) {
            self.errors.get_or_create(&Self::label(controller)).inc();
        }
        if outcome == Outcome::Panic {
            self.panics.get_or_create(&Self::label(controller)).inc();
        }
        if outcome == Outcome::Timeout {
            self.timeouts.get_or_create(&Self::label(controller)).inc();
        }
        self.time
            .get_or_create(&Self::label(controller))
            .observe(seconds);
    }
}
