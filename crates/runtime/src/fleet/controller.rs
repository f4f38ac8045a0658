//! [`FleetController`]: one controller of `K` over every member of a [`Fleet`].

use std::{borrow::Cow, collections::HashMap, fmt, panic::AssertUnwindSafe, sync::Arc};

use futures_util::FutureExt;
use kube_informer::{
    ObjectKey, ReadOnlyStore,
    factory::{FactoryScope, InformerSpec},
    informer::{HandlerFuncs, HandlerOptions, HandlerRegistration, SharedIndexInformer},
    meta_namespace_key,
    workqueue::{
        BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter, QueueConfig,
        RateLimitingQueue, Requeue, Workers,
    },
};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Cluster, Fleet, hub};
use crate::{
    controller::{Action, Cached, ControllerOptions, Watchable},
    reconcile::Reconciler,
    util::panic_message,
};

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

/// One member as the controller follows it.
struct Member<K: kube::Resource + Clone + Send + Sync + 'static, Ctx> {
    generation: u64,
    store: ReadOnlyStore<K>,
    ctx: Arc<Ctx>,
    disengaged: CancellationToken,
    informer: SharedIndexInformer<K>,
    registration: HandlerRegistration<K>,
}

type Members<K, Ctx> = Arc<Mutex<HashMap<Arc<str>, Member<K, Ctx>>>>;

