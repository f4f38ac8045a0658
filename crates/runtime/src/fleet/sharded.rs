//! A sharded fleet controller's half of placement: each member's sharded kinds (its own
//! kind, the kinds it owns), tagged with the member, handed to the ring's sharder while the
//! member is followed — so the sharder labels `(cluster, object)` pairs in each member, and
//! each replica's member informers select its own.

use crate::sharding::{KindSets, ShardedKind};

/// Where a fleet controller's member kinds go, and how they are placed.
#[derive(Clone)]
pub(crate) struct Placing {
    pub(crate) controller: String,
    /// Each member whole on one shard (its name is the key), not object by object.
    pub(crate) pinned: bool,
    pub(crate) kinds: KindSets,
}

impl Placing {
    fn by(&self, cluster: &str) -> String {
        format!("{}/{cluster}", self.controller)
    }

    /// `cluster`'s member controller reads `kinds` sharded: the sharder places them.
    pub(super) fn place(&self, cluster: &str, kinds: &[ShardedKind]) {
        let tagged: Vec<ShardedKind> = kinds
            .iter()
            .map(|k| k.clone().in_member(cluster, self.pinned))
            .collect();
        self.kinds.extend(&self.by(cluster), &tagged);
    }

    /// `cluster` is no longer followed: its kinds are not placed any more.
    pub(super) fn forget(&self, cluster: &str) {
        self.kinds.remove(&self.by(cluster));
    }
}
