//! The members a [`FleetController`](super::FleetController) follows: for each, a
//! [`Controller`] on the member's factory whose handlers feed the fleet's queue through the
//! member's [`Inbox`], started (caches synced) on a task the fleet controller owns.

use std::{
    collections::{BTreeMap, HashMap},
    future::Future,
    panic::AssertUnwindSafe,
    sync::Arc,
};

use kube_informer::workqueue::{RateLimitingQueue, Requeue};
use parking_lot::Mutex;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::{
    Cluster,
    controller::{ClusterKey, Filter},
    inbox::Inbox,
    let_go,
    sharded::Placing,
};
use crate::controller::{Controller, Reconciler, RunningMember, SharedPolicy};

/// One member as the fleet controller follows it.
pub(super) struct Member {
    generation: u64,
    /// Cancelled when the member goes (a child of the cluster's `disengaged`).
    disengaged: CancellationToken,
    pub(super) inbox: Arc<Inbox>,
    /// Its controller, once its caches have synced.
    running: Option<RunningMember>,
}

/// The followed members, by name: what the workers look keys up in.
#[derive(Clone, Default)]
pub(super) struct MemberTable(Arc<Mutex<HashMap<Arc<str>, Member>>>);

/// Makes a member's controller: on its factory, feeding its inbox.
pub(super) type Build<K> = Arc<dyn Fn(&Cluster, Arc<Inbox>) -> Controller<K> + Send + Sync>;

/// Makes a member's reconcile context.
pub(super) type MakeCtx<Ctx> = Box<dyn Fn(&Cluster) -> Arc<Ctx> + Send + Sync>;

/// The followed members and the tasks that start them.
pub(super) struct Members {
    followed: MemberTable,
    /// The tasks that start members (attach, sync); owned here, aborted when it stops.
    starting: JoinSet<()>,
    /// Where a sharded fleet controller's member kinds go for the sharder.
    placing: Option<Placing>,
    /// Members whose controller or context could not be made (user code panicked), by
    /// the generation that failed: not tried again until engaged anew.
    failed: HashMap<String, u64>,
}

/// What a member's controller is made with.
pub(super) struct Recipe<K: kube::Resource, Ctx, R: Reconciler<K, Ctx>> {
    /// The fleet controller's name, for logs.
    pub(super) controller: String,
    pub(super) queue: RateLimitingQueue<ClusterKey>,
    pub(super) build: Build<K>,
    pub(super) make_ctx: MakeCtx<Ctx>,
    pub(super) reconcile: Arc<R>,
    pub(super) error_policy: SharedPolicy<K, R::Error, Ctx>,
}

impl MemberTable {
    /// Reconciles `key` in its member, cancelled if the member goes; a key of a member no
    /// longer followed (or not yet synced, which its inbox prevents) is dropped.
    pub(super) fn reconcile(
        &self,
        key: ClusterKey,
        attempt: u32,
    ) -> impl Future<Output = Requeue> + Send + 'static + use<> {
        let found = {
            let followed = self.0.lock();
            followed.get(&key.cluster).and_then(|member| {
                let running = member.running.as_ref()?;
                Some((
                    running.reconcile(key.key, attempt),
                    member.disengaged.clone(),
                ))
            })
        };
        async move {
            let Some((reconciling, disengaged)) = found else {
                return Requeue::Never;
            };
            tokio::select! {
                // A member already gone gets no first request.
                biased;
                () = disengaged.cancelled() => {
                    tracing::info!("the cluster was disengaged; reconcile cancelled");
                    Requeue::Never
                }
                requeue = reconciling => requeue,
            }
        }
    }
}

impl Members {
    pub(super) fn new(placing: Option<Placing>) -> Self {
        Self {
            followed: MemberTable::default(),
            starting: JoinSet::new(),
            placing,
            failed: HashMap::new(),
        }
    }

    /// What the workers reconcile through.
    pub(super) fn followed(&self) -> MemberTable {
        self.followed.clone()
    }

    /// The inboxes of the members followed now.
    pub(super) fn inboxes(&self) -> Vec<Arc<Inbox>> {
        let followed = self.followed.0.lock();
        followed.values().map(|m| m.inbox.clone()).collect()
    }

