//! [`ControllerOptions`]: how a controller's workers run.

use std::{borrow::Cow, fmt, sync::Arc, time::Duration};

use kube_informer::{
    ObjectKey,
    workqueue::{
        BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, QueueItem,
        RateLimiter, WorkerScaling,
    },
};

/// The retries' rate limiter of a [`backoff`](ControllerOptions::backoff) (a controller's,
/// or a fleet's): each key's own exponential backoff from `base` to `max`, and all keys
/// together under 10 retries a second with bursts of 100 (client-go's default overall
/// bucket), whichever waits longer.
pub(crate) fn backoff_rate_limiter<T: QueueItem>(
    base: Duration,
    max: Duration,
) -> MaxOfRateLimiter<T> {
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(base, max.max(base))),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

/// Names the fairness group of a key (see [`Fairness::by`]).
pub type GroupOf = Arc<dyn for<'a> Fn(&'a ObjectKey) -> Cow<'a, str> + Send + Sync>;

/// How a controller's queue shares its workers between groups of keys (see
/// [`ControllerOptions::fairness`]).
#[derive(Clone, Default)]
pub enum Fairness {
    /// Namespaces take turns (the default): one namespace's backlog holds back another
    /// namespace's change by at most one reconcile per namespace with work queued.
    /// Cluster-scoped objects are one group.
    #[default]
    ByNamespace,
    /// The groups this function names take turns: a tenant, a team, a cluster. It gets the
    /// key only; read the cache (captured in the closure) for labels. It runs under the
    /// queue's lock on every add: keep it quick and never block in it. A panic in it is
    /// logged and puts the key in the group named `""`.
    By(GroupOf),
    /// One line, first come first served (as controller-runtime's queue).
    Off,
}

impl Fairness {
    /// Groups named by `group_of`.
    ///
    /// ```
    /// use std::borrow::Cow;
    /// use kube_informer_runtime::controller::{ControllerOptions, Fairness};
    ///
    /// // Namespaces are "<tenant>-<env>": the tenant is the group.
    /// let fairness = Fairness::by(|key| {
    ///     let ns = key.namespace().unwrap_or("");
    ///     Cow::Borrowed(ns.split_once('-').map_or(ns, |(tenant, _)| tenant))
    /// });
    /// let options = ControllerOptions::default().fairness(fairness);
    /// # let _ = options;
    /// ```
    pub fn by<F>(group_of: F) -> Self
    where
        F: for<'a> Fn(&'a ObjectKey) -> Cow<'a, str> + Send + Sync + 'static,
    {
        Self::By(Arc::new(group_of))
    }
}

impl fmt::Debug for Fairness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ByNamespace => "ByNamespace",
            Self::By(_) => "By(..)",
            Self::Off => "Off",
        })
    }
}

/// Makes a controller's rate limiter (see [`ControllerOptions::rate_limiter`]).
#[derive(Clone)]
pub(crate) struct MakeLimiter(Arc<dyn Fn() -> Box<dyn RateLimiter<ObjectKey>> + Send + Sync>);

impl MakeLimiter {
    pub(crate) fn make(&self) -> Box<dyn RateLimiter<ObjectKey>> {
        (self.0)()
    }
}

impl fmt::Debug for MakeLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MakeLimiter(..)")
    }
}

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
    pub(crate) fairness: Fairness,
    pub(crate) group_limit: Option<usize>,
    pub(crate) scaling: Option<WorkerScaling>,
    pub(crate) rate_limiter: Option<MakeLimiter>,
    /// The `backoff` asked for, for controllers whose keys are not `ObjectKey`s (a fleet's).
    pub(crate) backoff: Option<(Duration, Duration)>,
    pub(crate) every_replica: bool,
    /// Which of `group_limit` and `reconcile_timeout` were set by the caller: a fleet
    /// controller gives the others its own defaults.
    pub(crate) explicit: Explicit,
}

/// Options set explicitly (even to `None`), where a fleet's defaults differ.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Explicit {
    pub(crate) group_limit: bool,
    pub(crate) reconcile_timeout: bool,
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
            fairness: Fairness::default(),
            group_limit: None,
            scaling: None,
            rate_limiter: None,
            backoff: None,
            every_replica: false,
            explicit: Explicit::default(),
        }
    }
}

