//! [`Manager`]: one object that owns the informer factory and the controllers of a
//! process, serves its health and metrics, elects a leader, and shuts down gracefully.
//!
//! - Caches first: informers start at once on every replica; each controller reconciles
//!   only after the caches it reads have synced.
//! - `/healthz` (tasks alive, every watch recovering), `/readyz` (caches synced, leading
//!   when elected, not shutting down), `/metrics` (Prometheus text: controller-runtime's
//!   reconcile metrics, client-go's workqueue, informer and reflector metrics), with
//!   `?verbose`.
//! - With leader election, controllers run only while this replica leads; they are
//!   dropped the instant leadership is lost, and `run` returns
//!   [`ManagerError::LeadershipLost`] so the process restarts clean, as controller-runtime
//!   does.
//! - SIGTERM or SIGINT: reconciles drain, informers stop, the Lease is released, within
//!   the shutdown timeout; a second signal stops at once.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
//! use kube_informer::controller::{Action, ControllerOptions};
//! use kube_informer_runtime::{controller::Cached, leader_election::LeaderElectionConfig, manager::{Manager, ManagerOptions}};
//!
//! async fn reconcile(_: Cached<Deployment>, _: Arc<()>) -> Result<Action, kube::Error> { Ok(Action::Done) }
//!
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let election = LeaderElectionConfig::new("ready-pods", "operators", "pod-7f9c");
//! let mut manager = Manager::new(client, ManagerOptions::default().leader_election(election)).await?;
//! let controller = manager.controller::<Deployment>(ControllerOptions::default().name("ready-pods")).owns::<Pod>();
//! manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, Arc::new(()));
//! manager.run().await?; // until SIGTERM
//! # Ok(()) }
//! ```

mod health;
mod options;
mod run;
mod server;

use std::{fmt::Display, future::Future, net::SocketAddr, sync::Arc};

use futures_util::future::BoxFuture;
use kube_informer::{
    controller::{Action, ControllerOptions},
    factory::{FactoryOptions, FactoryScope, SharedInformerFactory},
    informer::InformerMetrics,
    reflector::ReflectorMetrics,
};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use self::options::ManagerOptions;
use crate::{
    controller::{Cached, Controller, ControllerMetrics, Watchable},
    events::{Recorder, Reporter},
    leader_election::{ConfigError, LeaderElector},
};

type Start = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, Result<(), String>> + Send>;

struct Runnable {
    name: String,
    leader_only: bool,
    start: Start,
}

/// Why a manager stopped, other than being asked to.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManagerError {
    /// The endpoints' address could not be bound.
    #[error("binding the health and metrics endpoints on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The leader election settings are not safe.
    #[error(transparent)]
    LeaderElection(#[from] ConfigError),
    /// This replica lost leadership: its controllers were stopped at once. Restart the
    /// process to campaign again (as controller-runtime does).
    #[error("leadership lost; controllers stopped")]
    LeadershipLost,
    /// A controller or task stopped with an error.
    #[error("{name} stopped: {why}")]
    Runnable {
        /// Which one.
        name: String,
        /// Why.
        why: String,
    },
}

/// The factory, the controllers, the endpoints, the election: one process's runtime.
///
/// ```no_run
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer::controller::{Action, ControllerOptions};
/// use kube_informer_runtime::{controller::Cached, manager::{Manager, ManagerOptions}};
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
/// manager.run().await?; // caches, /healthz /readyz /metrics on :8080, until SIGTERM
/// # Ok(()) }
/// ```
pub struct Manager {
    client: kube::Client,
    factory: SharedInformerFactory,
    registry: Arc<Mutex<Registry>>,
    controller_metrics: ControllerMetrics,
    runnables: Vec<Runnable>,
    options: ManagerOptions,
    elector: Option<LeaderElector>,
    listener: Option<TcpListener>,
    addr: Option<SocketAddr>,
}