    /// Follows `clusters` (those `filter` accepts): stops following members gone (or
    /// engaged anew, or filtered out), starts following new ones. Returns the inboxes of
    /// the new ones.
    pub(super) async fn follow<K, Ctx, R>(
        &mut self,
        clusters: &BTreeMap<String, Cluster>,
        filter: Option<&Filter>,
        recipe: &Recipe<K, Ctx, R>,
    ) -> Vec<Arc<Inbox>>
    where
        K: kube::Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
        K::DynamicType: Clone + Send + Sync + 'static,
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
    {
        let clusters = &accepted(clusters, filter, recipe.controller.as_str());
        self.failed.retain(|name, generation| {
            clusters.get(name).map(Cluster::generation) == Some(*generation)
        });
        let gone = {
            let followed = self.followed.0.lock();
            let_go(followed.iter().map(|(n, m)| (&**n, m.generation)), clusters)
        };
        for name in gone {
            let member = self.followed.0.lock().remove(name.as_str());
            if let Some(member) = member {
                self.unfollow(&name, member).await;
            }
        }
        while self.starting.try_join_next().is_some() {}
        let mut new = Vec::new();
        for (name, cluster) in clusters {
            if self.failed.contains_key(name) {
                continue;
            }
            let name: Arc<str> = Arc::from(name.as_str());
            if self.followed.0.lock().contains_key(&name) {
                continue;
            }
            let inbox = Arc::new(Inbox::new(recipe.queue.clone(), name.clone()));
            let made = guarded(&recipe.controller, &name, || {
                let controller = (recipe.build)(cluster, inbox.clone());
                (controller, (recipe.make_ctx)(cluster))
            });
            let Some((controller, ctx)) = made else {
                self.failed.insert(name.to_string(), cluster.generation());
                continue;
            };
            if let Some(placing) = &self.placing {
                placing.place(&name, controller.sharded_kinds());
            }
            let disengaged = cluster.disengaged().child_token();
            let member = Member {
                generation: cluster.generation(),
                disengaged: disengaged.clone(),
                inbox: inbox.clone(),
                running: None,
            };
            self.followed.0.lock().insert(name.clone(), member);
            new.push(inbox);
            let (reconcile, policy) = (recipe.reconcile.clone(), recipe.error_policy.clone());
            let (followed, generation) = (self.followed.0.clone(), cluster.generation());
            self.starting.spawn(async move {
                let started = controller
                    .start_member(reconcile, policy, ctx, name.clone(), &disengaged)
                    .await;
                let Some(running) = started else { return };
                let mut followed = followed.lock();
                match followed.get_mut(&name) {
                    Some(member) if member.generation == generation => {
                        member.running = Some(running);
                        member.inbox.open();
                    }
                    // Gone while it synced: dropping it closes its handlers.
                    _ => {}
                }
            });
        }
        new
    }

    /// Stops following every member: reconciles cancelled, handlers detached, starting
    /// tasks ended.
    pub(super) async fn stop_all(&mut self) {
        let all: Vec<(Arc<str>, Member)> = self.followed.0.lock().drain().collect();
        for (name, member) in all {
            self.unfollow(&name, member).await;
        }
        self.starting.abort_all();
        while self.starting.join_next().await.is_some() {}
    }
}

impl Members {
    /// Stops following `member` (`name`, already out of the map): its kinds are no longer
    /// placed, its reconciles in flight end now (the fleet cancels its cluster's token
    /// too), then its handlers are detached.
    async fn unfollow(&self, name: &str, member: Member) {
        if let Some(placing) = &self.placing {
            placing.forget(name);
        }
        member.disengaged.cancel();
        if let Some(running) = member.running {
            running.stop().await;
        }
    }
}

/// The members of `clusters` that `filter` accepts (a filter that panics says no).
pub(super) fn accepted(
    clusters: &BTreeMap<String, Cluster>,
    filter: Option<&Filter>,
    controller: &str,
) -> BTreeMap<String, Cluster> {
    let Some(filter) = filter else {
        return clusters.clone();
    };
    clusters
        .iter()
        .filter(|(name, cluster)| guarded(controller, name, || filter(cluster)).unwrap_or(false))
        .map(|(name, cluster)| (name.clone(), cluster.clone()))
        .collect()
}

/// Runs user code made for member `cluster` (its controller's configuration, its context,
/// the cluster filter); a panic is logged and is `None`, that member's problem only.
pub(super) fn guarded<T>(controller: &str, cluster: &str, make: impl FnOnce() -> T) -> Option<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(make)) {
        Ok(made) => Some(made),
        Err(panic) => {
            let panic = crate::util::panic_message(&*panic);
            tracing::error!(
                controller, cluster, %panic,
                "user code for this member panicked: the member is not followed until it is engaged anew"
            );
            None
        }
    }
}