impl ControllerOptions {
    /// How many keys are reconciled at once (default 2; at least 1). Replaces a
    /// [`worker_scaling`](Self::worker_scaling).
    #[must_use]
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self.scaling = None;
        self
    }

    /// Workers that follow the work: between the scaling's floor and ceiling, doubled while
    /// the oldest queued key waits past its target, one retired per quiet period (see
    /// [`WorkerScaling`]). Each change is logged and sets
    /// `controller_runtime_max_concurrent_reconciles`. Replaces [`workers`](Self::workers).
    ///
    /// ```
    /// use std::time::Duration;
    /// use kube_informer::workqueue::WorkerScaling;
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// let scaling = WorkerScaling::new(2, 32).target_wait(Duration::from_secs(2));
    /// let options = ControllerOptions::default().worker_scaling(scaling);
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn worker_scaling(mut self, scaling: WorkerScaling) -> Self {
        self.workers = scaling.floor();
        self.scaling = Some(scaling);
        self
    }

    /// How the workers are shared between groups of keys (default
    /// [`Fairness::ByNamespace`]): groups with queued keys take turns, one reconcile each,
    /// so while a group waits no other group is reconciled twice. A tenant that creates
    /// 10,000 objects delays another tenant's one change by one reconcile per group with
    /// work, not by 10,000. Live changes still go before
    /// [backlog](Self::prioritize_live_changes), in every group. See
    /// [fairness](super#fairness-between-namespaces).
    #[must_use]
    pub fn fairness(mut self, fairness: Fairness) -> Self {
        self.fairness = fairness;
        self
    }

    /// At most `limit` keys of one [fairness](Self::fairness) group reconciled at once
    /// (default `None`: no limit; in a [fleet](crate::fleet::FleetController), half the
    /// workers rounded up, a group being a member), so one tenant's slow reconciles cannot
    /// take every worker; its other keys wait while the other groups use the rest.
    #[must_use]
    pub fn max_in_flight_per_group(mut self, limit: Option<usize>) -> Self {
        self.group_limit = limit;
        self.explicit.group_limit = true;
        self
    }

    /// How many times in a row a failing key is retried before it is given up until its
    /// next change (a terminal error, logged with the last error and counted). Default
    /// `None`: retried forever, with the per-key [backoff](Self::backoff) (5 ms doubling to
    /// 1000 s by default), as controller-runtime does — a failing key is never silently
    /// dropped.
    #[must_use]
    pub fn max_retries(mut self, retries: Option<u32>) -> Self {
        self.max_retries = retries;
        self
    }

    /// How long a failing key waits before its retry: `base` after the first failure,
    /// doubled after each further one, never more than `max` (default 5 ms to 1000 s,
    /// client-go's and controller-runtime's). A success, or a change given up after
    /// [`max_retries`](Self::max_retries), starts the key over at `base`. Retries of all keys
    /// together stay under 10 a second with bursts of 100, as by default. Replaces a
    /// [`rate_limiter`](Self::rate_limiter).
    ///
    /// ```
    /// use std::time::Duration;
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// // A cloud API that throttles: start at 2 s, never wait more than 5 minutes.
    /// let options = ControllerOptions::default()
    ///     .backoff(Duration::from_secs(2), Duration::from_secs(300));
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn backoff(self, base: Duration, max: Duration) -> Self {
        let mut options = self.rate_limiter(move || backoff_rate_limiter(base, max));
        options.backoff = Some((base, max.max(base)));
        options
    }

    /// The rate limiter of the controller's retries (`Action::Retry`, errors, timeouts),
    /// made by `make` when the controller is built (controller-runtime's
    /// `Options.RateLimiter`). Replaces a [`backoff`](Self::backoff). `RequeueAfter` and
    /// changes are not limited by it. (A [fleet controller](crate::fleet::FleetController),
    /// whose keys carry the cluster, takes a `backoff` only.)
    ///
    /// ```
    /// use std::time::Duration;
    /// use kube_informer::workqueue::ItemFastSlowRateLimiter;
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// // Five quick retries 1 s apart, then once a minute.
    /// let options = ControllerOptions::default().rate_limiter(|| {
    ///     ItemFastSlowRateLimiter::new(Duration::from_secs(1), Duration::from_secs(60), 5)
    /// });
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn rate_limiter<F, R>(mut self, make: F) -> Self
    where
        F: Fn() -> R + Send + Sync + 'static,
        R: RateLimiter<ObjectKey> + 'static,
    {
        self.rate_limiter = Some(MakeLimiter(Arc::new(move || Box::new(make()))));
        self.backoff = None;
        self
    }

    /// Run on every replica, not only on the elected leader (default `false`): for a
    /// controller that warms a cache, reports each replica's own status or serves reads,
    /// under a [`Manager`](crate::manager::Manager) with
    /// [leader election](crate::ManagerOptions::leader_election). Its reconciles run on
    /// all replicas at once, so it must not make writes that another replica's reconcile
    /// of the same object would fight. Without election every controller runs anyway.
    #[must_use]
    pub fn runs_on_every_replica(mut self, every: bool) -> Self {
        self.every_replica = every;
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
    /// (default `None`: no limit, as controller-runtime; in a
    /// [fleet](crate::fleet::FleetController), 2 minutes). A hung reconcile otherwise holds
    /// its worker, and its key, forever.
    #[must_use]
    pub fn reconcile_timeout(mut self, limit: Option<Duration>) -> Self {
        self.reconcile_timeout = limit;
        self.explicit.reconcile_timeout = true;
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

impl ControllerOptions {
    /// These options with a fleet's defaults where the caller set none: at most half the
    /// workers (rounded up; with worker scaling, half its floor) per member, and a
    /// reconcile deadline — so that with no option set and two workers or more, a member
    /// that never answers holds some workers for a while, never all of them for ever.
    pub(crate) fn with_fleet_defaults(mut self) -> Self {
        if !self.explicit.group_limit {
            // The floor: the workers there always are (half the ceiling could be all of
            // them while scaled down).
            let most = self.scaling.as_ref().map_or(self.workers, |s| s.floor());
            self.group_limit = Some(most.div_ceil(2).max(1));
        }
        if !self.explicit.reconcile_timeout {
            self.reconcile_timeout = Some(FLEET_RECONCILE_TIMEOUT);
        }
        self
    }
}

/// A fleet controller's reconcile deadline unless set.
pub(crate) const FLEET_RECONCILE_TIMEOUT: Duration = Duration::from_secs(120);
