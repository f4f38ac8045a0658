//! [`FleetController`]: one controller of `K` over every member of a [`Fleet`].

use std::{borrow::Cow, fmt, sync::Arc};

use kube_informer::{
    ObjectKey,
    factory::{FactoryScope, InformerSpec},
    informer::SharedIndexInformer,
    workqueue::{QueueConfig, RateLimitingQueue},
};

use super::{Cluster, Fleet, hub, members::Build};
use crate::controller::{Controller, ControllerOptions, Watchable, backoff_rate_limiter};

/// A key in a fleet: the member cluster and the object's key there.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterKey {
    /// The member's name in the fleet.
    pub cluster: Arc<str>,
    /// The object's key in it.
    pub key: ObjectKey,
}

impl fmt::Display for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.cluster, self.key)
    }
}

/// What is done to each member's [`Controller`] before it starts (relations, predicates).
type Configure<K> = Arc<dyn Fn(Controller<K>) -> Controller<K> + Send + Sync>;

/// A controller of `K` over every member of a [`Fleet`], with one queue of
/// [`ClusterKey`]s.
///
/// A reconcile written for one cluster runs unchanged: it gets `Cached<K>` and an
/// `Arc<Ctx>`, and the context is made per member (`make_ctx(&cluster)`, holding that
/// member's client), so the same function reconciles a fleet of one or of fifty. Each
/// member has a [`Controller`] of its own on its factory — its relations
/// ([`owns`](Self::owns), [`watches`](Self::watches), anything [`configure`](Self::configure)
/// adds), predicates, read-your-writes, reconcile deadline, retries, metrics and span are a
/// plain controller's — whose handlers feed the fleet's one queue and whose reconciles the
/// fleet's workers run. The reconcile's span names the member (`cluster`).
///
/// Isolation: a member's keys enter the queue only once its caches have synced (a member
/// unreachable from the start holds no worker). The queue is
/// [fair](kube_informer::workqueue::QueueConfig::fair_by) by cluster — while one member has
/// keys waiting, no other member gets two reconciles ahead of it. By default — with no
/// option set — one member holds at most half the workers (rounded up:
/// [`ControllerOptions::max_in_flight_per_group`]), a reconcile is cancelled after 2
/// minutes ([`ControllerOptions::reconcile_timeout`]), and the members' clients made from
/// kubeconfigs time out ([`MemberClients`](super::MemberClients)): with two workers or
/// more, a member whose API server accepts connections and never answers holds its share
/// of the workers for a while, never all of them, never for ever. A failing key backs off on its own. A
/// disengaged member's reconciles in flight are cancelled before its informers stop; its
/// keys still queued are dropped when taken. A panic in `make_ctx` or `configure` for one
/// member is logged and leaves that member unfollowed (until it is engaged anew); the
/// others go on.
///
/// Under a [`Manager`](crate::Manager) with leader election
/// ([`add_fleet_controller`](crate::Manager::add_fleet_controller)), every replica keeps
/// the members' informers this controller reads warm (a standby's `/readyz` reflects its
/// members), and only the leader reconciles: a failover starts with synced caches, no
/// relist.
///
/// ```no_run
/// # async fn demo(fleet: kube_informer_runtime::fleet::Fleet) {
/// use std::sync::Arc;
/// use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
/// use kube_informer_runtime::{
///     CancellationToken,
///     controller::{Action, Cached, ControllerOptions},
///     fleet::FleetController,
/// };
///
/// struct Ctx { client: kube::Client }
///
/// // The reconcile of a single-cluster controller, unchanged.
/// async fn reconcile(deploy: Cached<Deployment>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
///     let _ = (deploy, &ctx.client);
///     Ok(Action::Done)
/// }
///
/// let controller = FleetController::<Deployment>::new(&fleet, ControllerOptions::default().name("deploys"))
///     .owns::<Pod>(); // a pod's change reconciles its Deployment, in the pod's cluster
/// controller
///     .run(
///         |cluster| Arc::new(Ctx { client: cluster.client().clone() }),
///         reconcile,
///         |_, _, _| Action::Retry,
///         CancellationToken::new(),
///     )
///     .await;
/// # }
/// ```
pub struct FleetController<K: kube::Resource> {
    pub(super) fleet: Fleet,
    pub(super) options: ControllerOptions,
    spec: Arc<dyn Fn() -> InformerSpec<K> + Send + Sync>,
    configure: Vec<Configure<K>>,
    pub(super) hub: Vec<hub::HubRelation>,
    /// Sharded: each member whole on one replica.
    pinned: bool,
    /// Sharded under a manager: where the member kinds go for the sharder.
    pub(super) placing: Option<super::sharded::Placing>,
    /// Which members it follows (default: all).
    pub(super) filter: Option<Filter>,
}

