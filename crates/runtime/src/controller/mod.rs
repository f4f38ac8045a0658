//! [`Controller`]: reconcile one kind of object, with everything every operator needs —
//! children it owns, other objects it watches, predicates, a typed reconcile input, an
//! error policy, a context, metrics, and a tracing span per reconcile.
//!
//! It is built on the shared informer factory, so several controllers share one watch per
//! type, and on kube-informer's [`kube_informer::workqueue::Workers`], which
//! guarantee that one key is never reconciled by two workers at once and that a change
//! during a reconcile brings the key back.
//!
//! # What a running controller owns
//!
//! Its handlers (on the primary informer and on each related one) are attached when it
//! starts and removed when it stops; its workers and feeds are tasks it owns. Stopping
//! it gracefully (the `cancel` token of [`run`](Controller::run)) drains what is held and
//! queued within [`ControllerOptions::drain_timeout`]; dropping its `run` future instead
//! shuts its queue down, detaches its handlers and cancels every reconcile in flight at
//! its next await point. **Reconciles must therefore be cancel-safe**, as
//! controller-runtime's context cancellation implies: a reconcile can stop at any
//! `.await`, and the next one (on this replica or another) must be able to pick up from
//! whatever state the cluster is in. Code that blocks a thread without awaiting cannot be
//! interrupted.
//!
//! # Errors
//!
//! An error (or a panic, or a [`reconcile_timeout`](ControllerOptions::reconcile_timeout))
//! is logged once, with the error, and retried with the key's exponential backoff (5 ms
//! doubling, capped at 1000 s, unless [`backoff`](ControllerOptions::backoff) says
//! otherwise) forever by default — a failing key is never silently
//! dropped. An error the error policy answers with [`Action::Done`] is terminal: not
//! retried until the object changes, and counted in
//! `controller_runtime_terminal_reconcile_errors_total`.
//!
//! # Fairness between namespaces
//!
//! A controller shared by many tenants must not make one tenant's single change wait for
//! another tenant's bulk import. Its queue is fair by namespace by default
//! ([`ControllerOptions::fairness`]; a tenant label or any key function instead):
//!
//! - **The guarantee**: while a namespace has keys queued in a lane (live changes, or the
//!   backlog of lists and resyncs), no other namespace is reconciled twice from that lane.
//!   A namespace that queues one key waits behind at most one key of each other namespace
//!   with work: with `G` namespaces queued, its key is among the next `G` handed out, so
//!   with `W` workers it starts within `⌈G / W⌉` reconcile durations (plus the reconciles
//!   already running). Within a namespace the order is as before, and live changes of any
//!   namespace still go before any namespace's backlog.
//! - **A cap**: [`ControllerOptions::max_in_flight_per_group`] keeps one namespace from
//!   holding every worker with slow reconciles.
//! - **Workers that follow the queue**: [`ControllerOptions::worker_scaling`].
//! - **The cost**: one hash of the namespace per add; measured with 1, 8 and 64 workers in
//!   BENCHMARKS.md. Turns are counted in keys, not in time: a namespace whose reconciles
//!   are slower takes more worker time per turn (the cap bounds it).
//!
//! # Read your own writes
//!
//! The cache is a moment behind the API server. A reconcile that wrote (added or removed
//! a finalizer, created a child) and is queued again at once would otherwise read the
//! cache from before its write: create the child twice, run a finalizer's cleanup twice.
//! Write through a [`recording_client`] ([`Manager::client`](crate::manager::Manager::client)
//! is one): every write a reconcile makes through it is recorded, and the next reconcile of
//! that key waits until each cache of the written kind that lists the object holds the
//! version the write returned (or its watch has passed it: a deletion, or an object the
//! write took out of the cache's selectors, is waited for until the cache drops it), at
//! most [`ControllerOptions::read_your_writes`] (5 s by default; past it, the reconcile
//! runs with a warning, counted in `controller_runtime_read_your_writes_timeouts_total`).
//! Writes and caches meet by API group and kind: a metadata-only relation, and each
//! dynamic kind, waits for its own objects. Only kinds the controller caches (its own,
//! those it owns or watches) are waited for. A task the reconcile spawns writes through
//! [`Manager::client`](crate::manager::Manager::client) as the reconcile does: a write made
//! off every reconcile's task is given to the keys it concerns, the written object's own
//! (of the controller's kind) and its controlling owner's, and waited for by the next
//! reconcile of those keys that starts after it (join such tasks before returning); with a
//! standalone
//! [`recording_client`], wrap the task's future with [`carry_writes`]. A write made another
//! way is recorded with [`wrote`] (the [`finalizer`](crate::finalizer::finalizer) helper
//! records its own).
//! Within one reconcile, a write is not in the cache yet: read through an [`OwnReader`],
//! which puts the reconcile's own writes in place of older cached copies.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::core::v1::{ConfigMap, Secret};
//! use kube::{Api, ResourceExt, api::PostParams};
//! use kube_informer::ReadOnlyStore;
//! use kube_informer_runtime::{
//!     controller::{Action, Cached, ControllerOptions},
//!     manager::{Manager, ManagerOptions},
//! };
//!
//! struct Ctx { client: kube::Client, secrets: ReadOnlyStore<Secret> }
//!
//! async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
//!     let Cached::Present(cm) = cm else { return Ok(Action::Done) };
//!     let ns = cm.namespace().unwrap_or_default();
//!     if ctx.secrets.get_by_key(&format!("{ns}/{}", cm.name_any())).is_none() {
//!         let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
//!         let mut secret = Secret::default(); // named like the ConfigMap, owned by it
//!         secret.metadata.name = Some(cm.name_any());
//!         secrets.create(&PostParams::default(), &secret).await?; // recorded: no duplicate
//!     }
//!     Ok(Action::Done)
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut manager = Manager::new(kube::Client::try_default().await?, ManagerOptions::default()).await?;
//! let controller = manager.controller::<ConfigMap>(ControllerOptions::default().name("tls")).owns::<Secret>();
//! let ctx = Arc::new(Ctx {
//!     client: manager.client().clone(), // a recording client
//!     secrets: manager.factory().informer::<Secret>().store(),
//! });
//! manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, ctx);
//! manager.run().await?;
//! # Ok(()) }
//! ```
//!
//! # Compact caches: a quarter of the memory
//!
//! Any kind a controller reconciles, owns or watches can be cached as
//! [`Compact<K>`](kube_informer::compact::Compact): the object's bytes as the server sent
//! them (protobuf for built-in kinds, managedFields left out) and its parsed metadata.
//! Everything that reads metadata works on it unchanged — keys, predicates, the owner
//! mapping of `owns`, indexes, listers, read-your-writes — and the reconcile gets the
//! compact object, whose metadata it reads directly and whose body it decodes when it
//! needs it (`decode()`, a typed `K`).
//!
//! | 50k pods under 500 ReplicaSets, `informer-bench operator` | peak memory | first sync |
//! |---|---:|---:|
//! | `Controller<ReplicaSet>` owning `Pod` (typed) | 1,146 MiB | 1.69 s |
//! | `Controller<Compact<ReplicaSet>>` owning `Compact<Pod>` | **249 MiB** | 0.79 s |
//! | @kubernetes/client-node, an informer of the pods alone | 1,106 MiB | 7.69 s |
//!
//! What it costs: each `decode()` of a pod takes about 12 µs kept as protobuf, 19 µs
//! as JSON (BENCHMARKS.md). Cache compact what is numerous and read by metadata — the
//! children a controller counts, matches by owner or label, or deletes — and decode
//! the few objects whose spec a reconcile reads (its primary object, once per
//! reconcile). Keep a kind typed when handlers or index functions read its spec or
//! status on every event.
//!
//! ```no_run
//! use std::sync::Arc;
//! use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
//! use kube::ResourceExt;
//! use kube_informer::{Lister, ReadOnlyStore, compact::Compact};
//! use kube_informer_runtime::{Action, Cached, ControllerOptions, Manager, ManagerOptions};
//!
//! struct Ctx { pods: ReadOnlyStore<Compact<Pod>> }
//!
//! async fn reconcile(rs: Cached<Compact<ReplicaSet>>, ctx: Arc<Ctx>) -> Result<Action, String> {
//!     let Cached::Present(rs) = rs else { return Ok(Action::Done) };
//!     let wanted = rs.decode().map_err(|e| e.to_string())?.spec.and_then(|s| s.replicas);
//!     let uid = rs.uid().unwrap_or_default();
//!     let pods = Lister::new(ctx.pods.clone()).namespaced(&rs.namespace().unwrap_or_default());
//!     let owned = pods.list(&Default::default()).iter()
//!         .filter(|pod| pod.owner_references().iter().any(|o| o.uid == uid)) // metadata only
//!         .count();
//!     # let _ = (wanted, owned);
//!     Ok(Action::Done)
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let mut manager = Manager::new(kube::Client::try_default().await?, ManagerOptions::default()).await?;
//! let controller = manager
//!     .controller::<Compact<ReplicaSet>>(ControllerOptions::default().name("replicas"))
//!     .owns::<Compact<Pod>>();
//! let ctx = Arc::new(Ctx { pods: manager.factory().informer::<Compact<Pod>>().store() });
//! manager.add_controller(controller, reconcile, |_, _, _| Action::Retry, ctx);
//! manager.run().await?;
//! # Ok(()) }
//! ```
//!
//! # A controller without a manager
//!
//! ```no_run
//! use std::{sync::Arc, time::Duration};
//! use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
//! use kube_informer::factory::{FactoryOptions, SharedInformerFactory};
//! use kube_informer_runtime::controller::{predicate, Action, Cached, Controller, ControllerOptions};
//! use tokio_util::sync::CancellationToken;
//!
//! struct Ctx { client: kube::Client }
//!
//! async fn reconcile(deploy: Cached<Deployment>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
//!     let Cached::Present(deploy) = deploy else { return Ok(Action::Done) }; // gone: nothing to do
//!     // ... read pods from the cache, write through ctx.client ...
//!     # let _ = (deploy, &ctx.client);
//!     Ok(Action::RequeueAfter(Duration::from_secs(300)))
//! }
//!
//! fn error_policy(_: &Cached<Deployment>, err: &kube::Error, _: &Ctx) -> Action {
//!     eprintln!("reconcile failed: {err}");
//!     Action::Retry // back off per key, as after any error
//! }
//!
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let factory = SharedInformerFactory::new(client.clone(), FactoryOptions::default());
//! Controller::<Deployment>::new(&factory, ControllerOptions::default().name("ready-pods"))
//!     .owns::<Pod>()
//!     .predicate(predicate::generation())
//!     .run(reconcile, error_policy, Arc::new(Ctx { client }), CancellationToken::new())
//!     .await?;
//! # Ok(())
//! # }
//! ```

