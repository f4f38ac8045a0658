//! Sharded controllers: N replicas, each caching and reconciling about 1/N of the objects
//! (issue #27, being built).
//!
//! What is here: the placement every replica agrees on without talking to the others —
//! [`ShardKey`] (an object's own key, or its controller's, so an owner and its children
//! share a shard) and [`Ring`] (a consistent-hash ring over the live shards: a joining
//! shard takes about 1/N of the keys, a leaving one gives up only its own). Both follow
//! the kubernetes-controller-sharding project, so its sharder and ours place an object on
//! the same shard.
//!
//! Still to come, in this order: shard Leases for membership, the elected sharder that
//! labels each object with its shard, per-shard informers filtered by that label, the
//! drain handover that keeps two replicas from ever reconciling one object at once, and
//! `.sharded(ring)` on the manager.

mod key;
mod ring;

pub use self::{
    key::ShardKey,
    ring::{Ring, TOKENS_PER_SHARD},
};
