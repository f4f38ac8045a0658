//! A sharded manager's extra parts: its shard Lease as its "leadership", and the elected
//! sharder that places the objects of its controllers' kinds.

use std::{collections::HashMap, sync::Arc, time::Duration};

use futures_util::{StreamExt, stream::FuturesUnordered};
use tokio_util::sync::CancellationToken;

use crate::{
    leader_election::{LeaderElectionConfig, LeaderElector},
    lease::LeaseStore,
    sharding::{KindSets, LiveShards, Sharder, Shards, SharedReads, shard_lease},
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
/// the rounds at once. Each set of kinds (the manager's controllers', each fleet member's)
/// is placed on its own, with caches of its own: a member whose cache cannot sync, or
/// whose API server holds a write, delays that member's objects only; a member engaged or
/// gone starts or stops its own caches, and the others keep theirs. The sets share their
/// reads of the shard Leases ([`SharedReads`]).
pub(crate) async fn run_sharder(
    sharding: Sharding,
    shard_lease: LeaderElectionConfig,
    leases: Arc<dyn LeaseStore>,
    kind_sets: KindSets,
    cancel: CancellationToken,
) -> Result<(), String> {
    let elector = LeaderElector::new(leases.clone(), sharding.election(&shard_lease))
        .map_err(|e| e.to_string())?;
    let live = LiveShards::new(leases, sharding.ring.clone());
    let reads = SharedReads::new(&live);
    let sharder = Sharder::new(sharding.ring.clone());
    let rounds = async {
        let mut leading = elector.leading();
        loop {
            // Meanwhile the Leases are observed, so that once elected this replica knows
            // for how long each has gone unchanged: a new observer would count a dead
            // shard alive for one more Lease duration.
            let observing = async {
                loop {
                    if let Err(error) = reads.observe().await {
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
            let sets = place_sets(&sharder, &kind_sets, &reads, sharding.every);
            tokio::select! {
                () = sets => return,
                lost = leading.wait_for(|l| !*l) => if lost.is_err() { return },
            }
        }
    };
    tokio::select! {
        () = elector.run(cancel.clone()) => {}
        () = rounds => {}
    }
    Ok(())
}

/// Places every set of `kind_sets` on its own until the sets can change no more (dropped
/// when the election is lost: every set's caches stop with it). A set that changes (its
/// serial) has its rounds started again; one that goes has them stopped; the others go on.
async fn place_sets(
    sharder: &Sharder,
    kind_sets: &KindSets,
    reads: &SharedReads<'_>,
    every: Duration,
) {
    let mut changes = kind_sets.subscribe();
    let mut placing: HashMap<String, (u64, CancellationToken)> = HashMap::new();
    let mut rounds = FuturesUnordered::new();
    loop {
        changes.borrow_and_update();
        let sets = kind_sets.sets();
        placing.retain(|by, (serial, stop)| {
            let same = sets.get(by).is_some_and(|set| set.serial == *serial);
            if !same {
                stop.cancel();
            }
            same
        });
        for (by, set) in sets {
            if placing.contains_key(&by) {
                continue;
            }
            let stop = CancellationToken::new();
            placing.insert(by.clone(), (set.serial, stop.clone()));
            let shards = Shards::Shared(reads);
            rounds.push(async move {
                sharder.run_on(shards, &set.kinds, every, stop).await;
            });
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { break },
            Some(()) = rounds.next(), if !rounds.is_empty() => {}
        }
    }
    // Nobody can change the sets any more: place the last ones until the election ends.
    while rounds.next().await.is_some() {}
    std::future::pending::<()>().await;
}