/// A controller of `K` over every member of a [`Fleet`], with one queue of
/// [`ClusterKey`]s.
///
/// A reconcile written for one cluster runs unchanged: it gets `Cached<K>` and an
/// `Arc<Ctx>`, and the context is made per member (`make_ctx(&cluster)`, holding that
/// member's client), so the same function reconciles a fleet of one or of fifty.
///
/// Isolation: the queue is [fair](kube_informer::workqueue::QueueConfig::fair_by) by
/// cluster — while one member has keys waiting, no other member gets two reconciles ahead
/// of it — and [`ControllerOptions::max_in_flight_per_group`] caps how many workers one
/// member may hold, so a slow or unreachable member cannot take them all. A failing key
/// backs off on its own. A disengaged member's reconciles in flight are cancelled before its
/// informers stop; its keys still queued are dropped when taken.
///
/// ```no_run
/// # async fn demo(fleet: kube_informer_runtime::fleet::Fleet) {
/// use std::sync::Arc;
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube_informer_runtime::{
///     CancellationToken,
///     controller::{Action, Cached, ControllerOptions},
///     fleet::FleetController,
/// };
///
/// struct Ctx { client: kube::Client }
///
/// // The reconcile of a single-cluster controller, unchanged.
/// async fn reconcile(cm: Cached<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, kube::Error> {
///     let _ = (cm, &ctx.client);
///     Ok(Action::Done)
/// }
///
/// let controller = FleetController::<ConfigMap>::new(&fleet, ControllerOptions::default().name("cms"));
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
pub struct FleetController<K> {
    fleet: Fleet,
    options: ControllerOptions,
    spec: Arc<dyn Fn() -> InformerSpec<K> + Send + Sync>,
    hub: Vec<hub::HubRelation>,
}

impl<K> FleetController<K>
where
    K: Watchable,
    K::Scope: FactoryScope,
{
    /// A controller of every `K` in every member of `fleet`. Its options' name, workers,
    /// `max_in_flight_per_group` (per member) and backoff apply.
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
            options,
            spec: Arc::new(spec),
            hub: Vec::new(),
        }
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

    /// Reconciles until `cancel`: each member engaged gets `make_ctx(&cluster)` and its
    /// informer; each disengaged one has its reconciles cancelled and its keys dropped.
    pub async fn run<Ctx, R, P>(
        mut self,
        make_ctx: impl Fn(&Cluster) -> Arc<Ctx> + Send,
        reconcile: R,
        error_policy: P,
        cancel: CancellationToken,
    ) where
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
        P: Fn(&Cached<K>, &R::Error, &Ctx) -> Action + Send + Sync + 'static,
    {
        let name = self.options.name.clone();
        let mut config = QueueConfig::default()
            .name(name.clone())
            .fair_by(|key: &ClusterKey| Cow::Borrowed(&*key.cluster))
            .max_in_flight_per_group(self.options.group_limit);
        if let Some((base, max)) = self.options.backoff {
            config = config.rate_limiter(MaxOfRateLimiter::new(vec![
                Box::new(ItemExponentialFailureRateLimiter::new(base, max)),
                Box::new(BucketRateLimiter::new(10.0, 100)),
            ]));
        }
        let queue = RateLimitingQueue::new(config);
        let members: Members<K, Ctx> = Arc::default();
        let process = {
            let (members, queue) = (members.clone(), queue.clone());
            let (reconcile, policy) = (Arc::new(reconcile), Arc::new(error_policy));
            move |key: ClusterKey| reconcile_one(&members, &queue, &reconcile, &policy, &name, key)
        };
        let mut workers = Workers::spawn(&queue, self.options.workers, process);
        let fanout = hub::Fanout {
            queue: queue.clone(),
            members: Arc::default(),
        };
        let hub = std::mem::take(&mut self.hub);
        let all_keys: Vec<_> = hub.iter().map(|r| r.all_keys.clone()).collect();
        let detach: Vec<hub::Detach> = hub
            .into_iter()
            .map(|r| (r.attach)(fanout.clone()))
            .collect();
        let mut changes = self.fleet.changes();
        loop {
            let clusters = changes.borrow_and_update().clone();
            let new = self.follow(&clusters, &members, &queue, &make_ctx).await;
            *fanout.members.lock() = members.lock().keys().cloned().collect();
            // A member engaged now gets the keys of every hub object.
            for cluster in new {
                for key in all_keys.iter().flat_map(|keys| keys()) {
                    queue.add(ClusterKey {
                        cluster: cluster.clone(),
                        key,
                    });
                }
            }
            tokio::select! {
                () = cancel.cancelled() => break,
                changed = changes.changed() => if changed.is_err() { break },
            }
        }
        workers.abort().await;
        for detach in detach {
            detach().await;
        }
        let followed: Vec<Member<K, Ctx>> = members.lock().drain().map(|(_, m)| m).collect();
        for member in followed {
            let _ = member
                .informer
                .remove_event_handler(&member.registration)
                .await;
        }
    }

    /// Starts following new members (and new generations), stops following gone ones.
    async fn follow<Ctx: Send + Sync + 'static>(
        &self,
        clusters: &std::collections::BTreeMap<String, Cluster>,
        members: &Members<K, Ctx>,
        queue: &RateLimitingQueue<ClusterKey>,
        make_ctx: &(impl Fn(&Cluster) -> Arc<Ctx> + Send),
    ) -> Vec<Arc<str>> {
        let gone: Vec<Member<K, Ctx>> = {
            let mut followed = members.lock();
            let stale: Vec<Arc<str>> = followed
                .iter()
                .filter(|(name, m)| {
                    clusters.get(&***name).map(Cluster::generation) != Some(m.generation)
                })
                .map(|(name, _)| name.clone())
                .collect();
            stale.iter().filter_map(|n| followed.remove(n)).collect()
        };
        for member in gone {
            // Its reconciles in flight end now (the fleet cancels the token too).
            member.disengaged.cancel();
            let _ = member
                .informer
                .remove_event_handler(&member.registration)
                .await;
        }
        let mut new = Vec::new();
        for (name, cluster) in clusters {
            if members.lock().contains_key(name.as_str()) {
                continue;
            }
            new.push(Arc::from(name.as_str()));
            let informer = cluster.factory().informer_with::<K>((self.spec)());
            let handler = enqueue::<K>(queue.clone(), Arc::from(name.as_str()));
            let options = HandlerOptions::default().name(format!("fleet {}", self.options.name));
            let registration = informer.add_event_handler(handler, options);
            cluster.factory().start();
            let member = Member {
                generation: cluster.generation(),
                store: informer.store(),
                ctx: make_ctx(cluster),
                disengaged: cluster.disengaged().clone(),
                informer,
                registration,
            };
            members.lock().insert(Arc::from(name.as_str()), member);
        }
        new
    }
}

