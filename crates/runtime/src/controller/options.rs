//! [`ControllerOptions`]: how a controller's workers run.

use std::time::Duration;

/// Settings of a [`Controller`](super::Controller).
///
/// ```
/// use std::time::Duration;
/// use kube_informer_runtime::controller::ControllerOptions;
///
/// let options = ControllerOptions::default()
///     .name("ready-pods")
///     .workers(4)
///     .reconcile_timeout(Some(Duration::from_secs(60)))
///     .drain_timeout(Some(Duration::from_secs(20)));
/// ```
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    pub(crate) workers: usize,
    pub(crate) max_retries: Option<u32>,
    pub(crate) name: String,
    pub(crate) drain_timeout: Option<Duration>,
    pub(crate) reconcile_timeout: Option<Duration>,
    pub(crate) metrics: Option<super::ControllerMetrics>,
    /// The shard it reconciles, when sharded.
    pub(crate) shard: Option<crate::sharding::Shard>,
    pub(crate) debounce: Option<Duration>,
    pub(crate) prioritize: bool,
    pub(crate) read_your_writes: Option<Duration>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        Self {
            workers: 2,
            max_retries: None,
            name: "controller".to_owned(),
            drain_timeout: Some(Duration::from_secs(30)),
            reconcile_timeout: None,
            metrics: None,
            shard: None,
            debounce: None,
            prioritize: true,
            read_your_writes: Some(Duration::from_secs(5)),
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

    /// How many times in a row a failing key is retried before it is given up until its
    /// next change (a terminal error, logged with the last error and counted). Default
    /// `None`: retried forever, with the queue's per-key backoff capped at 1000 s, as
    /// controller-runtime does — a failing key is never silently dropped.
    #[must_use]
    pub fn max_retries(mut self, retries: Option<u32>) -> Self {
        self.max_retries = retries;
        self
    }

    /// The controller's name: in metrics, logs, spans and its queue's name.
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// How long stopping may wait for held and queued keys to be reconciled (default 30 s,
    /// controller-runtime's graceful-shutdown default; `None`: as long as it takes). At the
    /// deadline the reconciles still running are cancelled. Under a
    /// [`Manager`](crate::manager::Manager), the manager's shutdown deadline cuts it short.
    #[must_use]
    pub fn drain_timeout(mut self, limit: Option<Duration>) -> Self {
        self.drain_timeout = limit;
        self
    }

    /// How long the next reconcile of a key waits, at most, for the cache to hold what the
    /// reconciles of that key wrote (recorded with [`wrote`](super::wrote), and by the
    /// [`finalizer`](crate::finalizer::finalizer) helper): default 5 s; `None` turns the
    /// wait off. Past the limit the reconcile runs on what the cache has, with a warning and
    /// `controller_runtime_read_your_writes_timeouts_total`. See
    /// [read your own writes](super#read-your-own-writes).
    ///
    /// ```
    /// use std::time::Duration;
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// let options = ControllerOptions::default().read_your_writes(Some(Duration::from_secs(2)));
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn read_your_writes(mut self, limit: Option<Duration>) -> Self {
        self.read_your_writes = limit.filter(|l| !l.is_zero());
        self
    }

    /// Wait until a key has been quiet this long before reconciling it: each change of the
    /// object (or of a related one) restarts its wait, so a burst of changes costs one
    /// reconcile after it ends (kube-runtime's `Config::debounce`; default `None`: at
    /// once). Retries, `RequeueAfter` and resyncs are not delayed. A key that never stays
    /// quiet for `period` is not reconciled until it does: keep it short.
    ///
    /// ```
    /// use std::time::Duration;
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// let options = ControllerOptions::default().debounce(Some(Duration::from_millis(500)));
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn debounce(mut self, period: Option<Duration>) -> Self {
        self.debounce = period.filter(|p| !p.is_zero());
        self
    }

    /// Whether work that can wait goes behind live changes (default `true`, as
    /// controller-runtime's priority queue, on by default since v0.23): the keys of an
    /// informer's initial list, of resyncs and of
    /// [`reconcile_all_on`](super::Controller::reconcile_all_on) are reconciled after the
    /// keys of objects that changed, so a restart with 10,000 objects to go through does not
    /// hold back the one a user just edited. A live change of a key waiting there moves it
    /// forward. `false`: one line, first come first served. (With a
    /// [`debounce`](Self::debounce), every key waits its quiet period instead.)
    #[must_use]
    pub fn prioritize_live_changes(mut self, prioritize: bool) -> Self {
        self.prioritize = prioritize;
        self
    }

    /// How long one reconcile may run before it is cancelled (at its next await point) and
    /// retried with backoff, counted in `controller_runtime_reconcile_timeouts_total`
    /// (default `None`: no limit, as controller-runtime). A hung reconcile otherwise holds
    /// its worker, and its key, forever.
    #[must_use]
    pub fn reconcile_timeout(mut self, limit: Option<Duration>) -> Self {
        self.reconcile_timeout = limit;
        self
    }

    /// Records reconcile and work queue metrics into `metrics` (a
    /// [`Manager`](crate::manager::Manager)'s controllers do: see
    /// [`Manager::controller`](crate::manager::Manager::controller)).
    #[must_use]
    pub fn metrics(mut self, metrics: &super::ControllerMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Reconcile only `shard`'s objects of the sharded `ring` (see
    /// [`sharding`](crate::sharding)): the primary's and each owned kind's informers select
    /// the shard's label, and the reconcile is wrapped in
    /// [`reconcile_sharded`](crate::sharding::reconcile_sharded) (drained objects let go,
    /// moves never taken for deletions). A [`Manager`](crate::manager::Manager) made with
    /// [`ManagerOptions::sharded`](crate::ManagerOptions::sharded) sets it on every
    /// controller it makes.
    #[must_use]
    pub fn sharded(mut self, ring: impl Into<String>, shard: impl Into<String>) -> Self {
        self.shard = Some(crate::sharding::Shard::new(ring.into(), shard.into()));
        self
    }
}