mod attachments;
mod enqueue;
mod expectations;
mod fleet_member;
mod foreign;
mod handlers;
mod metrics;
mod new;
mod options;
mod own_reader;
mod own_writes;
pub mod predicate;
mod read;
mod relation;
mod run;
mod sink;
mod trigger;
mod worker;
mod writes;

use std::{sync::Arc, time::Duration};

use futures_util::{Stream, StreamExt, future::BoxFuture};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube_informer::{
    ObjectKey,
    factory::{FactoryScope, InformerSpec, SharedInformerFactory},
    informer::{HandlerFuncs, HandlerOptions, SharedIndexInformer, SyncError},
    workqueue::RateLimitingQueue,
};
use serde::de::DeserializeOwned;

use self::attachments::Attach;
pub(crate) use self::{
    attachments::Attached,
    fleet_member::Running as RunningMember,
    foreign::Foreign,
    options::backoff_rate_limiter,
    own_writes::{Attribution, recording_client_attributing},
    run::spawn_workers,
    sink::KeySink,
    worker::SharedPolicy,
};
pub use self::{
    expectations::{EXPECTATIONS_TIMEOUT, Expectations},
    handlers::Change,
    metrics::ControllerMetrics,
    options::{ControllerOptions, Fairness, GroupOf},
    own_reader::OwnReader,
    own_writes::{carry_writes, recording_client, wrote},
    predicate::Predicate,
    relation::Relation,
};
pub use crate::reconcile::{Action, Cached, ErrorPolicy, Reconciler};
use crate::sharding::{Placement, ShardedKind};

