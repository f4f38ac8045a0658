//! [`Manager`]: one object that owns the informer factory and the controllers of a
//! process, serves its health and metrics, elects a leader, and shuts down gracefully.
//!
//! - Caches first: informers start at once on every replica; each controller reconciles
//!   only after the caches it reads have synced.
//! - `/healthz` (the process: tasks alive, the elector not starved), `/readyz` (caches
//!   synced and their watches healthy, not shutting down — a synced standby is ready, so
//!   rolling updates work), `/metrics` (controller-runtime's reconcile, webhook and
//!   certificate-watcher metrics, client-go's workqueue, informer, reflector, `rest_client_*`
//!   and `leader_election_master_status` metrics, and the `process_*` metrics), each
//!   with `?verbose`, plus your own checks ([`add_healthz_check`](Manager::add_healthz_check),
//!   [`add_readyz_check`](Manager::add_readyz_check)).
//! - With leader election, controllers run only while this replica leads (those that
//!   [run on every replica](crate::controller::ControllerOptions::runs_on_every_replica)
//!   run on all).
//!
//! # The guarantee, and its limits
//!
//! **Two replicas never reconcile at once.** The instant this replica can no longer prove
//! it leads (its renew deadline passed without a renewal), every reconcile in flight is
//! cancelled and awaited, the controllers' handlers are detached and their queues shut,
//! and [`run`](Manager::run) returns [`ManagerError::LeadershipLost`] (restart the process
//! to campaign again, as controller-runtime does). The election gives that instant a
//! margin of `lease_duration − renew_deadline` (at least 1 s) before any other replica can
//! acquire (see [`leader_election`](crate::leader_election) for the proof). Dropping the
//! `run` future (a killed task) stops the same things, without waiting: workers, feeds,
//! handlers, informers, endpoints and the election are all owned by it.
//!
//! Limits: a reconcile is cancelled at its next await point, so **reconciles must be
//! cancel-safe**; code that blocks a thread is not interrupted (if it starves the
//! elector, `/healthz` fails so the kubelet restarts the pod). A request already on the
//! wire when leadership ends may still land.
//!
//! # Shutdown
//!
//! SIGTERM or SIGINT (or `graceful` of [`run_until`](Manager::run_until)): reconciles
//! drain, then what still runs is cancelled, informers stop and the Lease is released,
//! all within [`ManagerOptions::shutdown_timeout`]; a second signal stops at once; a
//! leadership loss during the drain cancels at once.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
//! use kube_informer_runtime::{controller::{Action, Cached, ControllerOptions}, leader_election::LeaderElectionConfig, manager::{Manager, ManagerOptions}};
//!
//! async fn reconcile(_: Cached<Deployment>, _: Arc<()>) -> Result<Action, kube::Error> { Ok(Action::Done) }
//!
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let election = LeaderElectionConfig::new("ready-pods"); // the pod's namespace, a unique identity
//! let mut manager = Manager::new(client, ManagerOptions::default().leader_election(election)).await?;
//! let controller = manager.controller::<Deployment>(ControllerOptions::default().name("ready-pods")).owns::<Pod>();
//! manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
//! manager.run().await?; // until SIGTERM
//! # Ok(()) }
//! ```

mod controllers;
mod error;
mod health;
mod options;
mod profile;
mod rbac;
mod run;
mod runs;
#[cfg(feature = "tls")]
mod secure_metrics;
mod server;
mod sharding;
mod shutdown;

use std::{future::Future, net::SocketAddr, sync::Arc};

use futures_util::future::BoxFuture;
use kube_informer::{factory::SharedInformerFactory, metrics::Metrics};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::health::Check;
#[cfg(feature = "tls")]
pub use self::secure_metrics::SecureMetrics;
pub use self::{error::ManagerError, options::ManagerOptions, run::shutdown_signals};
use crate::{
    controller::ControllerMetrics,
    events::{Recorder, Reporter},
    leader_election::LeaderElector,
};

