//! [`ManagerOptions`]: the endpoints' address, shutdown, leader election, probe thresholds.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use kube_informer::factory::FactoryOptions;

use crate::{leader_election::LeaderElectionConfig, lease::LeaseStore};

/// Settings of a [`Manager`](super::Manager).
///
/// ```
/// use std::time::Duration;
/// use kube_informer_runtime::{leader_election::LeaderElectionConfig, manager::ManagerOptions};
///
/// let options = ManagerOptions::default()
///     .bind(([0, 0, 0, 0], 9443).into())
///     .shutdown_timeout(Duration::from_secs(20))
///     .leader_election(LeaderElectionConfig::new("my-operator"));
/// # let _ = options;
/// ```
#[derive(Clone)]
pub struct ManagerOptions {
    pub(crate) bind: Option<SocketAddr>,
    pub(crate) shutdown_timeout: Duration,
    pub(crate) leader_election: Option<LeaderElectionConfig>,
    pub(crate) lease_store: Option<Arc<dyn LeaseStore>>,
    pub(crate) max_watch_failures: u32,
    pub(crate) factory: FactoryOptions,
    pub(crate) sharding: Option<super::sharding::Sharding>,
    #[cfg(feature = "tls")]
    pub(crate) secure_metrics: Option<super::SecureMetrics>,
    /// Whether `/debug/pprof/profile` is served.
    pub(crate) profiling: bool,
}

impl std::fmt::Debug for ManagerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ManagerOptions")
            .field("bind", &self.bind)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("leader_election", &self.leader_election)
            .field("lease_store", &self.lease_store.as_ref().map(|_| "custom"))
            .field("max_watch_failures", &self.max_watch_failures)
            .field("factory", &self.factory)
            .field("sharding", &self.sharding)
            .finish()
    }
}

impl Default for ManagerOptions {
    fn default() -> Self {
        Self {
            bind: Some(SocketAddr::from(([0, 0, 0, 0], DEFAULT_PORT))),
            shutdown_timeout: Duration::from_secs(30),
            leader_election: None,
            lease_store: None,
            max_watch_failures: 10,
            factory: FactoryOptions::default(),
            sharding: None,
            #[cfg(feature = "tls")]
            secure_metrics: None,
            profiling: false,
        }
    }
}

/// The endpoints' default port: controller-runtime's health-probe port, so that the
/// manifests of kubebuilder-made operators fit, and not 8080, where many tools listen.
pub(crate) const DEFAULT_PORT: u16 = 8081;

impl ManagerOptions {
    /// Options for a manager in a test: endpoints on a free loopback port (so that any
    /// number of managers run side by side; read it from
    /// [`Manager::endpoints`](super::Manager::endpoints)), a 5 s shutdown deadline, the
    /// rest default.
    ///
    /// ```
    /// use kube_informer_runtime::ManagerOptions;
    ///
    /// let options = ManagerOptions::for_tests();
    /// # let _ = options;
    /// ```
    #[cfg(feature = "testing")]
    pub fn for_tests() -> Self {
        Self::default()
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .shutdown_timeout(Duration::from_secs(5))
    }

    /// Where `/healthz`, `/readyz` and `/metrics` are served (default `0.0.0.0:8081`:
    /// every interface, since the kubelet probes the pod's IP; port 0 picks a free one,
    /// see [`Manager::endpoints`](super::Manager::endpoints)). The address is bound when
    /// the manager runs, not when it is built.
    #[must_use]
    pub fn bind(mut self, addr: SocketAddr) -> Self {
        self.bind = Some(addr);
        self
    }

    /// Serve `/metrics` over HTTPS, only to callers the API server authenticates and
    /// authorizes (see [`SecureMetrics`](super::SecureMetrics)); the plain endpoints keep
    /// `/healthz` and `/readyz` (the kubelet probes them without a token) and answer 404 for
    /// `/metrics`.
    #[cfg(feature = "tls")]
    #[must_use]
    pub fn secure_metrics(mut self, secure: super::SecureMetrics) -> Self {
        self.secure_metrics = Some(secure);
        self
    }

    /// Serve `/debug/pprof/profile?seconds=N` (default off): a CPU profile of the process in
    /// pprof's format, for `go tool pprof` or Google's `pprof`, on the metrics port — behind
    /// the [secure metrics](Self::secure_metrics)' authentication when that is on (the
    /// caller may `get` the non-resource URL `/debug/pprof/profile`), on the plain port
    /// otherwise. A profile shows what the process runs: turn it on where only operators of
    /// the cluster can reach the port. See docs/operations.md.
    ///
    /// ```
    /// use kube_informer_runtime::ManagerOptions;
    ///
    /// let options = ManagerOptions::default().profiling(true);
    /// # let _ = options;
    /// ```
    #[cfg(feature = "profiling")]
    #[must_use]
    pub fn profiling(mut self, on: bool) -> Self {
        self.profiling = on;
        self
    }

    /// Serve no endpoints.
    #[must_use]
    pub fn no_endpoints(mut self) -> Self {
        self.bind = None;
        self
    }

