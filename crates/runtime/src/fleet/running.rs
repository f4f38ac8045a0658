//! Running a [`FleetController`]: the members followed as the fleet changes, one queue
//! and its workers, the hub's relations — until it is stopped (drained) or halted, with
//! everything it started stopped and awaited before it returns.

use std::sync::Arc;

use kube_informer::factory::FactoryScope;
use tokio_util::sync::CancellationToken;

use super::{
    Cluster, FleetController, hub,
    members::{Members, Recipe},
};
use crate::{
    controller::{ErrorPolicy, Watchable, spawn_workers},
    reconcile::Reconciler,
};

impl<K> FleetController<K>
where
    K: Watchable,
    K::Scope: FactoryScope,
{
    /// Reconciles until `cancel`: each member engaged (and accepted by the
    /// [filter](Self::clusters)) gets `make_ctx(&cluster)` and its controller; each
    /// disengaged one has its reconciles cancelled and its keys dropped. On `cancel` it
    /// drains as a plain controller does: no new key is taken, the reconciles in flight
    /// and the keys queued finish within
    /// [`drain_timeout`](crate::controller::ControllerOptions::drain_timeout), then what
    /// still runs is cancelled and everything is awaited. Dropping the future instead stops
    /// the same at once (handlers closed, the hub's included; tasks aborted).
    pub async fn run<Ctx, R, P>(
        self,
        make_ctx: impl Fn(&Cluster) -> Arc<Ctx> + Send + Sync + 'static,
        reconcile: R,
        error_policy: P,
        cancel: CancellationToken,
    ) where
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
        P: ErrorPolicy<K, R::Error, Ctx>,
    {
        let halt = CancellationToken::new();
        self.run_until(make_ctx, reconcile, error_policy, cancel, halt)
            .await;
    }

    /// [`run`](Self::run) with a second token: `halt` cancels the reconciles in flight and
    /// returns once they have stopped (leadership lost, or the shutdown deadline passed),
    /// where `graceful` drains.
    pub(crate) async fn run_until<Ctx, R, P>(
        mut self,
        make_ctx: impl Fn(&Cluster) -> Arc<Ctx> + Send + Sync + 'static,
        reconcile: R,
        error_policy: P,
        graceful: CancellationToken,
        halt: CancellationToken,
    ) where
        Ctx: Send + Sync + 'static,
        R: Reconciler<K, Ctx>,
        P: ErrorPolicy<K, R::Error, Ctx>,
    {
        let queue = self.queue();
        let recipe = Recipe {
            controller: self.options.name.clone(),
            queue: queue.clone(),
            build: self.builder(),
            make_ctx: Box::new(make_ctx),
            reconcile: Arc::new(reconcile),
            error_policy: Arc::new(error_policy),
        };
        let mut members = Members::new(self.placing.clone());
        let process = {
            let (followed, queue) = (members.followed(), queue.clone());
            move |key| {
                let attempt = queue.num_requeues(&key) + 1;
                followed.reconcile(key, attempt)
            }
        };
        let mut workers = spawn_workers(&queue, &self.options, process);
        let fanout = hub::Fanout::default();
        let hub = std::mem::take(&mut self.hub);
        let all_keys: Vec<_> = hub.iter().map(|r| r.all_keys.clone()).collect();
        let attached: Vec<hub::Detach> = hub
            .into_iter()
            .map(|r| (r.attach)(fanout.clone()))
            .collect();
        let mut changes = self.fleet.changes();
        let filter = self.filter.clone();
        let drain = loop {
            let clusters = changes.borrow_and_update().clone();
            let new = members.follow(&clusters, filter.as_ref(), &recipe).await;
            fanout.set(members.inboxes());
            // A member followed now gets the keys of every hub object (queued once it syncs).
            for inbox in new {
                for key in all_keys.iter().flat_map(|keys| keys()) {
                    crate::controller::KeySink::add(&*inbox, key);
                }
            }
            tokio::select! {
                () = graceful.cancelled() => break true,
                () = halt.cancelled() => break false,
                changed = changes.changed() => if changed.is_err() { break true },
            }
        };
        if drain {
            tokio::select! {
                _ = workers.drain(self.options.drain_timeout) => {}
                () = halt.cancelled() => {}
            }
        }
        // Already stopped after a full drain; otherwise cancel and wait.
        workers.abort().await;
        for handler in attached {
            handler.remove().await;
        }
        members.stop_all().await;
    }
}