/// The two ways a runnable is asked to stop: `graceful` (finish what is in flight) and
/// `halt` (stop now: cancel what is in flight and return once it stopped).
#[derive(Clone)]
pub(crate) struct Stop {
    graceful: CancellationToken,
    halt: CancellationToken,
}

type Start = Box<dyn FnOnce(Stop) -> BoxFuture<'static, Result<(), String>> + Send>;

struct Runnable {
    name: String,
    leader_only: bool,
    /// What the work stands on (a fleet's members and their caches): asked to stop only
    /// once the controllers have drained, so a reconcile finishing its steps still has its
    /// member.
    support: bool,
    start: Start,
}

/// The factory, the controllers, the endpoints, the election: one process's runtime.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer_runtime::{controller::{Action, Cached, ControllerOptions}, manager::{Manager, ManagerOptions}};
///
/// async fn reconcile(cm: Cached<ConfigMap>, _ctx: Arc<()>) -> Result<Action, kube::Error> {
///     if let Cached::Present(cm) = cm { let _ = cm; /* bring the world in line */ }
///     Ok(Action::Done)
/// }
///
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let client = kube::Client::try_default().await?;
/// let mut manager = Manager::new(client, ManagerOptions::default()).await?;
/// let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("configs"));
/// manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
/// manager.run().await?; // caches, /healthz /readyz /metrics on :8081, until SIGTERM
/// # Ok(()) }
/// ```
pub struct Manager {
    /// The client as given: informers, leases, the sharder, events.
    plain: kube::Client,
    /// `plain`, recording a reconcile's writes (handed out by [`Manager::client`]).
    client: kube::Client,
    factory: SharedInformerFactory,
    registry: Arc<Mutex<Registry>>,
    controller_metrics: ControllerMetrics,
    runnables: Vec<Runnable>,
    options: ManagerOptions,
    elector: Option<LeaderElector>,
    endpoints: watch::Sender<Option<SocketAddr>>,
    /// Where `/metrics` is served over HTTPS, once bound (with `secure_metrics`).
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    secure_endpoint: watch::Sender<Option<SocketAddr>>,
    recorder: std::sync::OnceLock<Recorder>,
    healthz: Vec<(String, Check)>,
    readyz: Vec<(String, Check)>,
    readyz_details: Vec<health::Details>,
    /// Where the Leases are (when elected or sharded).
    leases: Option<Arc<dyn crate::lease::LeaseStore>>,
    /// The kinds the sharder places, from every sharded controller added.
    sharded_kinds: crate::sharding::KindSets,
    /// The names of the controllers added, and the first added twice (refused at run).
    controller_names: std::collections::BTreeSet<String>,
    duplicate_controller: Option<String>,
    /// Whether the ring's sharder has been added (with the first sharded kinds).
    sharder_started: bool,
    /// Range mode: the slots this replica serves, for every sharded controller.
    range_share: Option<Arc<crate::sharding::slots::RangeShare>>,
    /// The writes its controllers declared (for [`rbac`](Self::rbac)).
    declared: crate::rbac::Rbac,
    /// The namespace of the Leases it holds through the API (`None`: not elected, or a
    /// custom Lease store).
    lease_namespace: Option<String>,
    /// Its controllers, for the writes its client makes off their reconciles' tasks.
    attribution: Arc<crate::controller::Attribution>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("endpoints", &*self.endpoints.borrow())
            .field("runnables", &self.runnables.len())
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// A manager using `client`, with a factory of
    /// [`ManagerOptions::factory`](ManagerOptions::factory)'s options, recording informer
    /// metrics. The endpoints' address is bound by [`run`](Self::run) (see
    /// [`endpoints`](Self::endpoints)).
    pub async fn new(client: kube::Client, options: ManagerOptions) -> Result<Self, ManagerError> {
        Self::with_host(client, "", options).await
    }

