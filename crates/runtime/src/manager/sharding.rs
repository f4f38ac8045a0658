//! A sharded manager's extra parts: its shard Lease as its "leadership", and the elected
//! sharder that places the objects of its controllers' kinds.

use std::{collections::HashMap, sync::Arc, time::Duration};

use futures_util::{StreamExt, stream::FuturesUnordered};
use tokio_util::sync::CancellationToken;

use kube_informer::list_watch::ShardField;

use crate::{
    leader_election::{LeaderElectionConfig, LeaderElector},
    lease::LeaseStore,
    sharding::{
        KindSets, LiveShards, Sharder, Shards, SharedReads, shard_lease,
        slots::{RangeShare, SlotServer, TableStore, coordinate_once, serve_slots},
    },
};

/// What [`ManagerOptions::sharded`](super::ManagerOptions::sharded) asked for.
#[derive(Debug, Clone)]
pub(crate) struct Sharding {
    pub(crate) ring: String,
    pub(crate) shard: String,
    pub(crate) every: Duration,
    /// Range mode, hashing this field ([`ManagerOptions::hash_ranges`](super::ManagerOptions::hash_ranges));
    /// label mode otherwise.
    pub(crate) ranges: Option<ShardField>,
}

impl Sharding {
    pub(crate) fn new(ring: String, shard: String) -> Self {
        Self {
            ring,
            shard,
            every: Duration::from_secs(5),
            ranges: None,
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

    /// The sharder's election (`<ring>-sharder`: one replica of the ring places the
    /// objects), or range mode's coordinator's (`<ring>-slot-coordinator`: one plans the
    /// slots; apart, since a range-mode manager's fleet controllers are placed by labels).
    fn election(&self, shard_lease: &LeaderElectionConfig, what: &str) -> LeaderElectionConfig {
        let mut config = LeaderElectionConfig::new(format!("{}-{what}", self.ring))
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
    let elector = LeaderElector::new(leases.clone(), sharding.election(&shard_lease, "sharder"))
        .map_err(|e| e.to_string())?;
    let live = LiveShards::new(leases, sharding.ring.clone());
    let reads = SharedReads::new(&live);
    let sharder = Sharder::new(sharding.ring.clone());
    let rounds = while_elected(&elector, &reads, || {
        place_sets(&sharder, &kind_sets, &reads, sharding.every)
    });
    tokio::select! {
        () = elector.run(cancel.clone()) => {}
        () = rounds => {}
    }
    Ok(())
}

/// Range mode's coordinator ([`slots`](crate::sharding::slots)): while this replica is
/// elected on `<ring>-slot-coordinator`, a round of the slot plan each period, until
/// `cancel`.
pub(crate) async fn run_coordinator(
    sharding: Sharding,
    shard_lease: LeaderElectionConfig,
    leases: Arc<dyn LeaseStore>,
    cancel: CancellationToken,
) -> Result<(), String> {
    let election = sharding.election(&shard_lease, "slot-coordinator");
    let elector = LeaderElector::new(leases.clone(), election).map_err(|e| e.to_string())?;
    let live = LiveShards::new(leases.clone(), sharding.ring.clone());
    let reads = SharedReads::new(&live);
    let tables = TableStore::new(leases, &sharding.ring);
    let rounds = while_elected(&elector, &reads, || async {
        loop {
            if let Err(error) = coordinate_once(&tables, &live).await {
                tracing::debug!(%error, ring = %sharding.ring, "a slot plan was not written; planning again");
            }
            tokio::time::sleep(sharding.every).await;
        }
    });
    tokio::select! {
        () = elector.run(cancel.clone()) => {}
        () = rounds => {}
    }
    Ok(())
}

/// Range mode's replica half: serves the slots the table gives this replica through
/// `share` (its controllers' reconciles and informers) while it holds its shard Lease (a
/// leader-only task), each period. Once stopped no reconcile starts (the running ones
/// drain with the controllers; the informers stop with the factory).
pub(crate) async fn run_slots(
    sharding: Sharding,
    leases: Arc<dyn LeaseStore>,
    share: Arc<RangeShare>,
    cancel: CancellationToken,
) -> Result<(), String> {
    let tables = TableStore::new(leases, &sharding.ring);
    tokio::select! {
        () = serve_slots(&tables, &sharding.shard, &share, sharding.every) => {}
        () = cancel.cancelled() => {}
    }
    share.halt();
    Ok(())
}

/// Runs `work` while elected by `elector`, observing the shard Leases meanwhile (so that,
/// once elected, this replica knows for how long each has gone unchanged: a new observer
/// would count a dead shard alive for one more Lease duration); `work` is dropped the
/// moment the election is lost.
async fn while_elected<Fut: Future<Output = ()>>(
    elector: &LeaderElector,
    reads: &SharedReads<'_>,
    work: impl Fn() -> Fut,
) {
    let mut leading = elector.leading();
    loop {
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
        tokio::select! {
            () = work() => return,
            lost = leading.wait_for(|l| !*l) => if lost.is_err() { return },
        }
    }
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