/// A member's handler: every change queues the object's key in that member.
fn enqueue<K: kube::Resource + Send + Sync + 'static>(
    queue: RateLimitingQueue<ClusterKey>,
    cluster: Arc<str>,
) -> HandlerFuncs<K> {
    let key = move |object: &K| {
        meta_namespace_key(object).ok().map(|key| ClusterKey {
            cluster: cluster.clone(),
            key,
        })
    };
    let (on_add, on_update, on_delete) = (queue.clone(), queue.clone(), queue);
    let (add_key, update_key, delete_key) = (key.clone(), key.clone(), key);
    HandlerFuncs::new()
        .on_add(move |object: Arc<K>, initial| {
            if let Some(key) = add_key(&object) {
                if initial {
                    on_add.add_low_priority(key);
                } else {
                    on_add.add(key);
                }
            }
        })
        .on_update(move |_, new: Arc<K>| {
            if let Some(key) = update_key(&new) {
                on_update.add(key);
            }
        })
        .on_delete(move |gone: kube_informer::fifo::DeletedObject<K>| {
            if let Some(key) = delete_key(gone.object().as_ref()) {
                on_delete.add(key);
            }
        })
}

/// One reconcile of `key`, in its member's context; cancelled if the member goes.
fn reconcile_one<K, Ctx, R, P>(
    members: &Members<K, Ctx>,
    queue: &RateLimitingQueue<ClusterKey>,
    reconcile: &Arc<R>,
    policy: &Arc<P>,
    controller: &str,
    key: ClusterKey,
) -> impl Future<Output = Requeue> + Send + 'static + use<K, Ctx, R, P>
where
    K: kube::Resource + Clone + Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
    R: Reconciler<K, Ctx>,
    P: Fn(&Cached<K>, &R::Error, &Ctx) -> Action + Send + Sync + 'static,
{
    let member = members
        .lock()
        .get(&key.cluster)
        .map(|m| (m.store.clone(), m.ctx.clone(), m.disengaged.clone()));
    let attempt = queue.num_requeues(&key) + 1;
    let span = tracing::info_span!(
        "reconcile",
        controller,
        cluster = %key.cluster,
        namespace = key.key.namespace().unwrap_or_default(),
        name = key.key.name(),
        attempt,
    );
    let (reconcile, policy) = (reconcile.clone(), policy.clone());
    async move {
        // Its cluster was disengaged after the key was queued: nothing to reconcile.
        let Some((store, ctx, disengaged)) = member else {
            return Requeue::Never;
        };
        let cached = match store.get_by_key(key.key.as_str()) {
            Some(object) => Cached::Present(object),
            None => Cached::Gone(key.key.clone()),
        };
        let input = (cached.clone(), ctx.clone());
        let started =
            std::panic::catch_unwind(AssertUnwindSafe(|| reconcile.reconcile(input.0, input.1)));
        let ran = match started {
            Err(panic) => Err(panic),
            Ok(future) => tokio::select! {
                () = disengaged.cancelled() => {
                    tracing::info!("the cluster was disengaged; reconcile cancelled");
                    return Requeue::Never;
                }
                ran = AssertUnwindSafe(future).catch_unwind() => ran,
            },
        };
        match ran {
            Ok(Ok(Action::Done)) => Requeue::Never,
            Ok(Ok(Action::RequeueAfter(delay))) => Requeue::After(delay),
            Ok(Ok(Action::Retry)) => Requeue::RateLimited,
            Ok(Err(error)) => {
                let decide = AssertUnwindSafe(|| policy(&cached, &error, &ctx));
                let action = std::panic::catch_unwind(decide).unwrap_or(Action::Retry);
                tracing::warn!(%error, ?action, "reconcile failed");
                match action {
                    Action::Done => Requeue::Never,
                    Action::RequeueAfter(delay) => Requeue::After(delay),
                    Action::Retry => Requeue::RateLimited,
                }
            }
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!("the reconcile panicked: {message}; retrying");
                Requeue::RateLimited
            }
        }
    }
    .instrument(span)
}