type SyncWait = Box<dyn Fn(Duration) -> BoxFuture<'static, Result<(), SyncError>> + Send + Sync>;
/// A feed: a future that queues keys besides the informers' handlers
/// ([`reconcile_all_on`](Controller::reconcile_all_on), a watch of informers outside the
/// controller's factory), behind a mutex only so that the controller is `Sync`.
type Feed = parking_lot::Mutex<BoxFuture<'static, ()>>;

/// Why a controller stopped before it was cancelled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    /// A cache it reads did not sync in time (the error says which and why).
    #[error("controller {controller}: {source}")]
    CacheSync {
        /// The controller's name.
        controller: String,
        /// Which informer, and its last error.
        #[source]
        source: SyncError,
    },
}

/// A controller of `K` objects: which changes lead to a reconcile, and the workers that run
/// it. Build it, then [`run`](Self::run) it (or give it to a manager).
///
/// ```no_run
/// # fn example(manager: &kube_informer_runtime::manager::Manager) {
/// use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod};
/// use kube_informer_runtime::controller::{predicate, ControllerOptions};
///
/// let controller = manager
///     .controller::<ReplicaSet>(ControllerOptions::default().name("replicas").workers(4))
///     .owns::<Pod>()                                  // a pod's change reconciles its owner
///     .predicate(predicate::generation().or(predicate::deletion()));
/// # let _ = controller;
/// # }
/// ```
pub struct Controller<K: Resource> {
    factory: SharedInformerFactory,
    informer: SharedIndexInformer<K>,
    /// `K`'s runtime type information (`()` for a Rust type, the `ApiResource` of a
    /// dynamic controller), its kind as owner references name it.
    dyntype: K::DynamicType,
    owner: Arc<handlers::OwnerKind>,
    queue: RateLimitingQueue<ObjectKey>,
    /// How the handlers queue keys (the queue, and the debounce if any).
    enqueue: enqueue::Enqueue,
    options: ControllerOptions,
    name: String,
    predicate: Option<Predicate<K>>,
    /// Every watch's update filter ([`event_filter`](Self::event_filter)).
    event_filter: handlers::EventFilter,
    resync: Option<Duration>,
    cache_sync_timeout: Duration,
    metrics: Option<ControllerMetrics>,
    expectations: Expectations,
    syncs: Vec<SyncWait>,
    relations: Vec<Attach>,
    feeds: Vec<Feed>,
    /// The kinds a sharder places for this controller (when sharded).
    sharded_kinds: Vec<ShardedKind>,
    /// What its reconciles wrote, waited for before the next reconcile of the key.
    own_writes: Arc<own_writes::OwnWrites>,
    /// The writes it declared, for the manager's RBAC.
    writes: crate::rbac::Rbac,
    /// The namespaces its own informer reads (empty: all), `None` for a cluster-scoped
    /// kind: where its declared writes are granted.
    scope: Option<Vec<String>>,
}

