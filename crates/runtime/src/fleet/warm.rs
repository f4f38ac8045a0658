//! A fleet controller's member caches, kept warm on every replica: under leader election
//! only the leader reconciles, but each standby makes the same informers in each member
//! and keeps them synced, as a standby does for a single cluster — so its `/readyz`
//! reflects its members, a rolling update proceeds, and a failover starts with synced
//! caches and no relist.

use std::{collections::HashMap, sync::Arc};

use futures_util::future::BoxFuture;
use kube_informer::{
    factory::FactoryScope,
    workqueue::{QueueConfig, RateLimitingQueue},
};
use tokio_util::sync::CancellationToken;

use super::{
    Cluster, FleetController,
    inbox::Inbox,
    members::{accepted, guarded},
};
use crate::controller::Watchable;

/// Keeps a fleet controller's member informers running until cancelled.
pub(crate) type Warm = Box<dyn FnOnce(CancellationToken) -> BoxFuture<'static, ()> + Send>;

impl<K> FleetController<K>
where
    K: Watchable,
    K::Scope: FactoryScope,
{
    /// What keeps, on this replica, the informers this controller reads in each member it
    /// follows running: for each member, its controller is made (which asks its factory
    /// for those informers — the same ones the leader's controller will share) and its
    /// factory started; nothing is attached and nothing is reconciled.
    pub(crate) fn warm(&self) -> Warm {
        let (fleet, build, filter) = (self.fleet.clone(), self.builder(), self.filter.clone());
        let name = self.options.name.clone();
        Box::new(move |cancel| {
            Box::pin(async move {
                // Never opened, never fed: the handlers that would feed it are not attached.
                let queue = RateLimitingQueue::new(QueueConfig::default());
                queue.shut_down();
                let mut warmed: HashMap<String, u64> = HashMap::new();
                let mut changes = fleet.changes();
                loop {
                    let clusters = changes.borrow_and_update().clone();
                    let clusters = accepted(&clusters, filter.as_ref(), &name);
                    warmed.retain(|member, generation| {
                        clusters.get(member).map(Cluster::generation) == Some(*generation)
                    });
                    for (member, cluster) in &clusters {
                        if warmed.contains_key(member) {
                            continue;
                        }
                        warmed.insert(member.clone(), cluster.generation());
                        let inbox = Arc::new(Inbox::new(queue.clone(), member.as_str().into()));
                        if guarded(&name, member, || drop(build(cluster, inbox))).is_some() {
                            cluster.factory().start();
                        }
                    }
                    tokio::select! {
                        () = cancel.cancelled() => break,
                        changed = changes.changed() => if changed.is_err() { break },
                    }
                }
            })
        })
    }
}