impl std::fmt::Debug for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manager")
            .field("addr", &self.addr)
            .field("runnables", &self.runnables.len())
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// A manager using `client`, with a factory recording informer metrics. Binds the
    /// endpoints' address now (so [`addr`](Self::addr) is known); serves from
    /// [`run`](Self::run).
    pub async fn new(client: kube::Client, options: ManagerOptions) -> Result<Self, ManagerError> {
        Self::with_factory_options(client, options, FactoryOptions::default()).await
    }

    /// Like [`new`](Self::new), with the factory's options (namespace, selectors, resync).
    pub async fn with_factory_options(
        client: kube::Client,
        options: ManagerOptions,
        factory: FactoryOptions,
    ) -> Result<Self, ManagerError> {
        let mut registry = Registry::default();
        let informer_metrics = InformerMetrics::register(&mut registry);
        let reflector_metrics = ReflectorMetrics::register(&mut registry);
        let controller_metrics = ControllerMetrics::register(&mut registry);
        let factory = SharedInformerFactory::new(
            client.clone(),
            factory.metrics(&informer_metrics, &reflector_metrics),
        );
        let elector = match &options.leader_election {
            Some(config) => Some(LeaderElector::new(client.clone(), config.clone())?),
            None => None,
        };
        let (listener, addr) = match options.bind {
            Some(addr) => {
                let listener = TcpListener::bind(addr)
                    .await
                    .map_err(|source| ManagerError::Bind { addr, source })?;
                let bound = listener
                    .local_addr()
                    .map_err(|source| ManagerError::Bind { addr, source })?;
                (Some(listener), Some(bound))
            }
            None => (None, None),
        };
        Ok(Self {
            client,
            factory,
            registry: Arc::new(Mutex::new(registry)),
            controller_metrics,
            runnables: Vec::new(),
            options,
            elector,
            listener,
            addr,
        })
    }

    /// The address the endpoints are served on.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// The client.
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
    /// identity, or the host name).
    pub fn recorder(&self, controller: &str) -> Recorder {
        let instance = self
            .options
            .leader_election
            .as_ref()
            .map(|c| c.identity().to_owned())
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| "unknown".to_owned());
        Recorder::new(self.client.clone(), Reporter::new(controller, instance))
    }

    /// A controller of `K` on the manager's factory, recording reconcile metrics.
    pub fn controller<K>(&self, options: ControllerOptions) -> Controller<K>
    where
        K: Watchable,
        K::Scope: FactoryScope,
    {
        Controller::with_metrics(&self.factory, options, &self.controller_metrics)
    }

    /// Runs `controller` with `reconcile`, `error_policy` and `ctx` (only while leading,
    /// when elected).
    pub fn add_controller<K, Ctx, E, R, Fut, P>(
        &mut self,
        controller: Controller<K>,
        reconcile: R,
        error_policy: P,
        ctx: Arc<Ctx>,
    ) where
        K: Watchable,
        K::Scope: FactoryScope,
        Ctx: Send + Sync + 'static,
        E: Display + Send + 'static,
        R: Fn(Cached<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        P: Fn(&Cached<K>, &E, &Ctx) -> Action + Send + Sync + 'static,
    {
        let name = controller.name().to_owned();
        self.add(name, true, move |cancel| async move {
            controller
                .run(reconcile, error_policy, ctx, cancel)
                .await
                .map_err(|e| e.to_string())
        });
    }

    /// Runs `task` with the manager (until its token is cancelled); `leader_only`: only
    /// while leading, when elected. An error from it stops the manager.
    pub fn add<F, Fut>(&mut self, name: impl Into<String>, leader_only: bool, task: F)
    where
        F: FnOnce(CancellationToken) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        self.runnables.push(Runnable {
            name: name.into(),
            leader_only,
            start: Box::new(move |cancel| Box::pin(task(cancel))),
        });
    }

    /// Runs until SIGTERM or SIGINT (a second one stops at once), then shuts down
    /// gracefully.
    pub async fn run(self) -> Result<(), ManagerError> {
        let (graceful, force) = (CancellationToken::new(), CancellationToken::new());
        tokio::spawn(run::signals(graceful.clone(), force.clone()));
        self.run_until(graceful, force).await
    }
}