impl<K: Resource> std::fmt::Debug for Controller<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What a type needs to be reconciled or related: a typed, (de)serializable Kubernetes
/// resource with a known scope (serializable so that its cache can be kept on disk, see
/// `FactoryOptions::cache_dir`).
pub trait Watchable:
    Resource<DynamicType = (), Scope: FactoryScope>
    + Clone
    + serde::Serialize
    + DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<T> Watchable for T
where
    T: Resource<DynamicType = ()>
        + Clone
        + serde::Serialize
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    T::Scope: FactoryScope,
{
}

impl<K> Controller<K>
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Clone + Send + Sync + 'static,
{
    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its record of its reconciles' writes (a manager gives it the writes its client makes
    /// off their tasks).
    pub(crate) fn own_writes(&self) -> &Arc<own_writes::OwnWrites> {
        &self.own_writes
    }

    /// Whether it runs on every replica, not only the leader
    /// ([`ControllerOptions::runs_on_every_replica`]).
    pub(crate) fn runs_on_every_replica(&self) -> bool {
        self.options.every_replica
    }

    /// The queue of keys to reconcile: add keys yourself, or look at its depth.
    pub fn queue(&self) -> &RateLimitingQueue<ObjectKey> {
        &self.queue
    }

    /// What this controller expects to see created or deleted, per object: owned children
    /// it sees mark expectations as observed (see [`Expectations`]); put a clone in your
    /// context and check [`Expectations::satisfied`] before acting on counts from the cache.
    pub fn expectations(&self) -> &Expectations {
        &self.expectations
    }

    /// The shared informer of `K` this controller reconciles from.
    pub fn informer(&self) -> &SharedIndexInformer<K> {
        &self.informer
    }

    fn wait_for<T: Resource + Clone + Send + Sync + 'static>(
        &mut self,
        informer: SharedIndexInformer<T>,
    ) {
        self.syncs.push(Box::new(move |timeout| {
            let informer = informer.clone();
            Box::pin(async move { informer.wait_for_sync(timeout).await })
        }));
    }

    /// Relates `T`, read as `flavour` says and placed as `placement` says when sharded
    /// (see [`read`](read::read)), to this controller: its informer is made now (so its
    /// cache fills on every replica), `handler` is attached when the controller starts.
    fn relate<T, F>(
        mut self,
        flavour: F,
        spec: InformerSpec<T>,
        placement: Option<Placement>,
        handler: HandlerFuncs<T>,
    ) -> Self
    where
        T: Resource + Clone + Send + Sync + 'static,
        F: read::Flavour<T>,
    {
        let shard = self.options.shard.as_ref();
        let read = read::read(&self.factory, shard, flavour, spec, placement);
        let informer = read.informer.clone();
        self.sharded_kinds.extend(read.placed.iter().cloned());
        let options = HandlerOptions::default().name(format!("{} relation", self.name));
        self.wait_for(informer.clone());
        self.own_writes.cache(read.cache());
        self.relations
            .push(attachments::attach_later(informer, handler, options));
        self
    }

    /// The kinds a sharder must place for this controller: its own kind by its key, each
    /// owned kind by its controller's (empty unless [sharded](ControllerOptions::sharded)).
    // Public for the sharding tests, which run the sharder outside a manager; the manager
    // hands these to its sharder itself.
    #[doc(hidden)]
    pub fn sharded_kinds(&self) -> &[ShardedKind] {
        &self.sharded_kinds
    }

    /// Reconcile only the updates of `K` this predicate passes (adds, deletes and resyncs
    /// always reconcile). Called again, the predicates combine: an update must pass all of
    /// them. See [`predicate`] for the built-in ones.
    #[must_use]
    pub fn predicate(mut self, predicate: Predicate<K>) -> Self {
        self.predicate = Some(match self.predicate.take() {
            Some(earlier) => earlier.and(predicate),
            None => predicate,
        });
        self
    }

    /// Pass on only the updates whose metadata `filter` passes (old, new), of the primary
    /// kind and of every related one: controller-runtime's `WithEventFilter`. Adds, deletes
    /// and resyncs always pass. Called again, it replaces the filter.
    ///
    /// ```no_run
    /// # fn example(manager: &kube_informer_runtime::manager::Manager) {
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
    /// use kube_informer_runtime::controller::ControllerOptions;
    ///
    /// // Nothing that only touches status: a spec change bumps the generation, and pods
    /// // (which have none) still pass when their labels change.
    /// let controller = manager
    ///     .controller::<Deployment>(ControllerOptions::default().name("web"))
    ///     .owns::<Pod>()
    ///     .event_filter(|old, new| old.generation != new.generation || old.labels != new.labels);
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn event_filter(
        self,
        filter: impl Fn(&ObjectMeta, &ObjectMeta) -> bool + Send + Sync + 'static,
    ) -> Self {
        *self.event_filter.write() = Some(Arc::new(filter));
        self
    }

    /// Reconcile every cached `K` again every `period` (a resync; none by default).
    #[must_use]
    pub fn resync(mut self, period: Duration) -> Self {
        self.resync = Some(period);
        self
    }

    /// Reconcile every cached `K` each time `ticks` yields (a config reload, a signal).
    #[must_use]
    pub fn reconcile_all_on(mut self, ticks: impl Stream<Item = ()> + Send + 'static) -> Self {
        let (store, queue) = (self.informer.store(), self.enqueue.clone());
        self.feeds
            .push(parking_lot::Mutex::new(Box::pin(async move {
                let mut ticks = std::pin::pin!(ticks);
                while ticks.next().await.is_some() {
                    for key in store.list_keys() {
                        queue
                            .triggers
                            .note(&key, || trigger::Trigger::own("reconcile_all_on"));
                        queue.add_resync(key);
                    }
                }
            })));
        self
    }

    /// How long to wait for the caches before giving up (default 2 minutes, as
    /// controller-runtime).
    #[must_use]
    pub fn cache_sync_timeout(mut self, timeout: Duration) -> Self {
        self.cache_sync_timeout = timeout;
        self
    }
}
