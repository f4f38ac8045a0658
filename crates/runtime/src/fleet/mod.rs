//! A fleet of clusters engaged and disengaged while the operator runs: each member has its
//! own client and informer factory, made when its cluster appears and stopped (informers
//! shut down, their tasks awaited) when it goes; a rotated token reaches the member's
//! requests without a new client or a relist.
//!
//! Clusters come from a [source](sources): Cluster API's `Cluster`s, the cluster inventory
//! API's `ClusterProfile`s, kubeconfig Secrets that opt in with a label, a folder of
//! kubeconfig files, or code. [`Fleet::run`] applies what the source says; consumers
//! follow [`Fleet::changes`].
//!
//! ```no_run
//! # async fn demo(hub: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
//! use kube_informer_runtime::{CancellationToken, fleet::{Fleet, sources}};
//!
//! let hub_factory = SharedInformerFactory::new(hub, FactoryOptions::default());
//! let source = sources::kubeconfig_secrets(&hub_factory, "fleet-system");
//! hub_factory.start();
//! let fleet = Fleet::new(FactoryOptions::default());
//! let cancel = CancellationToken::new();
//! let running = tokio::spawn({
//!     let (fleet, cancel) = (fleet.clone(), cancel.clone());
//!     async move { fleet.run(source, cancel).await }
//! });
//! let mut changes = fleet.changes();
//! changes.changed().await?;
//! for (name, cluster) in changes.borrow().iter() {
//!     let informer = cluster.factory().informer::<ConfigMap>();
//!     cluster.factory().start();
//!     println!("{name}: watching {} ConfigMaps", informer.store().len());
//! }
//! cancel.cancel();
//! running.await?; // every member's informers stopped
//! # Ok(()) }
//! ```
//!
//! A kubeconfig that does not parse, or gives no client, is an error for that cluster only
//! ([`Fleet::errors`], logged): an engaged member keeps its working credentials until a
//! usable kubeconfig replaces them.

mod apply;
mod controller;
mod health;
mod hub;
mod inbox;
mod member;
mod members;
mod running;
mod sharded;
pub mod sources;
mod to_hub;
mod warm;

use std::{collections::BTreeMap, sync::Arc};

use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use self::{
    apply::MemberClients,
    controller::{ClusterKey, FleetController},
    health::ClusterHealth,
    member::MemberError,
};

/// What a source says about one cluster.
#[derive(Clone)]
pub enum ClusterEvent {
    /// Engage `name` with this kubeconfig, or give an engaged member new credentials.
    Kubeconfig {
        /// The cluster's name in the fleet.
        name: String,
        /// The kubeconfig (YAML or JSON; its current context).
        kubeconfig: String,
        /// The member's labels ([`Cluster::labels`]): the inventory object's.
        labels: BTreeMap<String, String>,
    },
    /// Engage `name` with this client (from code; replaces an engaged member's client).
    Client {
        /// The cluster's name in the fleet.
        name: String,
        /// Its client.
        client: kube::Client,
        /// The member's labels ([`Cluster::labels`]).
        labels: BTreeMap<String, String>,
    },
    /// Disengage `name`.
    Remove {
        /// The cluster's name in the fleet.
        name: String,
    },
}

impl std::fmt::Debug for ClusterEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Kubeconfig { name, .. } => write!(f, "Kubeconfig({name})"),
            Self::Client { name, .. } => write!(f, "Client({name})"),
            Self::Remove { name } => write!(f, "Remove({name})"),
        }
    }
}

/// An engaged member: its client, its informer factory, and a token cancelled when it is
/// disengaged. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    name: Arc<str>,
    client: kube::Client,
    factory: SharedInformerFactory,
    disengaged: CancellationToken,
    generation: u64,
    labels: Arc<BTreeMap<String, String>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.name)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Its name in the fleet.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its client, recording a reconcile's writes (a
    /// [`recording_client`](crate::controller::recording_client)).
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Its informer factory: ask for informers, then [`start`](SharedInformerFactory::start)
    /// it. Shut down by the fleet when the cluster is disengaged.
    pub fn factory(&self) -> &SharedInformerFactory {
        &self.factory
    }

    /// Cancelled when the cluster is disengaged (or engaged anew with another identity):
    /// stop what you run for it.
    pub fn disengaged(&self) -> &CancellationToken {
        &self.disengaged
    }

    /// Which engagement this is: a new client (a new server or identity) is a new
    /// generation; a rotated token is not.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Its labels, as its source gives them (a Cluster API `Cluster`'s, a
    /// `ClusterProfile`'s, a kubeconfig Secret's): what a controller's
    /// [cluster filter](FleetController::clusters) reads. A change of labels alone is not a
    /// new generation: the member keeps its informers.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.labels
    }
}

/// Of the members a follower follows (`(name, generation)`), those it must let go: gone
/// from `clusters`, or engaged there anew (another generation).
pub(crate) fn let_go<'a>(
    followed: impl IntoIterator<Item = (&'a str, u64)>,
    clusters: &BTreeMap<String, Cluster>,
) -> Vec<String> {
    followed
        .into_iter()
        .filter(|(name, generation)| {
            clusters.get(*name).map(Cluster::generation) != Some(*generation)
        })
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// An engaged member and what its credentials were made from.
struct Engaged {
    cluster: Cluster,
    /// The kubeconfig's identity without its token (none for a client from code).
    identity: Option<String>,
    token: Option<member::TokenCell>,
}

struct Inner {
    options: FactoryOptions,
    clients: MemberClients,
    engaged: Mutex<BTreeMap<String, Engaged>>,
    errors: Mutex<BTreeMap<String, String>>,
    clusters: watch::Sender<BTreeMap<String, Cluster>>,
    generations: std::sync::atomic::AtomicU64,
    applied: watch::Sender<u64>,
}

/// The engaged clusters of a fleet (see the [module docs](self)). Cheap to clone: clones
/// share the fleet.
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.inner.engaged.lock().keys().cloned().collect();
        f.debug_struct("Fleet").field("clusters", &names).finish()
    }
}

impl Fleet {
    /// A fleet whose members' factories use `options`, their clients made from
    /// kubeconfigs as [`MemberClients::default`] says (timeouts; no exec, no local files).
    pub fn new(options: FactoryOptions) -> Self {
        Self::with_clients(options, MemberClients::default())
    }

    /// [`new`](Self::new), the members' clients made from kubeconfigs as `clients` says.
    pub fn with_clients(options: FactoryOptions, clients: MemberClients) -> Self {
        Self {
            inner: Arc::new(Inner {
                options,
                clients,
                engaged: Mutex::default(),
                errors: Mutex::default(),
                clusters: watch::channel(BTreeMap::new()).0,
                generations: std::sync::atomic::AtomicU64::new(0),
                applied: watch::channel(0).0,
            }),
        }
    }

    /// The engaged clusters now.
    pub fn clusters(&self) -> BTreeMap<String, Cluster> {
        self.inner.clusters.borrow().clone()
    }

    /// The engaged cluster `name`.
    pub fn cluster(&self, name: &str) -> Option<Cluster> {
        self.inner.clusters.borrow().get(name).cloned()
    }

    /// The engaged clusters, as they change.
    pub fn changes(&self) -> watch::Receiver<BTreeMap<String, Cluster>> {
        self.inner.clusters.subscribe()
    }

    /// The last error of each cluster whose kubeconfig could not be used (cleared when a
    /// usable one arrives or the cluster is removed).
    pub fn errors(&self) -> BTreeMap<String, String> {
        self.inner.errors.lock().clone()
    }
}