    /// A manager with a client made from `config` (as [`new`](Self::new)), whose requests
    /// are counted in `rest_client_*` with the API server's `host` label.
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// use kube_informer_runtime::manager::{Manager, ManagerOptions};
    ///
    /// let config = kube::Config::infer().await?;
    /// let manager = Manager::from_config(config, ManagerOptions::default()).await?;
    /// # let _ = manager; Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`ManagerError::Client`] when the configuration gives no client (e.g. HTTPS without
    /// a TLS feature of `kube`), and [`new`](Self::new)'s.
    pub async fn from_config(
        config: kube::Config,
        options: ManagerOptions,
    ) -> Result<Self, ManagerError> {
        let host = crate::rest_metrics::RestClientMetrics::host_of(&config);
        let client = kube::Client::try_from(config).map_err(ManagerError::Client)?;
        Self::with_host(client, &host, options).await
    }

    async fn with_host(
        client: kube::Client,
        host: &str,
        options: ManagerOptions,
    ) -> Result<Self, ManagerError> {
        let mut registry = Registry::default();
        // Every request the manager and what it runs send is counted.
        let client = crate::rest_metrics::RestClientMetrics::register(&mut registry)
            .instrument_host(client, host);
        let core_metrics = Metrics::register(&mut registry);
        crate::process_metrics::register(&mut registry);
        #[cfg(feature = "tls")]
        crate::tls::register_metrics(&mut registry);
        #[cfg(feature = "webhook")]
        crate::webhook::register_metrics(&mut registry);
        let controller_metrics = ControllerMetrics::register(&mut registry, &core_metrics);
        let factory = SharedInformerFactory::new(
            client.clone(),
            options.factory.clone().metrics(&core_metrics),
        );
        // Sharded, the replica's shard Lease is what it must hold to reconcile.
        let election = match &options.sharding {
            Some(sharding) => Some(sharding.lease(options.leader_election.as_ref())),
            None => options.leader_election.clone(),
        };
        let mut lease_namespace = None;
        let (elector, leases) = match election {
            Some(config) => {
                let namespace = config
                    .namespace
                    .clone()
                    .unwrap_or_else(|| client.default_namespace().to_owned());
                let leases: Arc<dyn crate::lease::LeaseStore> = match &options.lease_store {
                    Some(store) => store.clone(),
                    None => Arc::new({
                        lease_namespace = Some(namespace.clone());
                        kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
                            client.clone(),
                            &namespace,
                        )
                    }),
                };
                let elector = LeaderElector::new(leases.clone(), config.namespace(namespace))?;
                (Some(elector), Some(leases))
            }
            None => (None, None),
        };
        let attribution = Arc::new(crate::controller::Attribution::default());
        let range_share = options
            .sharding
            .as_ref()
            .and_then(|s| s.ranges)
            .map(|field| Arc::new(crate::sharding::slots::RangeShare::new(field)));
        let mut manager = Self {
            client: crate::controller::recording_client_attributing(
                client.clone(),
                attribution.clone(),
            ),
            attribution,
            plain: client,
            factory,
            registry: Arc::new(Mutex::new(registry)),
            controller_metrics,
            runnables: Vec::new(),
            options,
            elector,
            endpoints: watch::channel(None).0,
            secure_endpoint: watch::channel(None).0,
            recorder: std::sync::OnceLock::new(),
            healthz: Vec::new(),
            readyz: Vec::new(),
            readyz_details: Vec::new(),
            leases,
            sharded_kinds: crate::sharding::KindSets::default(),
            controller_names: std::collections::BTreeSet::new(),
            duplicate_controller: None,
            sharder_started: false,
            range_share,
            declared: crate::rbac::Rbac::default(),
            lease_namespace,
        };
        manager.start_ranges();
        Ok(manager)
    }

    /// Where the endpoints are served, once [`run`](Self::run) has bound them: `wait_for`
    /// a `Some` on the receiver. It closes without one if the manager serves no endpoints
    /// or failed to bind.
    ///
    /// ```no_run
    /// # async fn demo(manager: kube_informer_runtime::manager::Manager) {
    /// let mut endpoints = manager.endpoints();
    /// tokio::spawn(manager.run());
    /// let addr = endpoints.wait_for(Option::is_some).await.map(|a| a.unwrap());
    /// # let _ = addr;
    /// # }
    /// ```
    pub fn endpoints(&self) -> watch::Receiver<Option<SocketAddr>> {
        self.endpoints.subscribe()
    }

    /// Where `/metrics` is served over HTTPS (with
    /// [`ManagerOptions::secure_metrics`]), once [`run`](Self::run) has bound it, as
    /// [`endpoints`](Self::endpoints).
    #[cfg(feature = "tls")]
    pub fn secure_metrics_endpoint(&self) -> watch::Receiver<Option<SocketAddr>> {
        self.secure_endpoint.subscribe()
    }

    /// Adds a check to `/healthz`: `Err(why)` fails the probe (and restarts the pod, so
    /// check the process, not the cluster). Checks run on each probe; keep them fast.
    pub fn add_healthz_check(
        &mut self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        self.healthz.push((name.into(), Arc::new(check)));
    }

    /// Adds a check to `/readyz`: `Err(why)` takes the pod out of its Services' endpoints.
    pub fn add_readyz_check(
        &mut self,
        name: impl Into<String>,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
        self.readyz.push((name.into(), Arc::new(check)));
    }

    /// The client to write through: a [`recording_client`](crate::controller::recording_client),
    /// so a reconcile's writes are waited for by its next reconcile without a
    /// [`wrote`](crate::controller::wrote) call (requests other than a reconcile's writes
    /// pass through as they are).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The shared informer factory (read caches from it; controllers use it).
    pub fn factory(&self) -> &SharedInformerFactory {
        &self.factory
    }

    /// The Prometheus registry served on `/metrics`: register your own metrics in it.
    pub fn registry(&self) -> Arc<Mutex<Registry>> {
        self.registry.clone()
    }

    /// The leader elector, when elected.
    pub fn elector(&self) -> Option<&LeaderElector> {
        self.elector.as_ref()
    }

    /// An event recorder reporting as `controller` from this replica (its leader-election
    /// identity, or the host name). Every recorder of a manager shares one writer.
    pub fn recorder(&self, controller: &str) -> Recorder {
        let instance = self
            .options
            .leader_election
            .as_ref()
            .map(|c| c.identity.clone())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "unknown".to_owned());
        let reporter = Reporter::new(controller, instance);
        let shared = self
            .recorder
            .get_or_init(|| Recorder::new(self.plain.clone(), reporter.clone()));
        shared.with_reporter(reporter)
    }

    /// Runs `task` with the manager: its token is cancelled to ask it to finish; if it
    /// has not by the shutdown deadline (or at once, when leadership is lost, for a
    /// `leader_only` task), it is dropped. `leader_only`: only while leading, when elected.
    /// An error from it stops the manager.
    pub fn add<F, Fut>(&mut self, name: impl Into<String>, leader_only: bool, task: F)
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.add_task(name.into(), leader_only, false, task);
    }

    /// [`add`](Self::add) on every replica, for what the controllers stand on: its token
    /// is cancelled only once every controller has drained.
    pub(crate) fn add_support<F, Fut>(&mut self, name: impl Into<String>, task: F)
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.add_task(name.into(), false, true, task);
    }

    fn add_task<F, Fut>(&mut self, name: String, leader_only: bool, support: bool, task: F)
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.runnables.push(Runnable {
            name,
            leader_only,
            support,
            start: Box::new(move |stop: Stop| {
                Box::pin(async move {
                    tokio::select! {
                        result = task(stop.graceful) => result,
                        () = stop.halt.cancelled() => Ok(()),
                    }
                })
            }),
        });
    }

    /// Runs until SIGTERM or SIGINT (a second one stops at once), then shuts down
    /// gracefully.
    pub async fn run(self) -> Result<(), ManagerError> {
        let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
        let signals = shutdown_signals(graceful.clone(), force.clone());
        tokio::select! {
            result = self.run_until(graceful, force) => result,
            () = signals => unreachable!("signals ends only after the second signal"),
        }
    }
}