/// Which members a fleet controller follows.
pub(super) type Filter = Arc<dyn Fn(&Cluster) -> bool + Send + Sync>;

impl<K> FleetController<K>
where
    K: Watchable,
    K::Scope: FactoryScope,
{
    /// A controller of every `K` in every member of `fleet`. Its options apply to each
    /// member's controller as to a plain one, except: the workers (and `worker_scaling`) are
    /// the fleet's, shared by every member; `max_in_flight_per_group` caps one member's
    /// share; the queue is fair by member (`fairness` is not used); `backoff` applies, a
    /// custom `rate_limiter` does not (it limits `ObjectKey`s, the fleet queues
    /// [`ClusterKey`]s). Sharding a fleet is done by a sharded manager
    /// ([`Manager::add_fleet_controller`](crate::Manager::add_fleet_controller)).
    pub fn new(fleet: &Fleet, options: ControllerOptions) -> Self {
        Self::new_with(fleet, InformerSpec::new, options)
    }

    /// [`new`](Self::new) for the `K` objects each member's `spec()` selects.
    pub fn new_with(
        fleet: &Fleet,
        spec: impl Fn() -> InformerSpec<K> + Send + Sync + 'static,
        options: ControllerOptions,
    ) -> Self {
        Self {
            fleet: fleet.clone(),
            options: options.with_fleet_defaults(),
            spec: Arc::new(spec),
            configure: Vec::new(),
            hub: Vec::new(),
            pinned: false,
            placing: None,
            filter: None,
        }
    }

    /// Follows only the members `filter` accepts (default: every member), read again each
    /// time the fleet changes: a member whose labels change so that it no longer passes is
    /// let go (its reconciles cancelled, its handlers detached), one that starts passing is
    /// followed. A filter that panics is taken as a no, for that member.
    ///
    /// ```no_run
    /// # fn demo(fleet: &kube_informer_runtime::fleet::Fleet) {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube_informer_runtime::{controller::ControllerOptions, fleet::FleetController};
    ///
    /// // Only the members whose Cluster (or ClusterProfile) is labelled env=prod.
    /// let controller = FleetController::<ConfigMap>::new(fleet, ControllerOptions::default())
    ///     .clusters(|cluster| cluster.labels().get("env").is_some_and(|env| env == "prod"));
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn clusters(mut self, filter: impl Fn(&Cluster) -> bool + Send + Sync + 'static) -> Self {
        self.filter = Some(Arc::new(filter));
        self
    }

    /// Sharded ([`Manager::add_fleet_controller`](crate::Manager::add_fleet_controller) under
    /// a sharded manager): `true` places each member whole on one replica (the member's
    /// name is its key on the ring: a per-cluster ring), `false` (the default) places each
    /// `(cluster, object)` pair on its own, so N replicas split every member's objects.
    #[must_use]
    pub fn pin_clusters(mut self, pinned: bool) -> Self {
        self.pinned = pinned;
        self
    }

    /// Its name (its options').
    pub fn name(&self) -> &str {
        &self.options.name
    }

    /// Whether it reconciles on every replica, leader or not (its options').
    pub(crate) fn runs_on_every_replica(&self) -> bool {
        self.options.every_replica
    }

    /// Under a manager: its metrics and sharding, and where sharded member kinds go.
    pub(crate) fn managed(
        mut self,
        options: impl FnOnce(ControllerOptions) -> ControllerOptions,
        kinds: Option<crate::sharding::KindSets>,
    ) -> Self {
        self.options = options(self.options);
        self.placing = kinds.map(|kinds| super::sharded::Placing {
            controller: self.options.name.clone(),
            pinned: self.pinned,
            kinds,
        });
        self
    }

    /// Applies `configure` to each member's [`Controller`] before it starts: any relation,
    /// predicate, event filter or resync a plain controller takes, within that member.
    ///
    /// ```no_run
    /// # fn demo(fleet: &kube_informer_runtime::fleet::Fleet) {
    /// use k8s_openapi::api::{apps::v1::Deployment, core::v1::Pod};
    /// use kube_informer_runtime::{controller::{predicate, ControllerOptions}, fleet::FleetController};
    ///
    /// let controller = FleetController::<Deployment>::new(fleet, ControllerOptions::default())
    ///     .configure(|c| c.owns::<Pod>().predicate(predicate::generation()));
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn configure(
        mut self,
        configure: impl Fn(Controller<K>) -> Controller<K> + Send + Sync + 'static,
    ) -> Self {
        self.configure.push(Arc::new(configure));
        self
    }

    /// Within each member, a change of a `C` whose controller owner is a `K` reconciles
    /// that owner ([`Controller::owns`]).
    #[must_use]
    pub fn owns<C: Watchable>(self) -> Self {
        self.configure(Controller::owns::<C>)
    }

    /// Within each member, a change of an `O` reconciles the keys `map` gives, in that
    /// member ([`Controller::watches`]).
    #[must_use]
    pub fn watches<O: Watchable>(
        self,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self {
        let map = Arc::new(map);
        self.configure(move |c| {
            let map = map.clone();
            c.watches::<O>(move |o| map(o))
        })
    }

    /// Reconciles, in every member, the keys `map` gives for each object `hub` caches (an
    /// informer of the hub's own factory): a hub object's change queues them in every
    /// engaged member, and a member engaged later gets the keys of every hub object. An
    /// object a member lacks arrives as `Cached::Gone`: the reconcile creates it.
    ///
    /// ```no_run
    /// # fn demo(fleet: &kube_informer_runtime::fleet::Fleet, hub: &kube_informer::factory::SharedInformerFactory) {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use kube::ResourceExt;
    /// use kube_informer::ObjectKey;
    /// use kube_informer_runtime::{controller::ControllerOptions, fleet::FleetController};
    ///
    /// // Each ConfigMap in the hub's `templates` namespace is copied into `apps` of every member.
    /// let templates = hub.informer::<ConfigMap>();
    /// let controller = FleetController::<ConfigMap>::new(fleet, ControllerOptions::default())
    ///     .watches_hub(&templates, |template: &ConfigMap| {
    ///         vec![ObjectKey::new(Some("apps"), &template.name_any())]
    ///     });
    /// # let _ = controller;
    /// # }
    /// ```
    #[must_use]
    pub fn watches_hub<O>(
        mut self,
        hub: &SharedIndexInformer<O>,
        map: impl Fn(&O) -> Vec<ObjectKey> + Send + Sync + 'static,
    ) -> Self
    where
        O: kube::Resource + Clone + Send + Sync + 'static,
    {
        self.hub.push(hub::relation(hub, map));
        self
    }

    /// The fleet's queue: fair by member, each member's share of workers capped.
    pub(super) fn queue(&self) -> RateLimitingQueue<ClusterKey> {
        let mut config = QueueConfig::default()
            .name(self.options.name.clone())
            .fair_by(|key: &ClusterKey| Cow::Borrowed(&*key.cluster))
            .max_in_flight_per_group(self.options.group_limit);
        if let Some(metrics) = &self.options.metrics {
            config = config.metrics(metrics.core());
        }
        if let Some((base, max)) = self.options.backoff {
            config = config.rate_limiter(backoff_rate_limiter(base, max));
        }
        RateLimitingQueue::new(config)
    }

    /// Makes a member's controller: on its factory, feeding its inbox, configured (a panic
    /// in `configure` is the caller's to catch).
    pub(super) fn builder(&self) -> Build<K> {
        let (spec, options) = (self.spec.clone(), self.options.clone());
        let configure = self.configure.clone();
        Arc::new(move |cluster, inbox| {
            let controller =
                Controller::for_fleet_member(cluster.factory(), spec(), options.clone(), inbox);
            configure
                .iter()
                .fold(controller, |c, configure| configure(c))
        })
    }
}
