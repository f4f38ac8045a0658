//! A sharded manager's extra parts: its shard Lease as its "leadership", and the elected
//! sharder that places the objects of its controllers' kinds.

use std::{sync::Arc, time::Duration};

use tokio_util::sync::CancellationToken;

use crate::{
    leader_election::{LeaderElectionConfig, LeaderElector},
    lease::LeaseStore,
    sharding::{KindSets, Members, Sharder, shard_lease},
};

/// What [`ManagerOptions::sharded`](super::ManagerOptions::sharded) asked for.
#[derive(Debug, Clone)]
pub(crate) struct Sharding {
    pub(crate) ring: String,
    pub(crate) shard: String,
    pub(crate) every: Duration,
}

impl Sharding {
    pub(crate) fn new(ring: String, shard: String) -> Self {
        Self {
            ring,
            shard,
            every: Duration::from_secs(5),
        }
    }

    /// The replica's shard Lease, with the namespace and durations of `base` when given.
    pub(crate) fn lease(&self, base: Option<&LeaderElectionConfig>) -> LeaderElectionConfig {
        let mut config = shard_lease(&self.ring, &self.shard);
        if let Some(base) = base {
            config = config
                .lease_duration(base.lease_duration)
                .renew_deadline(base.renew_deadline)
                .retry_period(base.retry_period);
            if let Some(namespace) = &base.namespace {
                config = config.namespace(namespace.clone());
            }
        }
        config
    }

    /// The sharder's election: one replica of the ring places the objects.
    fn election(&self, shard_lease: &LeaderElectionConfig) -> LeaderElectionConfig {
        let mut config = LeaderElectionConfig::new(format!("{}-sharder", self.ring))
            .identity(self.shard.clone())
            .lease_duration(shard_lease.lease_duration)
            .renew_deadline(shard_lease.renew_deadline)
            .retry_period(shard_lease.retry_period);
        if let Some(namespace) = &shard_lease.namespace {
            config = config.namespace(namespace.clone());
        }
        config
    }
}

/// Runs the sharder while this replica is elected for it, until `cancel`: the election and
/// the rounds both live in this future (nothing is spawned), and losing the election stops
/// the rounds at once. When the kinds change (a fleet member engaged or gone) the rounds
/// start again over the new kinds, once they have been still for a moment.
pub(crate) async fn run_sharder(
    sharding: Sharding,
    shard_lease: LeaderElectionConfig,
    leases: Arc<dyn LeaseStore>,
    kind_sets: KindSets,
    cancel: CancellationToken,
) -> Result<(), String> {
    let elector = LeaderElector::new(leases.clone(), sharding.election(&shard_lease))
        .map_err(|e| e.to_string())?;
    let members = Members::new(leases, sharding.ring.clone());
    let sharder = Sharder::new(sharding.ring.clone());
    let mut changes = kind_sets.subscribe();
    let rounds = async {
        let mut leading = elector.leading();
        loop {
            // Meanwhile the Leases are observed, so that once elected this replica knows
            // for how long each has gone unchanged: a new observer would count a dead
            // shard alive for one more Lease duration.
            let observing = async {
                loop {
                    if let Err(error) = members.observe().await {
                        tracing::debug!(%error, "cannot read the shard Leases");
                    }
                    tokio::time::sleep(crate::sharding::OBSERVE_EVERY).await;
                }
            };
            let elected = tokio::select! {
                elected = leading.wait_for(|l| *l) => elected.is_ok(),
                () = observing => false,
            };
            if !elected {
                return;
            }
            let stop = CancellationToken::new();
            changes.borrow_and_update();
            let kinds = kind_sets.all();
            tokio::select! {
                () = sharder.run(&members, &kinds, sharding.every, stop.clone()) => return,
                lost = leading.wait_for(|l| !*l) => {
                    stop.cancel();
                    if lost.is_err() {
                        return;
                    }
                }
                changed = settled(&mut changes) => {
                    stop.cancel();
                    if !changed {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        () = elector.run(cancel.clone()) => {}
        () = rounds => {}
    }
    Ok(())
}

/// Waits for the kinds to change and then stay still for a second (members engaged one
/// after the other start the sharder's caches again once, not once each); `false` when
/// nobody can change them any more.
async fn settled(
    changes: &mut tokio::sync::watch::Receiver<
        std::collections::BTreeMap<String, Vec<crate::sharding::ShardedKind>>,
    >,
) -> bool {
    if changes.changed().await.is_err() {
        return false;
    }
    loop {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return true },
            () = tokio::time::sleep(crate::sharding::OBSERVE_EVERY) => return true,
        }
    }
}