    /// How long a graceful shutdown may take in all (default 30 s, controller-runtime's).
    /// In-flight and queued reconciles drain until the last fifth of it (at most 5 s)
    /// remains; then what still runs is cancelled and awaited, informers stop, and the
    /// Lease is released — each step bounded by the deadline. The Lease is released only
    /// once every reconcile has stopped (otherwise it is left to expire, so no new leader
    /// overlaps a reconcile that would not stop). A second SIGTERM/SIGINT stops at once.
    #[must_use]
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Run the controllers only while this replica leads (see
    /// [`leader_election`](crate::leader_election)). Caches are filled on every replica, so
    /// a new leader starts warm.
    #[must_use]
    pub fn leader_election(mut self, config: LeaderElectionConfig) -> Self {
        self.leader_election = Some(config);
        self
    }

    /// Where the Lease lives (default: the API server, through the manager's client);
    /// e.g. `MemoryLeases` (feature `testing`) to test leader-elected managers
    /// on a paused clock.
    #[must_use]
    pub fn lease_store(mut self, store: Arc<dyn LeaseStore>) -> Self {
        self.lease_store = Some(store);
        self
    }

    /// The informer factory's options (namespace, selectors, resync, reflector tuning):
    /// every cache the manager's controllers read. Its informer and reflector metrics are
    /// registered on the manager's `/metrics` whatever these say.
    ///
    /// ```
    /// use kube_informer::{FactoryOptions, Selectors};
    /// use kube_informer_runtime::manager::ManagerOptions;
    ///
    /// let shop = Selectors::default().in_namespace("shop");
    /// let options = ManagerOptions::default().factory(FactoryOptions::default().selectors(shop));
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn factory(mut self, options: FactoryOptions) -> Self {
        self.factory = options;
        self
    }

    /// `/readyz` fails while an informer has failed this many lists/watches in a row
    /// (default 10), so a replica whose watches cannot recover is taken out of Service
    /// endpoints. `/healthz` never fails on it: an API-server outage must not get every
    /// replica restarted at once.
    #[must_use]
    pub fn max_watch_failures(mut self, failures: u32) -> Self {
        self.max_watch_failures = failures.max(1);
        self
    }

    /// Run as `shard` of the sharded `ring`: N replicas, each caching and reconciling about
    /// 1/N of the objects (see [`sharding`](crate::sharding)). The replica holds the shard
    /// Lease `<ring>-<shard>` instead of competing for one leader Lease (its controllers run
    /// while it holds it and are halted the moment it cannot renew, exactly as under
    /// [`leader_election`](Self::leader_election), whose namespace and durations it takes
    /// when set); every controller the manager makes is
    /// [sharded](crate::ControllerOptions::sharded); and one replica, elected on the Lease
    /// `<ring>-sharder`, labels the objects of every sharded controller's kinds each
    /// `every` (5 s by default through [`ManagerOptions::sharded`]). Reconcile functions do
    /// not change. `shard` must be unique and stable per replica (a StatefulSet's pod name).
    /// RBAC ([`Manager::rbac`](super::Manager::rbac) prints it): the Leases (get, create,
    /// update, list) in the Lease namespace, and get, list, watch and patch on the sharded
    /// kinds where they are sharded.
    ///
    /// ```
    /// use kube_informer_runtime::manager::ManagerOptions;
    ///
    /// let options = ManagerOptions::default().sharded("web", "web-0");
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn sharded(mut self, ring: impl Into<String>, shard: impl Into<String>) -> Self {
        self.sharding = Some(super::sharding::Sharding::new(ring.into(), shard.into()));
        self
    }

    /// How often the elected sharder observes the shard Leases and plans every object
    /// again (default 5 s): a dead shard's objects move within its Lease's duration plus
    /// this, and a joining shard gets its share from the next tick. A new or changed object
    /// is placed as soon as its event reaches the sharder's cache, not at a tick.
    #[must_use]
    pub fn sharding_period(mut self, every: Duration) -> Self {
        if let Some(sharding) = &mut self.sharding {
            sharding.every = every;
        }
        self
    }

    /// Shard by hash ranges instead of labels (after [`sharded`](Self::sharded)): nothing
    /// is written to the sharded objects. The hash space of `field` (FNV-1a 64, KEP-5866)
    /// is cut into 64 slots; the replica elected on `<ring>-slot-coordinator` assigns them to the
    /// live replicas in the Lease `<ring>-slot-table`, and each replica's informers for
    /// its controllers' kinds list and watch only its slots (`shardSelector`, filtered by
    /// the client too, so a server without the `ShardedListAndWatch` gate costs traffic,
    /// never correctness). A slot moves only once its holder has stopped reconciling it
    /// (see [`sharding`](crate::sharding)).
    ///
    /// - [`ShardField::Namespace`](kube_informer::list_watch::ShardField::Namespace): a
    ///   namespace's objects share a replica, so owned children are listed by the same
    ///   slots as their owners; few namespaces spread unevenly, and names that differ only
    ///   at the end (`team-01`, `team-02`) fall in one slot.
    /// - [`ShardField::Uid`](kube_informer::list_watch::ShardField::Uid): objects spread
    ///   evenly; owned children are cached whole on every replica (their owner's uid is not
    ///   theirs), and reconciled only where their owner is.
    ///
    /// RBAC: no patch on the sharded kinds; the Leases as in label mode.
    ///
    /// ```
    /// use kube_informer::list_watch::ShardField;
    /// use kube_informer_runtime::manager::ManagerOptions;
    ///
    /// let options = ManagerOptions::default()
    ///     .sharded("web", "web-0")
    ///     .hash_ranges(ShardField::Namespace);
    /// # let _ = options;
    /// ```
    #[must_use]
    pub fn hash_ranges(mut self, field: kube_informer::list_watch::ShardField) -> Self {
        if let Some(sharding) = &mut self.sharding {
            sharding.ranges = Some(field);
        }
        self
    }
}
